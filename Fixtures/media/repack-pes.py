#!/usr/bin/env python3
"""Moves the end of every third PES packet into the next one, so NAL units and audio frames span PES packets (TEST
MATERIAL).

Some muxers cut PES packets by size rather than by access unit, so an H.264 NAL unit or an audio frame begins in one
PES packet and ends in the next. No tool here writes SAMPLE-AES that way, so this takes Shaka Packager's SAMPLE-AES
segments (encrypted by Shaka Packager, not by Stowage) and packs their elementary streams into PES packets again:

    repack-pes.py SOURCE_DIR OUT_DIR

For each segment of video.m3u8 and audio.m3u8 in SOURCE_DIR it writes repacked_<name>.ts: the same PAT and PMT, the
same PES headers (PTS, DTS; PES_packet_length corrected), and the same elementary stream bytes, but from every third
PES packet (not a segment's last) the last bytes move to the front of the next PES packet's payload: half the last NAL
unit (at most 150 bytes) for video, half the last audio frame for audio; and a video PES packet whose last NAL unit
holds an emulation prevention byte is cut just after the first of them. The elementary stream of each segment, joined,
is unchanged, so after decryption it equals the clear twin's. Transport packets are written afresh (the first packet
of each PES packet keeps its adaptation field's flags and PCR; continuity counters run on from the source's first).
Standard library only; deterministic.
"""
import os
import shutil
import sys

PACKET = 188


def pid_of(packet):
    return ((packet[1] & 0x1F) << 8) | packet[2]


def adaptation(packet):
    """The adaptation field's flags and PCR (the fields kept), or None."""
    if not (packet[3] >> 4) & 2 or packet[4] == 0:
        return None
    flags = packet[5] & 0xF0  # discontinuity, random access, priority, PCR; OPCR and the rest dropped
    kept = bytes([flags])
    if flags & 0x10:
        kept += packet[6:12]
    return kept


def payload(packet):
    control = (packet[3] >> 4) & 3
    if not control & 1:
        return b""
    return packet[4 + (1 + packet[4] if control & 2 else 0):]


def write_packets(pid, pes, first_adaptation, counter):
    """Transport packets carrying `pes`; returns them and the next continuity counter."""
    packets = []
    offset = 0
    first = True
    while offset < len(pes):
        field = first_adaptation if first else None
        remaining = len(pes) - offset
        capacity = 184 - (len(field) + 1 if field is not None else 0)
        if remaining < capacity:
            # Stuff the adaptation field so that the payload ends the packet.
            need = capacity - remaining
            if field is None:
                field = b"" if need == 1 else b"\x00" + b"\xff" * (need - 2)
            else:
                field = field + b"\xff" * need
            capacity = remaining
        count = min(capacity, remaining)
        header = bytes([0x47, (0x40 if first else 0) | (pid >> 8), pid & 0xFF,
                        (0x30 if field is not None else 0x10) | counter])
        body = (bytes([len(field)]) + field if field is not None else b"") + pes[offset:offset + count]
        packet = header + body
        if len(packet) != PACKET:
            sys.exit("error: packet of %d bytes" % len(packet))
        packets.append(packet)
        counter = (counter + 1) & 0x0F
        offset += count
        first = False
    return packets, counter


def header_length(pes):
    return 9 + pes[8]


def start_codes(es):
    """Offsets of the bytes after each 00 00 01 in an H.264 elementary stream."""
    found = []
    index = es.find(b"\x00\x00\x01")
    while index >= 0:
        found.append(index + 3)
        index = es.find(b"\x00\x00\x01", index + 3)
    return found


def frame_starts(es, codec):
    """Offsets of each audio frame in a PES payload made of whole frames."""
    starts = []
    offset = 0
    while offset + 7 <= len(es):
        starts.append(offset)
        if codec == "aac":
            length = ((es[offset + 3] & 3) << 11) | (es[offset + 4] << 3) | (es[offset + 5] >> 5)
        else:
            sizes = {0: [64, 64, 80, 80, 96, 96, 112, 112, 128, 128, 160, 160, 192, 192, 224, 224, 256, 256, 320, 320,
                         384, 384, 448, 448, 512, 512, 640, 640, 768, 768, 896, 896, 1024, 1024, 1152, 1152, 1280,
                         1280]}
            bsid = es[offset + 5] >> 3
            if bsid <= 10:
                fscod, code = es[offset + 4] >> 6, es[offset + 4] & 0x3F
                if fscod != 0:
                    sys.exit("error: only 48 kHz AC-3 here")
                length = sizes[0][code] * 2
            else:
                length = ((((es[offset + 2] & 7) << 8) | es[offset + 3]) + 1) * 2
        if length <= 0:
            sys.exit("error: bad audio frame")
        offset += length
    return starts


