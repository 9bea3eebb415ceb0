#!/usr/bin/env bash
# Builds `stowage` in release mode and runs Benchmarks/service.py: `download --background` hand-off time, the service's
# --limit-rate held over 20 s, --max-downloads 1 keeping the queue, SIGTERM. Prints one Markdown table with a verdict
# per row (exit 1 if a target is missed). Options are service.py's (--rate 1M --window 20 --submissions 5 --size 48).
# The generated asset goes to $STOWAGE_BENCH_DIR (default $TMPDIR or /tmp, stowage-bench-service/), never the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
stowage_ensure_deps
swift build -c release --product stowage >/dev/null
STOWAGE_BIN="$(swift build -c release --show-bin-path)/stowage" exec python3 Benchmarks/service.py "$@"
