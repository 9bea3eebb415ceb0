#!/usr/bin/env bash
# Fault soak (docs/RELIABILITY.md): SIGKILLs `stowage download` at N seeded random moments over a lossy link
# (`stowage origin --profile lossy`), resuming each time, then does the same to the background service with the
# download inside it; after each, every file must equal the origin's, every SQLite file pass PRAGMA integrity_check,
# `stowage keys audit --verify` pass and `verify --deep` be clean. Usage: scripts/soak.sh [N (default 50)] [--seed S]
# [--keep]. Installs what is missing (scripts/ensure-deps.sh) and builds `stowage` (debug) unless STOWAGE_BIN is set.
set -euo pipefail
cd "$(dirname "$0")/.."
kills="${1:-50}"
shift || true
if [[ -z "${STOWAGE_BIN:-}" ]]; then
    source scripts/ensure-deps.sh
    stowage_ensure_deps
    swift build --product stowage >/dev/null
    STOWAGE_BIN="$(swift build --show-bin-path)/stowage"
fi
status=0
for mode in cli service; do
    python3 scripts/soak.py --kills "$kills" --mode "$mode" --stowage "$STOWAGE_BIN" "$@" || status=1
done
exit "$status"
