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
BIN="$OUT/media-fuzz"
CORPUS="$OUT/corpus"
SEEDS="$OUT/seeds"
CRASHES="$OUT/crashes"
mkdir -p "$OUT/obj" "$CORPUS" "$SEEDS" "$CRASHES"

if [[ -z "${SWIFTC:-}" ]]; then
    if command -v swiftc >/dev/null 2>&1; then SWIFTC="$(command -v swiftc)"; else SWIFTC=/opt/swift/usr/bin/swiftc; fi
fi

# --- Build -----------------------------------------------------------------------------------------------------
# StowageCore, StowageCrypto (over the COpenSSL module map) and MediaCrypto are compiled as their own modules, with
# the package's language mode and upcoming features, so the harness uses MediaCrypto's public API like a client.
COMMON_FLAGS=(-swift-version 6 -parse-as-library -sanitize=fuzzer,address -O -g -I "$OUT/obj" -Xcc -fmodule-map-file=Sources/COpenSSL/module.modulemap -I Sources/COpenSSL)
MODULE_FLAGS=(
    -enable-upcoming-feature ExistentialAny
    -enable-upcoming-feature MemberImportVisibility
    -enable-upcoming-feature InternalImportsByDefault
)
LINK_FLAGS=(-lcrypto)
if [[ -x "$(dirname "$SWIFTC")/ld.lld" ]]; then LINK_FLAGS+=(-use-ld=lld); fi

build_module() {  # NAME
    mapfile -t sources < <(find "Sources/$1" -name '*.swift' | LC_ALL=C sort)
    echo "fuzz-media: compiling ${#sources[@]} $1 sources"
    "$SWIFTC" "${COMMON_FLAGS[@]}" "${MODULE_FLAGS[@]}" -module-name "$1" -wmo \
        -emit-module -emit-module-path "$OUT/obj/$1.swiftmodule" -emit-object -o "$OUT/obj/$1.o" "${sources[@]}"
}

if [[ "${FUZZ_NO_BUILD:-0}" != 1 || ! -x "$BIN" ]]; then
    build_module StowageCore
    build_module StowageCrypto
    build_module MediaCrypto
    echo "fuzz-media: linking $BIN"
    "$SWIFTC" "${COMMON_FLAGS[@]}" "${LINK_FLAGS[@]}" -module-name MediaFuzz Fuzz/MediaFuzz/*.swift \
        "$OUT/obj/StowageCore.o" "$OUT/obj/StowageCrypto.o" "$OUT/obj/MediaCrypto.o" -o "$BIN.tmp"
    mv -f "$BIN.tmp" "$BIN"
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
before="$(find "$CRASHES" -type f | wc -l)"
echo "fuzz-media: fuzzing for ${SECONDS_TO_RUN}s (corpus $CORPUS, seeds $SEEDS, crashes -> $CRASHES/)"
status=0
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"
"$BIN" -max_total_time="$SECONDS_TO_RUN" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$CRASHES/" -print_final_stats=1 "$@" "$CORPUS" "$SEEDS" || status=$?
after="$(find "$CRASHES" -type f | wc -l)"

if [[ $status -ne 0 || $after -gt $before ]]; then
    echo "fuzz-media: FAILED (libFuzzer exit $status); new artifacts in $CRASHES/:" >&2
    find "$CRASHES" -type f -newer "$BIN" -print >&2 || true
    echo "fuzz-media: reproduce with: SWIFT_BACKTRACE=enable=no $BIN <file>" >&2
    exit $((status == 0 ? 1 : status))
fi
echo "fuzz-media: no crashes"
