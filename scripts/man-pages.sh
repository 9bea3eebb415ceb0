#!/usr/bin/env bash
# Writes the manual pages (docs/man/man1/stowage*.1, one per command: `MANPATH=docs/man man stowage-download`) and
# the shell completions (completions/stowage.bash, _stowage for zsh, stowage.fish) from the argument parser's own
# description of the commands, so that they say what `--help` says. Run it after changing a command's options or
# help, and commit what it writes; ManualPageTests fails when a page or a completion script no longer matches.
#
#   bash scripts/man-pages.sh
#
# Needs: Swift on PATH. About 12 minutes here: swift-argument-parser's generate-manual plugin builds `stowage` and
# its generator in a build folder of its own.
set -euo pipefail
cd "$(dirname "$0")/.."

# A fixed date, so that pages only change when a command does.
date="${STOWAGE_MANUAL_DATE:-2026-12-07}"
swift package --disable-sandbox plugin generate-manual --multi-page --date "$date" >/dev/null
generated=".build/plugins/GenerateManual/outputs/stowage"
[ -f "$generated/stowage.1" ] || { echo "man-pages.sh: the generator wrote no $generated/stowage.1" >&2; exit 1; }

rm -rf docs/man
mkdir -p docs/man/man1
# stowage.keys.renew.1 becomes stowage-keys-renew.1, and so do its references to other pages (.Xr stowage.keys 1),
# as git names its pages: `man stowage-keys-renew`.
python3 - "$generated" docs/man/man1 <<'PY'
import pathlib, re, sys
source, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def dashed(match):
    return match.group(0).replace(".", "-")
for page in sorted(source.glob("*.1")):
    lines = []
    for line in page.read_text().splitlines(keepends=True):
        # Only the page's title and its references to other pages: text that names a file keeps its dots.
        if line.startswith(".Xr ") or line.startswith(".Dt "):
            line = re.sub(r"(?i)stowage(\.[a-z0-9-]+)+(?= )", dashed, line)
        lines.append(line)
    (target / (page.stem.replace(".", "-") + ".1")).write_text("".join(lines))
PY

binary="$(swift build --show-bin-path)/stowage"
mkdir -p completions
"$binary" --generate-completion-script bash > completions/stowage.bash
"$binary" --generate-completion-script zsh > completions/_stowage
"$binary" --generate-completion-script fish > completions/stowage.fish
echo "man-pages.sh: $(ls docs/man/man1 | wc -l) pages in docs/man/man1, completions for bash, zsh and fish in completions/"
