#!/usr/bin/env python3
"""Re-cuts Shaka Packager's SAMPLE-AES transport stream segments at packets inside PES packets (TEST MATERIAL).

Byte-count segmenters (VLC's livehttp, some live encoders) cut a transport stream at any packet, so a PES packet, and
the NAL units or audio frames in it, begins in one segment and ends in the next. No tool here writes SAMPLE-AES that
way, so this joins a packager's segments (encrypted by Shaka Packager, not by Stowage) and cuts them again:

    recut-ts.py SOURCE_DIR CLEAR_TWIN_DIR OUT_DIR

For video.m3u8 and audio.m3u8 of SOURCE_DIR, with N segments, it writes N new segments split_video_K.ts /
split_audio_K.ts. Cut K lies inside source segment K (so every new segment still holds one PAT/PMT, the one at the
start of a source segment) at a packet that continues a PES packet: where possible one whose SAMPLE-AES form is
longer than its clear twin's (emulation prevention bytes added by encryption), else the one nearest the middle; when
no PES packet there spans two packets (short audio frames), at the middle, between PES packets. The
playlists keep the source's EXT-X-KEY; EXTINF is the source's. Standard library only; deterministic.
"""
import os
import re
import shutil
import sys

PACKET = 188


def packets(data):
    if len(data) % PACKET:
        sys.exit("error: not whole 188-byte packets")
    return [data[i:i + PACKET] for i in range(0, len(data), PACKET)]


def pid(packet):
    return ((packet[1] & 0x1F) << 8) | packet[2]


def starts_unit(packet):
    return packet[1] & 0x40 and packet[3] & 0x10


def payload(packet):
    control = (packet[3] >> 4) & 3
    if not control & 1:
        return b""
    offset = 4 + (1 + packet[4] if control & 2 else 0)
    return packet[offset:]


def media_pid(pkts):
    """The PID with the most payload packets (the rendition's one media stream)."""
    counts = {}
    for p in pkts:
        if pid(p) >= 0x20 and pid(p) != 0x1FFF:
            counts[pid(p)] = counts.get(pid(p), 0) + 1
    return max(counts, key=counts.get)


def pes_list(pkts, stream):
    """(first packet index, last packet index, PES bytes) of each PES packet on `stream`."""
    result = []
    current = None
    for index, p in enumerate(pkts):
        if pid(p) != stream:
            continue
        if starts_unit(p):
            if current:
                result.append(tuple(current))
            current = [index, index, bytearray(payload(p))]
        elif current:
            current[1] = index
            current[2] += payload(p)
    if current:
        result.append(tuple(current))
    return result


def recut(source, twin, out, playlist):
    text = open(os.path.join(source, playlist)).read()
    names = [line for line in text.splitlines() if line and not line.startswith("#")]
    twin_names = [line for line in open(os.path.join(twin, playlist)).read().splitlines()
                  if line and not line.startswith("#")]
    segments = [open(os.path.join(source, n), "rb").read() for n in names]
    starts = [0]
    for s in segments:
        starts.append(starts[-1] + len(s) // PACKET)
    pkts = packets(b"".join(segments))
    clear = packets(b"".join(open(os.path.join(twin, n), "rb").read() for n in twin_names))
    stream = media_pid(pkts)
    encrypted_pes = pes_list(pkts, stream)
    clear_pes = pes_list(clear, media_pid(clear))
    if len(encrypted_pes) != len(clear_pes):
        sys.exit("error: %s: %d PES packets encrypted, %d clear" % (playlist, len(encrypted_pes), len(clear_pes)))
    cuts = [0]
    for k in range(1, len(segments)):
        low, high = starts[k - 1] + 8, starts[k] - 1
        # PES packets of at least two packets whose continuation lies inside source segment k.
        spanning = [(e, c) for e, c in zip(encrypted_pes, clear_pes) if e[1] > e[0] and low <= e[0] < high]
        middle = (low + high) // 2
        if not spanning:
            # Every PES packet fits one packet (short audio frames): cut between them, still before the PAT/PMT.
            cuts.append(middle)
            print("%s: cut %d at packet %d (no PES packet here spans two packets)" % (playlist, k, middle))
            continue
        grown = [pair for pair in spanning if len(pair[0][2]) > len(pair[1][2])]
        chosen = (grown or sorted(spanning, key=lambda pair: abs(pair[0][0] - middle)))[0][0]
        # The first packet of the PES after its start: the cut leaves the start (and the PES header) behind.
        cut = next(i for i in range(chosen[0] + 1, chosen[1] + 1) if pid(pkts[i]) == stream)
        cuts.append(cut)
        print("%s: cut %d at packet %d, inside the PES packet at packet %d (%d bytes encrypted, %s)" % (
            playlist, k, cut, chosen[0], len(chosen[2]),
            "longer than clear" if grown else "as long as clear"))
    cuts.append(len(pkts))
    prefix = "split_" + playlist.split(".")[0] + "_"
    new_names = []
    for k in range(len(segments)):
        name = "%s%d.ts" % (prefix, k + 1)
        open(os.path.join(out, name), "wb").write(b"".join(pkts[cuts[k]:cuts[k + 1]]))
        new_names.append(name)
    lines = []
    replacements = iter(new_names)
    for line in text.splitlines():
        if line.startswith("## Generated"):
            line += " (re-cut inside PES packets by Fixtures/media/recut-ts.py)"
        elif line and not line.startswith("#"):
            line = next(replacements)
        lines.append(line)
    open(os.path.join(out, playlist), "w").write("\n".join(lines) + "\n")


def main():
    source, twin, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.remove(os.path.join(out, name))
    for playlist in ("video.m3u8", "audio.m3u8"):
        recut(source, twin, out, playlist)
    shutil.copy(os.path.join(source, "master.m3u8"), out)
    for name in os.listdir(source):
        if name.endswith(".test.key"):
            shutil.copy(os.path.join(source, name), out)
    keys = re.findall(r'URI="([^"]+)"', open(os.path.join(out, "video.m3u8")).read())
    if not all(os.path.exists(os.path.join(out, k)) for k in keys):
        sys.exit("error: a key file is missing")


if __name__ == "__main__":
    main()
