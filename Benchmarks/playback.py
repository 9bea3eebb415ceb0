#!/usr/bin/env python3
"""Benchmark: `stowage play` as a player sees it, beside nginx serving the clear twin (issue 11's figures).

What it needs: `stowage` (Benchmarks/playback.sh builds a release binary and passes it as STOWAGE_BIN), OpenSSL,
Debian's ffmpeg (download.py's generator makes the AES-128 asset, never committed) and nginx (Debian).

Three servers answer the same player, a Python client in one process on one keep-alive connection (as a player
holds one; the entry URL of a play session serves its first process only):
  - `stowage play` on a complete package (downloaded first with `stowage download`);
  - `stowage play` on a package still downloading (`stowage download --limit-rate RATE` running; play starts as soon
    as the gate lets it: keys stored and a first file landed);
  - nginx serving the clear twin (the same segments decrypted) from disk, sendfile on.
For each: time to the first body byte of the multivariant playlist and of the first segment (medians of 5 servers
started afresh), and the sustained rate of reading every segment in order. Prints one Markdown table with the ratio to nginx.

Usage: Benchmarks/playback.py [--size 64] [--rate 20M] [--work DIR]
"""
import argparse, http.client, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import download  # noqa: E402  (the asset generator and the origin wrapper)
import results as bench_results  # noqa: E402



class Client:
    """One keep-alive HTTP/1.1 connection, as a player holds it."""

    def __init__(self, base):
        parsed = urllib.parse.urlsplit(base)
        self.host, self.port = parsed.hostname, parsed.port
        self.connection = http.client.HTTPConnection(self.host, self.port, timeout=60)

    def get(self, path):
        """(status, time to first body byte, total seconds, body)."""
        started = time.perf_counter()
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        first = response.read(1)
        first_byte = time.perf_counter() - started
        rest = response.read()
        return response.status, first_byte, time.perf_counter() - started, first + rest


def measure(base, entry_path, sustained=True):
    """Master and first-segment time to first byte (ms) and sustained MB/s over every segment (only the first two
    when `sustained` is false)."""
    client = Client(base)
    status, master_ttfb, _, master = client.get(entry_path)
    if status != 200:
        raise download.Failure(f"GET {entry_path}: {status}")
    media = next(line for line in master.decode().splitlines() if line and not line.startswith("#"))
    media_path = urllib.parse.urljoin(entry_path, media)
    status, _, _, playlist = client.get(media_path)
    if status != 200:
        raise download.Failure(f"GET {media_path}: {status}")
    segments = [urllib.parse.urljoin(media_path, line) for line in playlist.decode().splitlines() if line and not line.startswith("#")]
    if not sustained:
        segments = segments[:1]
    total = 0
    started = time.perf_counter()
    first_ttfb = None
    for segment in segments:
        status, ttfb, _, body = client.get(segment)
        if status not in (200, 206):
            raise download.Failure(f"GET {segment}: {status} {body[:200]!r}")
        first_ttfb = first_ttfb if first_ttfb is not None else ttfb
        total += len(body)
    seconds = time.perf_counter() - started
    return {"master_ms": master_ttfb * 1000, "segment_ms": first_ttfb * 1000, "mbps": total / seconds / 1e6, "bytes": total}


STARTS = 5


def first_bytes(start, first):
    """The two times to first byte as the median of STARTS servers started afresh: `first` (a `measure` result) and
    STARTS - 1 more, each from `start()` -> (process, base URL, entry path), stopped after. One start alone is noisy
    here: nginx's master TTFB ranged from 0.6 to 3 ms between single runs on this machine."""
    masters, segments = [first["master_ms"]], [first["segment_ms"]]
    for _ in range(STARTS - 1):
        process, base, entry_path = start()
        try:
            figures = measure(base, entry_path, sustained=False)
        finally:
            stop(process)
        masters.append(figures["master_ms"])
        segments.append(figures["segment_ms"])
    return dict(first, master_ms=statistics.median(masters), segment_ms=statistics.median(segments),
                master_all_ms=masters, segment_all_ms=segments)


def play_starter(stowage, home):
    """For `first_bytes`: starts `stowage play bench` on `home`."""
    def start():
        process, entry = start_play(stowage, home, "bench")
        parsed = urllib.parse.urlsplit(entry)
        return process, f"{parsed.scheme}://{parsed.netloc}", parsed.path
    return start


