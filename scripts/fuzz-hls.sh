#!/usr/bin/env bash
# Builds the libFuzzer target for the HLS playlist parser (Fuzz/HLSFuzz) with swiftc -sanitize=fuzzer,address and
# fuzzes it for $1 seconds (default 60). Needs a Swift 6.x toolchain for Linux with libFuzzer (swift.org builds
# have it; swiftc on PATH, else /opt/swift/usr/bin); no network, no SwiftPM. Everything goes to .build-fuzz/
# (git-ignored); crashes land in .build-fuzz/crashes/ and make the script exit non-zero. See docs/fuzzing.md.
#
# Usage: scripts/fuzz-hls.sh [SECONDS] [extra libFuzzer flags...]
#   FUZZ_NO_BUILD=1 reuses the last build; SWIFTC=/path/to/swiftc picks a toolchain.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SECONDS_TO_RUN="${1:-60}"
shift || true

OUT=.build-fuzz/hls
NAME=fuzz-hls
BIN="$OUT/hls-fuzz"
DICT=Fuzz/hls.dict
source scripts/fuzz-common.sh

# --- Build -----------------------------------------------------------------------------------------------------
# HLS is compiled as its own module over StowageCore (with the package's language mode and upcoming features), so the
# harness uses only its public API through `import HLS`, exactly like a client.
if [[ "${FUZZ_NO_BUILD:-0}" != 1 || ! -x "$BIN" ]]; then
    mapfile -t core < <(find Sources/StowageCore -name '*.swift' | LC_ALL=C sort)
    mapfile -t hls < <(find Sources/HLS -name '*.swift' | LC_ALL=C sort)
    [[ ${#hls[@]} -gt 0 ]] || { echo "fuzz-hls: no sources under Sources/HLS" >&2; exit 2; }
    fuzz_build_module StowageCore "${core[@]}"
    fuzz_build_module HLS "${hls[@]}"
    fuzz_link "$BIN" HLSFuzz Fuzz/HLSFuzz/*.swift "$OUT/obj/StowageCore.o" "$OUT/obj/HLS.o"
fi

# --- Seeds -----------------------------------------------------------------------------------------------------
# Regenerated every run; libFuzzer adds what it finds to $CORPUS, which persists between runs.
rm -f "$SEEDS"/*
shopt -s nullglob globstar
n=0
for file in Tests/HLSTests/Playlists/*.m3u8 Fixtures/**/*.m3u8; do
    n=$((n + 1))
    cp "$file" "$SEEDS/file-$n-$(basename "$file")"
done
shopt -u nullglob globstar

seed() { printf '%s\n' "$2" >"$SEEDS/inline-$1.m3u8"; }
seed multivariant '#EXTM3U
#EXT-X-VERSION:7
#EXT-X-INDEPENDENT-SEGMENTS
#EXT-X-START:TIME-OFFSET=-12.5,PRECISE=YES
#EXT-X-DEFINE:NAME="host",VALUE="https://cdn.example.com"
#EXT-X-DEFINE:QUERYPARAM="x"
#EXT-X-CONTENT-STEERING:SERVER-URI="/steer?x={$x}",PATHWAY-ID="CDN-A"
#EXT-X-SESSION-DATA:DATA-ID="com.example.title",VALUE="Example",LANGUAGE="en"
#EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI="skd://key1",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1"
#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="en",NAME="English",DEFAULT=YES,AUTOSELECT=YES,CHANNELS="2",URI="audio/en.m3u8"
#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="fr",NAME="Français",FORCED=NO,URI="subs/fr.m3u8"
#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="CC1",INSTREAM-ID="CC1"
# a comment
#EXT-X-STREAM-INF:BANDWIDTH=1280000,AVERAGE-BANDWIDTH=1000000,CODECS="avc1.4d401f,mp4a.40.2",RESOLUTION=1280x720,FRAME-RATE=29.970,AUDIO="aac",SUBTITLES="subs",CLOSED-CAPTIONS="cc",HDCP-LEVEL=TYPE-0,VIDEO-RANGE=SDR,X-COM-EXAMPLE="a,b=c"
{$host}/video/720p.m3u8
#EXT-X-STREAM-INF:BANDWIDTH=640000,CLOSED-CAPTIONS=NONE,SCORE=1.5,PATHWAY-ID="CDN-A"
low/index.m3u8?x={$x}
#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=86000,URI="iframes.m3u8",CODECS="avc1.4d401f"'
seed vod-aes '#EXTM3U
#EXT-X-VERSION:3
#EXT-X-TARGETDURATION:10
#EXT-X-MEDIA-SEQUENCE:5
#EXT-X-DISCONTINUITY-SEQUENCE:2
#EXT-X-PLAYLIST-TYPE:VOD
#EXT-X-KEY:METHOD=AES-128,URI="https://keys.example.com/k1",IV=0x0123456789abcdef0123456789ABCDEF
#EXTINF:9.009,first
seg0.ts
#EXT-X-DISCONTINUITY
#EXT-X-PROGRAM-DATE-TIME:2024-01-01T00:00:00.000Z
#EXT-X-KEY:METHOD=AES-128,URI="k2"
#EXTINF:10,
seg1.ts
#EXT-X-KEY:METHOD=NONE
#EXT-X-GAP
#EXTINF:3.5,
seg2.ts
#EXT-X-ENDLIST'
seed fmp4-byterange '#EXTM3U
#EXT-X-VERSION:7
#EXT-X-TARGETDURATION:4
#EXT-X-DEFINE:NAME="f",VALUE="main.mp4"
#EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://k",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1"
#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="data:text/plain;base64,AAAA",KEYFORMAT="urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed",IV=0x3334353637383930
#EXT-X-MAP:URI="{$f}",BYTERANGE="720@0"
#EXT-X-BITRATE:1500
#EXT-X-BYTERANGE:1000@720
#EXTINF:4.0,
{$f}
#EXT-X-BYTERANGE:2000
#EXTINF:4.0,
{$f}
#EXT-X-BYTERANGE:500@5000
#EXTINF:2.5,
other.mp4
#EXT-X-ENDLIST'
seed ll-hls '#EXTM3U
#EXT-X-TARGETDURATION:4
#EXT-X-VERSION:9
#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=24,PART-HOLD-BACK=3.012,HOLD-BACK=12,CAN-SKIP-DATERANGES=YES
#EXT-X-PART-INF:PART-TARGET=1.004
#EXT-X-MEDIA-SEQUENCE:266
#EXT-X-SKIP:SKIPPED-SEGMENTS=3,RECENTLY-REMOVED-DATERANGES="ad1\tad2"
#EXT-X-DATERANGE:ID="ad3",CLASS="com.example.ad",START-DATE="2024-01-01T00:00:10Z",DURATION=30.5,PLANNED-DURATION=30,SCTE35-OUT=0xFC002F,X-AD-ID="abc"
#EXTINF:4.00008,
fileSequence266.mp4
#EXT-X-PART:DURATION=1.002,URI="filePart267.0.mp4",INDEPENDENT=YES
#EXT-X-PART:DURATION=1.002,URI="filePart267.1.mp4",BYTERANGE="100@0",GAP=NO
#EXT-X-PRELOAD-HINT:TYPE=PART,URI="filePart267.2.mp4",BYTERANGE-START=0,BYTERANGE-LENGTH=4096
#EXT-X-RENDITION-REPORT:URI="../1M/waitForMSN.php",LAST-MSN=273,LAST-PART=2'
seed variables '#EXTM3U
#EXT-X-TARGETDURATION:6
#EXT-X-DEFINE:NAME="base",VALUE="https://cdn.example.com/v1"
#EXT-X-DEFINE:NAME="iv",VALUE="00112233445566778899aabbccddeeff"
#EXT-X-DEFINE:NAME="tok",VALUE="cafe"
#EXT-X-DEFINE:QUERYPARAM="x"
#EXT-X-KEY:METHOD=AES-128,URI="{$base}/key?x={$x}",IV=0x{$iv},X-TOKEN=0x{$tok}
#EXT-X-MAP:URI="{$base}/init.mp4",BYTERANGE="1000@0"
#EXT-X-DATERANGE:ID="{$x}",START-DATE="2024-01-01T00:00:00Z",X-CUSTOM="{$base}",X-HEX=0xAB{$tok}
#EXTINF:6,
{$base}/seg-{$x}.m4s
#EXT-X-ENDLIST'
seed quirks $'\xef\xbb\xbf#EXTM3U\r\n#EXT-X-TARGETDURATION:9.5\r\n#EXT-X-START:TIME-OFFSET=1e2\r\n#EXT-UNKNOWN:foo\r\n#EXTINF: 1.5e0 , title, with comma\r\nsegment with space.ts\r\n#EXT-X-DATERANGE:ID="x",CLASS="c",END-ON-NEXT=YES\r\n  #EXT-X-ENDLIST  '

# --- Fuzz ------------------------------------------------------------------------------------------------------
fuzz_run "$BIN" "$SECONDS_TO_RUN" 65536 -dict="$DICT" "$@"
