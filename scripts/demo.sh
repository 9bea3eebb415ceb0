#!/usr/bin/env bash
# Runs Stowage's main job on the bundled fixtures after installing what is missing (scripts/ensure-deps.sh) and
# building the `stowage` tool. Today the main job is `stowage inspect --deep` on the bundled multivariant playlist;
# `stowage demo` (key server + origin + download + verify + play) replaces it as those capabilities land.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
stowage_ensure_deps

swift build --product stowage >/dev/null
exec "$(swift build --show-bin-path)/stowage" inspect Fixtures/playlists/master.m3u8 --deep