def start_play(stowage, home, asset, deadline_seconds=60):
    """`stowage play ASSET --player none --json`, retried until the gate lets it; returns (process, URL)."""
    env = dict(os.environ, STOWAGE_HOME=home)
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        process = subprocess.Popen([stowage, "play", asset, "--player", "none", "--json"], env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        line = process.stdout.readline().decode()
        match = re.search(r'"url":"([^"]+)"', line)
        if match:
            return process, match.group(1).replace("\\/", "/")
        process.wait()
        time.sleep(0.05)
    raise download.Failure(f"`stowage play {asset}` never started")


def stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def nginx_serving(clear, work):
    port = free_port()
    prefix = os.path.join(work, "nginx")
    os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
    config = os.path.join(prefix, "nginx.conf")
    with open(config, "w") as handle:
        handle.write(f"""daemon off; worker_processes 1; pid {prefix}/nginx.pid; error_log {prefix}/logs/error.log;
events {{ worker_connections 64; }}
http {{ access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;
  types {{ application/vnd.apple.mpegurl m3u8; video/mp2t ts; }}
  server {{ listen 127.0.0.1:{port}; root {clear}; }} }}
""")
    process = subprocess.Popen(["nginx", "-c", config, "-p", prefix], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    stop(process)
    raise download.Failure("nginx did not start")


def clear_twin(work, name, info):
    """The asset decrypted: every segment is the same clear chunk (download.py), linked under the segment names."""
    clear = os.path.join(work, f"{name}-clear")
    if not os.path.exists(os.path.join(clear, "done")):
        shutil.rmtree(clear, ignore_errors=True)
        os.makedirs(clear)
        chunk, _ = download.make_chunk(work, "ffmpeg", 600)
        for segment in info["segments"]:
            os.link(chunk, os.path.join(clear, segment)) if os.stat(chunk).st_dev == os.stat(clear).st_dev \
                else shutil.copyfile(chunk, os.path.join(clear, segment))
        with open(os.path.join(work, name, "media.m3u8")) as source, open(os.path.join(clear, "media.m3u8"), "w") as target:
            target.write("".join(line for line in source if not line.startswith("#EXT-X-KEY")))
        shutil.copyfile(os.path.join(work, name, "master.m3u8"), os.path.join(clear, "master.m3u8"))
        open(os.path.join(clear, "done"), "w").close()
    return clear


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, action="append",
                        help="asset size in MiB (default 64); give it twice for the flat-memory check of a complete package")
    parser.add_argument("--rate", default="20M", help="--limit-rate of the download played while it runs (default 20M)")
    parser.add_argument("--work", default=os.environ.get("STOWAGE_BENCH_DIR")
                        or os.path.join(tempfile.gettempdir(), "stowage-bench-playback"))
    args = parser.parse_args()
    sizes = sorted(set(args.size or [64]))
    work, stowage = download.prepare(args.work, "Benchmarks/playback.sh")
    big = max(sizes)
    assets = {size: download.generate(work, "ffmpeg", size, 600) for size in sizes}
    name, info = assets[big]
    clear = clear_twin(work, name, info)
    origin = download.OriginServer(stowage, work, os.path.join(work, "origin.log"))
    results = {}
    peaks = {}
    processes = []
    complete_label = "stowage play, complete package"
    unverified_label = "stowage play, complete package without verified.json (every file hashed as served)"
    downloading_label = f"stowage play while downloading (--limit-rate {args.rate})"
    try:
        # A complete package, at each size.
        for size in sizes:
            url = f"{origin.url}/{assets[size][0]}/master.m3u8"
            home = tempfile.mkdtemp(prefix="home-complete-", dir=work)
            env = dict(os.environ, STOWAGE_HOME=home)
            subprocess.run([stowage, "download", url, "--asset-id", "bench"], env=env, check=True, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
            play, entry = start_play(stowage, home, "bench")
            processes.append(play)
            parsed = urllib.parse.urlsplit(entry)
            figures = measure(f"{parsed.scheme}://{parsed.netloc}", parsed.path)
            peaks[size] = download.memory_kib(play.pid)[1] / 1024
            stop(play)
            if size == big:
                results[complete_label] = first_bytes(play_starter(stowage, home), figures)
                # The same package without the download's record of the files it checked: play hashes every file
                # as it serves it, as it did before verified.json (docs/package-format.md).
                os.remove(os.path.join(home, "packages", "bench", "verified.json"))
                play, entry = start_play(stowage, home, "bench")
                processes.append(play)
                parsed = urllib.parse.urlsplit(entry)
                results[unverified_label] = measure(f"{parsed.scheme}://{parsed.netloc}", parsed.path)
                stop(play)
            shutil.rmtree(home, ignore_errors=True)

        # A package still downloading.
        url = f"{origin.url}/{name}/master.m3u8"
        home = tempfile.mkdtemp(prefix="home-downloading-", dir=work)
        env = dict(os.environ, STOWAGE_HOME=home)
        downloading = subprocess.Popen([stowage, "download", url, "--asset-id", "bench", "--limit-rate", args.rate,
                                        "--concurrency", "1"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
        processes.append(downloading)
        play, entry = start_play(stowage, home, "bench")
        processes.append(play)
        parsed = urllib.parse.urlsplit(entry)
        figures = measure(f"{parsed.scheme}://{parsed.netloc}", parsed.path)
        downloading_peak = download.memory_kib(play.pid)[1] / 1024
        stop(play)
        results[downloading_label] = first_bytes(play_starter(stowage, home), figures)
        downloading.wait(timeout=600)
        shutil.rmtree(home, ignore_errors=True)

        server, base = nginx_serving(clear, work)
        processes.append(server)
        figures = measure(base, "/master.m3u8")
        stop(server)

        def start_nginx():
            process, started_base = nginx_serving(clear, work)
            return process, started_base, "/master.m3u8"
        results["nginx, clear twin from disk"] = first_bytes(start_nginx, figures)
    finally:
        for process in processes:
            stop(process)
        origin.stop()

    reference = results["nginx, clear twin from disk"]
    print(f"\n`stowage play` against nginx: {big} MiB of AES-128 TS ({len(info['segments'])} segments), "
          f"one keep-alive connection, {os.cpu_count()} cores\n")
    print(f"Times to first byte: medians of {STARTS} servers started afresh, the first request of each on a fresh "
          "connection.\n")
    print("| server | master TTFB (ms) | first segment TTFB (ms) | sustained MB/s | vs nginx |")
    print("|---|---:|---:|---:|---:|")
    for label, figures in results.items():
        ratio = figures["mbps"] / reference["mbps"] if reference["mbps"] else float("nan")
        print(f"| {label} | {figures['master_ms']:.1f} | {figures['segment_ms']:.1f} | {figures['mbps']:.0f} | {ratio:.2f}x |")
    if len(sizes) > 1:
        print("\npeak RSS of `stowage play`, complete package: " + ", ".join(f"{peaks[s]:.1f} MiB at {s} MiB" for s in sizes))

    nginx = "nginx 1 worker, sendfile, clear twin"
    for label, what, peak in ((complete_label, "complete package", peaks[big]),
                              (downloading_label, f"while downloading at {args.rate}", downloading_peak)):
        figures = results[label]
        bench_results.record("play", f"`stowage play` {what}: master playlist time to first byte, median of {STARTS} starts", figures["master_ms"], "ms",
                             reference=nginx, reference_value=reference["master_ms"], target={"max_ratio": 2.0},
                             higher_is_better=False, peak_rss_mib=peak)
        bench_results.record("play", f"`stowage play` {what}: first segment time to first byte, median of {STARTS} starts", figures["segment_ms"], "ms",
                             reference=nginx, reference_value=reference["segment_ms"], target={"max_ratio": 2.0},
                             higher_is_better=False, peak_rss_mib=peak)
        # Served while the download runs at a capped rate, the segments cannot come faster than they land: no target.
        bench_results.record("play", f"`stowage play` {what}: every segment in order, one connection", figures["mbps"], "MB/s",
                             reference=nginx, reference_value=reference["mbps"],
                             target={"min_value": 1000} if label == complete_label else None, peak_rss_mib=peak)
    unverified = results[unverified_label]
    bench_results.record("play", "`stowage play` complete package without verified.json (every file hashed as served): "
                         "every segment in order, one connection", unverified["mbps"], "MB/s",
                         reference=nginx, reference_value=reference["mbps"], target=None)
    if len(sizes) > 1:
        bench_results.record_flat_memory("play", "`stowage play`, complete package", sorted(peaks.items()), unit_of_size="MiB")


if __name__ == "__main__":
    main()
