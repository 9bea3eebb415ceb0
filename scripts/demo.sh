#!/usr/bin/env bash
# Runs Stowage's main job on the bundled fixture after installing what is missing (scripts/ensure-deps.sh) and
# building the `stowage` tool: `stowage demo` starts an embedded key server and origin on 127.0.0.1, packages
# Fixtures/demo with SAMPLE-AES, downloads it with two audio languages and subtitles, verifies it, plays it through
# ffmpeg, renews the lease, shows the refusal after the playback window, and deletes the asset. Extra arguments go to
# `stowage demo` (e.g. --profile 3g, --keep).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
stowage_ensure_deps

swift build --product stowage >/dev/null
exec "$(swift build --show-bin-path)/stowage" demo "$@"
