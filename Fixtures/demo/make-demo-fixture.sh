#!/usr/bin/env bash
# Makes Stowage's bundled demo asset in Fixtures/demo/ and checks it: a CLEAR HLS presentation (no encryption;
# `stowage demo` / `stowage package` encrypt it later) with a multivariant playlist, two H.264 video variants in
# MPEG-TS (320x180 Baseline, 640x360 Main, 24 fps, lavfi testsrc2), three AAC-LC audio renditions in MPEG-TS
# (English 440 Hz, French 660 Hz, German 880 Hz sine) and two segmented WebVTT subtitle renditions (English, French).
# 8 s, 2 s segments (4 a rendition), VOD. Everything it makes is TEST / DEMO MATERIAL.
# Deterministic: fixed lavfi sources, x264 single-threaded, bitexact flags; the same ffmpeg gives the same bytes.
# Needs: bash, python3 (standard library), Debian's ffmpeg 5.1 at /usr/bin/ffmpeg (installed with apt-get when
# missing; other versions work but may change the bytes).
# Usage: bash Fixtures/demo/make-demo-fixture.sh   (from anywhere; it replaces master.m3u8, video/, audio/, subs/)
set -euo pipefail

DEMO="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SIZE_LIMIT=$((1536 * 1024))
FFMPEG=/usr/bin/ffmpeg
FFPROBE=/usr/bin/ffprobe

say() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# --- tools -----------------------------------------------------------------------------------------------------------
command -v python3 >/dev/null || die "python3 is required"
if [ ! -x "$FFMPEG" ] || [ ! -x "$FFPROBE" ]; then
    command -v apt-get >/dev/null || die "$FFMPEG is missing and apt-get is not available"
    say "installing ffmpeg (apt-get)"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq ffmpeg >/dev/null
fi
# (No `| head` on a tool's output: with pipefail, the tool's SIGPIPE would end the script.)
FFMPEG_VERSION="$("$FFMPEG" -hide_banner -version | awk 'NR == 1 {print $3}')"
say "ffmpeg $FFMPEG_VERSION"
case "$FFMPEG_VERSION" in
    5.1.*) ;;
    *) printf 'warning: made with Debian ffmpeg 5.1.x; other versions may change the bytes\n' >&2 ;;
esac
ENCODERS="$("$FFMPEG" -hide_banner -encoders 2>/dev/null)"
case "$ENCODERS" in *" libx264 "*) ;; *) die "this ffmpeg has no libx264 encoder" ;; esac

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PY="$WORK/demo_tools.py"

# ffmpeg, quiet and strict; -nostdin so the script works without a terminal.
ff() { "$FFMPEG" -hide_banner -nostdin -loglevel error -y "$@"; }

# --- helpers (python3, standard library only) -----------------------------------------------------------------------
cat >"$PY" <<'PYEOF'
"""Playlists, codecs strings, bit rates and checks for make-demo-fixture.sh (test/demo material only)."""
import json
import math
import os
import re
import subprocess
import sys

FFMPEG = "/usr/bin/ffmpeg"
FFPROBE = "/usr/bin/ffprobe"


def fail(message):
    sys.exit("error: " + message)


def read_segments(path):
    """[(uri, duration)] of an ffmpeg-written media playlist."""
    out, duration = [], None
    for line in open(path, encoding="utf-8").read().splitlines():
        if line.startswith("#EXTINF:"):
            duration = float(line[8:].split(",")[0])
        elif line and not line.startswith("#"):
            out.append((line, duration))
    return out


def write_media_playlist(path, segments):
    """A VOD media playlist in one fixed form: version 3, target duration = the rounded longest segment."""
    target = max(int(math.floor(d + 0.5)) for _, d in segments)
    lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:%d" % target, "#EXT-X-MEDIA-SEQUENCE:0",
             "#EXT-X-PLAYLIST-TYPE:VOD"]
    for uri, duration in segments:
        lines += ["#EXTINF:%.6f," % duration, uri]
    lines.append("#EXT-X-ENDLIST")
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write("\n".join(lines) + "\n")


def rewrite_playlist(src, dst):
    write_media_playlist(dst, read_segments(src))


