#!/usr/bin/env bash
# Builds the libFuzzer target for MediaCrypto's segment parsers and decryptors (Fuzz/MediaFuzz: SAMPLE-AES MPEG-TS,
# the TS validator, fMP4 init sections, the fMP4 validator, cbcs and cenc fragments, packed audio, AES-128 padding)
# with swiftc -sanitize=fuzzer,address and fuzzes it for $1 seconds (default 60). Like scripts/fuzz-hls.sh: no
# SwiftPM, everything in .build-fuzz/media/ (git-ignored), crashes in .build-fuzz/media/crashes/ make it exit
# non-zero. Needs libssl-dev (OpenSSL's libcrypto, which StowageCrypto calls). See docs/fuzzing.md.
#
# Usage: scripts/fuzz-media.sh [SECONDS] [extra libFuzzer flags...]
#   FUZZ_NO_BUILD=1 reuses the last build; SWIFTC=/path/to/swiftc picks a toolchain.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SECONDS_TO_RUN="${1:-60}"
shift || true

OUT=.build-fuzz/media
NAME=fuzz-media
BIN="$OUT/media-fuzz"
source scripts/fuzz-common.sh

# --- Build -----------------------------------------------------------------------------------------------------
if [[ "${FUZZ_NO_BUILD:-0}" != 1 || ! -x "$BIN" ]]; then
    for module in StowageCore StowageCrypto MediaCrypto; do
        mapfile -t sources < <(find "Sources/$module" -name '*.swift' | LC_ALL=C sort)
        fuzz_build_module "$module" "${sources[@]}"
    done
    fuzz_link "$BIN" MediaFuzz Fuzz/MediaFuzz/*.swift "$OUT/obj/StowageCore.o" "$OUT/obj/StowageCrypto.o" "$OUT/obj/MediaCrypto.o"
fi

# --- Seeds -----------------------------------------------------------------------------------------------------
# Regenerated every run from the committed test media (Fixtures/media/shaka: packaged by Shaka Packager, with their
# test keys): a mode byte, a chunk-size byte, the key (16 bytes), the IV (16), then the segment; for fMP4 modes the
# init section's length in two bytes, the init section, then a segment.
rm -f "$SEEDS"/*
n=0
hexbytes() { printf '%s' "$1" | sed 's/../\\x&/g'; }
byte() { printf "\\x$(printf %02x "$1")"; }
seed() {  # MODE DIR SEGMENT [INIT]
    n=$((n + 1))
    local dir="$2" key="00000000000000000000000000000000" iv="00000000000000000000000000000000" out="$SEEDS/seed-$n-$1"
    local keyfile
    keyfile="$(find "$dir" -maxdepth 1 -name '*.key' | head -1)"
    if [[ -n "$keyfile" ]]; then key="$(xxd -p "$keyfile" | tr -d '\n')"; fi
    local playlistIV
    playlistIV="$(grep -ho 'IV=0x[0-9a-fA-F]\{32\}' "$dir"/*.m3u8 2>/dev/null | head -1 | cut -c6- || true)"
    if [[ -n "$playlistIV" ]]; then iv="$playlistIV"; fi
    {
        byte "$1"
        byte $((n % 256))
        printf "$(hexbytes "$key")$(hexbytes "$iv")"
        if [[ $# -ge 4 ]]; then
            local length
            length=$(stat -c %s "$4")
            byte $((length >> 8))
            byte $((length & 255))
            cat "$4"
        fi
        cat "$3"
    } >"$out"
}
for dir in Fixtures/media/ts-clear Fixtures/media/shaka/ts-sample-aes-* Fixtures/media/shaka/ts-clear-*; do
    for file in "$dir"/seg_0.ts "$dir"/*_1.ts; do
        [[ -f "$file" ]] || continue
        seed 0 "$dir" "$file"
        seed 1 "$dir" "$file"
    done
done
for dir in Fixtures/media/shaka/fmp4-cbcs Fixtures/media/shaka/fmp4-cbc1 Fixtures/media/shaka/fmp4-clear; do
    for track in audio video; do
        if [[ -f "$dir/${track}_init.mp4" && -f "$dir/${track}_1.m4s" ]]; then seed 2 "$dir" "$dir/${track}_1.m4s" "$dir/${track}_init.mp4"; fi
    done
done
for dir in Fixtures/media/shaka/fmp4-cenc Fixtures/media/shaka/fmp4-cens; do
    for track in audio video; do
        if [[ -f "$dir/${track}_init.mp4" && -f "$dir/${track}_1.m4s" ]]; then seed 3 "$dir" "$dir/${track}_1.m4s" "$dir/${track}_init.mp4"; fi
    done
done
for dir in Fixtures/media/shaka/packed-aac-*; do if [[ -f "$dir/audio_1.aac" ]]; then seed 4 "$dir" "$dir/audio_1.aac"; fi; done
for dir in Fixtures/media/ts-aes128-iv Fixtures/media/fmp4-aes128-openssl; do
    for file in "$dir"/seg_0.*; do if [[ -f "$file" ]]; then seed 5 "$dir" "$file"; fi; done
done
echo "fuzz-media: $n seeds"

# --- Fuzz ------------------------------------------------------------------------------------------------------
fuzz_run "$BIN" "$SECONDS_TO_RUN" 262144 "$@"
