#!/usr/bin/env bash
# Builds `stowage` in release mode and runs Benchmarks/playback.py: `stowage play` time to first byte (master and
# first segment, medians of 5 fresh starts) and sustained MB/s served, for a complete package and for one still downloading, beside nginx
# serving the clear twin. Prints one Markdown table. Options are playback.py's (--size 64 --rate 20M).
# Generated media go to $STOWAGE_BENCH_DIR (default $TMPDIR or /tmp, stowage-bench-playback/), never the repository.
# STOWAGE_BIN=path skips the build (a debug binary gives indicative figures only).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
stowage_ensure_deps
if ! command -v nginx >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nginx >/dev/null
fi
if [ -z "${STOWAGE_BIN:-}" ]; then
    swift build -c release --product stowage >/dev/null
    STOWAGE_BIN="$(swift build -c release --show-bin-path)/stowage"
fi
STOWAGE_BIN="$STOWAGE_BIN" exec python3 Benchmarks/playback.py "$@"