def repack(source, out, name, codec_of):
    data = open(os.path.join(source, name), "rb").read()
    packets = [data[i:i + PACKET] for i in range(0, len(data), PACKET)]
    media = {}
    for p in packets:
        if pid_of(p) >= 0x20 and pid_of(p) != 0x1FFF:
            media[pid_of(p)] = media.get(pid_of(p), 0) + 1
    stream = max(media, key=media.get)
    # PES packets of the media PID, each with its first packet's index and adaptation field.
    pes_list = []
    for index, p in enumerate(packets):
        if pid_of(p) != stream:
            continue
        if p[1] & 0x40:
            pes_list.append([index, adaptation(p), bytearray(payload(p)), p[3] & 0x0F])
        elif pes_list:
            pes_list[-1][2] += payload(p)
    codec = codec_of
    moved = 0
    for k in range(0, len(pes_list) - 1):
        pes, following = pes_list[k][2], pes_list[k + 1][2]
        h = header_length(pes)
        es = bytes(pes[h:])
        if codec == "h264":
            last = start_codes(es)[-1]
            # A NAL unit with emulation prevention bytes (every 00 00 03 in an encrypted one is the outer layer's) is
            # cut just after its first, so that bytes are removed on both sides of the cut; else every third one.
            escape = es.find(b"\x00\x00\x03", last)
            if escape >= 0 and len(es) - (escape + 4) > 0:
                count = len(es) - (escape + 4)
            elif k % 3 == 0:
                count = min(150, (len(es) - last) // 2)
            else:
                continue
        elif k % 3 != 0:
            continue
        else:
            last = frame_starts(es, codec)[-1]
            count = (len(es) - last) // 2
        if count <= 0:
            continue
        tail = pes[len(pes) - count:]
        del pes[len(pes) - count:]
        g = header_length(following)
        following[g:g] = tail
        for changed in (pes, following):
            if changed[4] or changed[5]:
                length = len(changed) - 6
                changed[4], changed[5] = length >> 8, length & 0xFF
        moved += 1
    output = []
    counter = pes_list[0][3] if pes_list else 0
    starts = {entry[0]: entry for entry in pes_list}
    for index, p in enumerate(packets):
        if pid_of(p) != stream:
            output.append(p)
        elif index in starts:
            entry = starts[index]
            written, counter = write_packets(stream, bytes(entry[2]), entry[1], counter)
            output.extend(written)
    target = os.path.join(out, "repacked_" + name)
    open(target, "wb").write(b"".join(output))
    print("%s: %d of %d PES packets end inside a NAL unit or frame that the next one finishes" % (
        name, moved, len(pes_list)))
    return "repacked_" + name


def main():
    source, out = sys.argv[1:3]
    codec = {"multislice": "aac", "aac": "aac", "ac3": "ac3"}
    audio_codec = next((v for k, v in codec.items() if source.rstrip("/").endswith(k)), "aac")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.remove(os.path.join(out, name))
    for playlist, kind in (("video.m3u8", "h264"), ("audio.m3u8", audio_codec)):
        text = open(os.path.join(source, playlist)).read()
        lines = []
        for line in text.splitlines():
            if line.startswith("## Generated"):
                line += " (PES packets repacked by Fixtures/media/repack-pes.py)"
            elif line and not line.startswith("#"):
                line = repack(source, out, line, kind)
            lines.append(line)
        open(os.path.join(out, playlist), "w").write("\n".join(lines) + "\n")
    shutil.copy(os.path.join(source, "master.m3u8"), out)
    for name in os.listdir(source):
        if name.endswith(".test.key"):
            shutil.copy(os.path.join(source, name), out)


if __name__ == "__main__":
    main()