def vtt_time(seconds):
    ms = int(round(seconds * 1000))
    return "%02d:%02d:%02d.%03d" % (ms // 3600000, ms // 60000 % 60, ms // 1000 % 60, ms % 1000)


SUBTITLE_TEXT = {
    "en": ["Stowage demo: English subtitles", "Cue {n} of {total}, segment {s}"],
    "fr": ["Démo Stowage : sous-titres français", "Réplique {n} sur {total}, segment {s}"],
}


def write_subtitles(directory, language, mpegts, segment_count, segment_duration):
    """Segmented WebVTT: one .vtt a segment, two cues a segment (none crossing a segment boundary), every file with
    X-TIMESTAMP-MAP so that LOCAL 00:00:00.000 is the first video PTS of the MPEG-TS segments."""
    mpegts, segment_count, segment_duration = int(mpegts), int(segment_count), int(segment_duration)
    os.makedirs(directory, exist_ok=True)
    total = 2 * segment_count
    segments = []
    for s in range(segment_count):
        start = s * segment_duration
        lines = ["WEBVTT", "X-TIMESTAMP-MAP=MPEGTS:%d,LOCAL:00:00:00.000" % mpegts, ""]
        for k, (a, b) in enumerate(((0.2, 0.9), (1.1, 1.9))):
            n = 2 * s + k + 1
            text = SUBTITLE_TEXT[language][k].format(n=n, total=total, s=s + 1)
            lines += ["%s-%d" % (language, n), "%s --> %s" % (vtt_time(start + a), vtt_time(start + b)), text, ""]
        name = "seg_%d.vtt" % s
        with open(os.path.join(directory, name), "w", encoding="utf-8", newline="\n") as out:
            # Ends with a blank line: ffmpeg 5.1's HLS demuxer joins the segments into one WebVTT stream, and without
            # it the next segment's header would run into the last cue's text.
            out.write("\n".join(lines) + "\n")
        segments.append((name, float(segment_duration)))
    write_media_playlist(os.path.join(directory, "index.m3u8"), segments)


def annexb(path):
    """The H.264 elementary stream of a TS file, as ffmpeg copies it out (Annex B)."""
    return subprocess.run([FFMPEG, "-hide_banner", "-nostdin", "-loglevel", "error", "-i", path, "-map", "0:v:0",
                           "-c", "copy", "-f", "h264", "-"], check=True, stdout=subprocess.PIPE).stdout


def nal_units(es):
    starts = [m.end() for m in re.finditer(b"\x00\x00\x01", es)]
    for k, s in enumerate(starts):
        end = starts[k + 1] - 3 if k + 1 < len(starts) else len(es)
        yield es[s:end].rstrip(b"\x00")


def avc_codec(path):
    """avc1.PPCCLL from the first SPS of a TS segment."""
    for nal in nal_units(annexb(path)):
        if nal[0] & 0x1F == 7:
            print("avc1.%02X%02X%02X" % (nal[1], nal[2], nal[3]))
            return
    fail("no SPS in " + path)


def first_vcl_types(path):
    """Fails unless the segment's first picture is an IDR (NAL type 5) with SPS and PPS before it."""
    seen = []
    for nal in nal_units(annexb(path)):
        t = nal[0] & 0x1F
        seen.append(t)
        if t in (1, 5):
            if t != 5 or 7 not in seen or 8 not in seen:
                fail("%s does not start with SPS, PPS and an IDR picture (NAL types %s)" % (path, seen))
            print("%s: starts with IDR (NAL types %s)" % (os.path.basename(path), seen))
            return
    fail("no picture in " + path)


def rates(directory):
    """(peak, average) bit/s of a media playlist's segments, whole files (TS overhead included)."""
    segs = read_segments(os.path.join(directory, "index.m3u8"))
    sizes = [os.path.getsize(os.path.join(directory, uri)) for uri, _ in segs]
    peak = max(8 * size / d for size, (_, d) in zip(sizes, segs))
    average = 8 * sum(sizes) / sum(d for _, d in segs)
    return peak, average


def write_master(demo, config_json):
    """master.m3u8: BANDWIDTH = the variant's peak segment bit rate plus the largest peak of each rendition group,
    AVERAGE-BANDWIDTH likewise with average bit rates (RFC 8216 4.3.4.2)."""
    config = json.loads(config_json)
    lines = ["#EXTM3U", "#EXT-X-VERSION:4", "#EXT-X-INDEPENDENT-SEGMENTS", ""]
    groups = {}
    for group_type, group_id, renditions in (("AUDIO", "aud", config["audio"]), ("SUBTITLES", "subs",
                                                                                 config["subs"])):
        peaks, averages = [], []
        for r in renditions:
            attrs = ['TYPE=%s' % group_type, 'GROUP-ID="%s"' % group_id, 'LANGUAGE="%s"' % r["lang"],
                     'NAME="%s"' % r["name"], "DEFAULT=%s" % r["default"], "AUTOSELECT=YES"]
            if group_type == "AUDIO":
                attrs.append('CHANNELS="2"')
            else:
                attrs.append("FORCED=NO")
            attrs.append('URI="%s/index.m3u8"' % r["dir"])
            lines.append("#EXT-X-MEDIA:" + ",".join(attrs))
            peak, average = rates(os.path.join(demo, r["dir"]))
            peaks.append(peak)
            averages.append(average)
        groups[group_id] = (max(peaks), max(averages))
        lines.append("")
    for v in config["video"]:
        peak, average = rates(os.path.join(demo, v["dir"]))
        peak += groups["aud"][0] + groups["subs"][0]
        average += groups["aud"][1] + groups["subs"][1]
        lines.append('#EXT-X-STREAM-INF:BANDWIDTH=%d,AVERAGE-BANDWIDTH=%d,CODECS="%s,mp4a.40.2",RESOLUTION=%s,'
                     'FRAME-RATE=%.3f,AUDIO="aud",SUBTITLES="subs"'
                     % (math.ceil(peak), math.ceil(average), v["codec"], v["resolution"], v["fps"]))
        lines.append("%s/index.m3u8" % v["dir"])
    with open(os.path.join(demo, "master.m3u8"), "w", encoding="utf-8", newline="\n") as out:
        out.write("\n".join(lines) + "\n")


def probe(path, *entries):
    out = subprocess.run([FFPROBE, "-v", "error", *entries, "-of", "json", path], check=True,
                         stdout=subprocess.PIPE).stdout
    return json.loads(out)


def check_video_segment(path, width, height, profile, frames):
    width, height, frames = int(width), int(height), int(frames)
    info = probe(path, "-show_streams", "-show_packets")
    streams = info["streams"]
    if len(streams) != 1 or streams[0]["codec_name"] != "h264":
        fail("%s: expected one H.264 stream, got %s" % (path, [s["codec_name"] for s in streams]))
    s = streams[0]
    if (s["width"], s["height"], s["profile"], s["r_frame_rate"]) != (width, height, profile, "24/1"):
        fail("%s: %sx%s %s %s" % (path, s["width"], s["height"], s["profile"], s["r_frame_rate"]))
    packets = info["packets"]
    if len(packets) != frames or not packets[0]["flags"].startswith("K"):
        fail("%s: %d packets, first flags %s" % (path, len(packets), packets[0]["flags"]))
    print("%s: h264 %s %dx%d, %d frames, pts %s.." % (path, profile, width, height, len(packets),
                                                      packets[0]["pts"]))


def check_audio_segment(path):
    info = probe(path, "-show_streams", "-count_packets")
    streams = info["streams"]
    if len(streams) != 1:
        fail("%s: expected one stream" % path)
    s = streams[0]
    got = (s["codec_name"], s.get("profile"), s["sample_rate"], s["channels"])
    if got != ("aac", "LC", "48000", 2):
        fail("%s: %s" % (path, got))
    print("%s: aac LC 48000 Hz stereo, %s packets, start_pts %s" % (path, s["nb_read_packets"], s["start_pts"]))


def check_vtt_segment(path, mpegts):
    text = open(path, encoding="utf-8").read()
    head = text.splitlines()[:2]
    if head != ["WEBVTT", "X-TIMESTAMP-MAP=MPEGTS:%d,LOCAL:00:00:00.000" % int(mpegts)]:
        fail("%s: header %s" % (path, head))
    print("%s: WebVTT, %d cues" % (path, text.count("-->")))


def first_pts(path):
    print(probe(path, "-show_streams")["streams"][0]["start_pts"])


def count_srt(path, expected):
    text = open(path, encoding="utf-8").read()
    if "WEBVTT" in text or "X-TIMESTAMP-MAP" in text:
        fail("%s: a WebVTT header ended up in a cue" % path)
    n = text.count("-->")
    if n != int(expected):
        fail("%s: %d cues, expected %s" % (path, n, expected))


if __name__ == "__main__":
    name = sys.argv[1].replace("-", "_")
    globals()[name](*sys.argv[2:])
PYEOF
py() { python3 "$PY" "$@"; }

# --- media -----------------------------------------------------------------------------------------------------------
DURATION=8
SEG=2
FPS=24
GOP=$((FPS * SEG))
# 8 s of AAC at 48 kHz: 374 frames of 1024 samples plus the encoder's priming frame = 375 packets = 7.98 s, so the
# last audio segment ends before 8 s and there are exactly 4 audio segments (2.005, 2.005, 2.005, 1.984 s).
AUDIO_SAMPLES=$((374 * 1024))
BITEXACT=(-fflags +bitexact -flags:v +bitexact -flags:a +bitexact)
HLS_OUT=(-f hls -hls_time "$SEG" -hls_playlist_type vod -hls_segment_type mpegts -hls_segment_filename 'seg_%d.ts')
# No B-frames, so every variant's first PTS equals the audio's (ffmpeg's TS muxer starts at 1.4 s = 126000).
# An IDR every 2 s exactly (fixed GOP plus forced keyframes, no scene-cut keyframes).
X264=(-c:v libx264 -threads 1 -preset medium -pix_fmt yuv420p -bf 0 -g "$GOP" -keyint_min "$GOP" -sc_threshold 0
      -force_key_frames "expr:gte(t,n_forced*$SEG)" -x264-params "open-gop=0")

rm -rf "$DEMO/master.m3u8" "$DEMO/video" "$DEMO/audio" "$DEMO/subs"

video() { # name size profile level bitrate maxrate bufsize
    local name="$1" size="$2" profile="$3" level="$4" rate="$5" maxrate="$6" bufsize="$7"
    local dir="$DEMO/video/$name"
    say "video $name: ${size/x/x} H.264 $profile, ${rate} (max $maxrate)"
    mkdir -p "$dir"
    (cd "$dir" && ff -f lavfi -i "testsrc2=size=$size:rate=$FPS:duration=$DURATION" -map 0:v "${X264[@]}" \
        -profile:v "$profile" -level:v "$level" -b:v "$rate" -maxrate "$maxrate" -bufsize "$bufsize" \
        "${BITEXACT[@]}" "${HLS_OUT[@]}" "$WORK/video-$name.m3u8")
    py rewrite-playlist "$WORK/video-$name.m3u8" "$dir/index.m3u8"
}
video 180p 320x180 baseline 2.1 230k 250k 250k
video 360p 640x360 main 3.0 540k 600k 600k

audio() { # language frequency
    local lang="$1" freq="$2"
    local dir="$DEMO/audio/$lang"
    say "audio $lang: AAC-LC stereo 48 kHz 64 kbit/s, $freq Hz sine"
    mkdir -p "$dir"
    (cd "$dir" && ff -f lavfi -i "sine=frequency=$freq:sample_rate=48000" -map 0:a \
        -af "atrim=end_sample=$AUDIO_SAMPLES" -ac 2 -c:a aac -profile:a aac_low -b:a 64k \
        "${BITEXACT[@]}" "${HLS_OUT[@]}" "$WORK/audio-$lang.m3u8")
    py rewrite-playlist "$WORK/audio-$lang.m3u8" "$dir/index.m3u8"
}
audio en 440
audio fr 660
audio de 880

MPEGTS="$(py first-pts "$DEMO/video/180p/seg_0.ts")"
for f in "$DEMO"/video/360p/seg_0.ts "$DEMO"/audio/*/seg_0.ts; do
    [ "$(py first-pts "$f")" = "$MPEGTS" ] || die "$f does not start at PTS $MPEGTS"
done
say "subtitles en, fr: segmented WebVTT, X-TIMESTAMP-MAP=MPEGTS:$MPEGTS,LOCAL:00:00:00.000"
py write-subtitles "$DEMO/subs/en" en "$MPEGTS" $((DURATION / SEG)) "$SEG"
py write-subtitles "$DEMO/subs/fr" fr "$MPEGTS" $((DURATION / SEG)) "$SEG"

say "master.m3u8"
CODEC_180="$(py avc-codec "$DEMO/video/180p/seg_0.ts")"
CODEC_360="$(py avc-codec "$DEMO/video/360p/seg_0.ts")"
py write-master "$DEMO" "$(cat <<EOF
{"video": [{"dir": "video/180p", "codec": "$CODEC_180", "resolution": "320x180", "fps": $FPS},
           {"dir": "video/360p", "codec": "$CODEC_360", "resolution": "640x360", "fps": $FPS}],
 "audio": [{"dir": "audio/en", "lang": "en", "name": "English", "default": "YES"},
           {"dir": "audio/fr", "lang": "fr", "name": "Français", "default": "NO"},
           {"dir": "audio/de", "lang": "de", "name": "Deutsch", "default": "NO"}],
 "subs":  [{"dir": "subs/en", "lang": "en", "name": "English", "default": "YES"},
           {"dir": "subs/fr", "lang": "fr", "name": "Français", "default": "NO"}]}
EOF
)"
cat "$DEMO/master.m3u8"

# --- checks ----------------------------------------------------------------------------------------------------------
say "checking segments"
SEGMENTS=$((DURATION / SEG))
for name in 180p 360p; do
    case "$name" in 180p) w=320 h=180 p="Constrained Baseline" ;; 360p) w=640 h=360 p=Main ;; esac
    [ "$(grep -c '^seg_' "$DEMO/video/$name/index.m3u8")" = "$SEGMENTS" ] || die "video/$name: not $SEGMENTS segments"
    for f in "$DEMO/video/$name"/seg_*.ts; do
        py check-video-segment "$f" "$w" "$h" "$p" "$GOP" | sed "s|$DEMO/||"
        py first-vcl-types "$f"
    done
done
for lang in en fr de; do
    [ "$(grep -c '^seg_' "$DEMO/audio/$lang/index.m3u8")" = "$SEGMENTS" ] || die "audio/$lang: not $SEGMENTS segments"
    for f in "$DEMO/audio/$lang"/seg_*.ts; do py check-audio-segment "$f" | sed "s|$DEMO/||"; done
done
for lang in en fr; do
    for f in "$DEMO/subs/$lang"/seg_*.vtt; do py check-vtt-segment "$f" "$MPEGTS" | sed "s|$DEMO/||"; done
done

say "decoding master.m3u8 (first video variant, every audio rendition)"
ff -xerror -i "$DEMO/master.m3u8" -map 0:v:0 -map 0:a -f null -
for name in 180p 360p; do
    say "decoding video/$name"
    ff -xerror -i "$DEMO/video/$name/index.m3u8" -map 0:v -f framemd5 "$WORK/$name.framemd5"
    frames=$(grep -vc '^#' "$WORK/$name.framemd5")
    unique=$(grep -v '^#' "$WORK/$name.framemd5" | awk -F', *' '{print $6}' | sort -u | wc -l)
    [ "$frames" = $((FPS * DURATION)) ] || die "video/$name: $frames frames"
    [ "$unique" = "$frames" ] || die "video/$name: only $unique distinct frames of $frames"
    printf '    %s frames, all distinct\n' "$frames"
done
for lang in en fr de; do
    say "decoding audio/$lang"
    ff -xerror -i "$DEMO/audio/$lang/index.m3u8" -map 0:a -f null -
done
for lang in en fr; do
    say "reading subs/$lang with ffmpeg's HLS demuxer"
    ff -i "$DEMO/subs/$lang/index.m3u8" -map 0:s -f srt "$WORK/subs-$lang.srt"
    py count-srt "$WORK/subs-$lang.srt" $((2 * SEGMENTS))
    printf '    %s cues\n' $((2 * SEGMENTS))
done

say "sizes"
du -sb "$DEMO"/video/* "$DEMO"/audio/* "$DEMO"/subs/* | sed "s|$DEMO/||"
TOTAL=$(du -sb --exclude='*.md' --exclude='*.sh' "$DEMO" | cut -f1)
say "total $TOTAL bytes (limit $SIZE_LIMIT)"
[ "$TOTAL" -lt "$SIZE_LIMIT" ] || die "Fixtures/demo is over 1.5 MB"
say "done"
