#!/usr/bin/env python3
"""Benchmark: the download service's hand-off time and its total rate cap (issue 12's done-when figures).

What it needs: `stowage` (Benchmarks/service.sh builds a release binary and passes it as STOWAGE_BIN), OpenSSL and
Debian's ffmpeg (download.py's generator makes the asset: copies of one real x264 chunk encrypted with
`openssl enc -aes-128-cbc`, never committed; kept under $STOWAGE_BENCH_DIR and reused).

It serves the asset with `stowage origin`, starts `stowage service run --limit-rate RATE --max-downloads 1` on a fresh
STOWAGE_HOME, and measures:
  - `stowage download --background URL` wall time, --submissions times (one running download, the rest queued):
    median and maximum against the target of 1 s;
  - the rate the running download gets: bytes on disk in its package (.part files included) sampled every 0.25 s,
    over --window seconds (default 20) from the first byte; against the cap, target within 10%;
  - that the queue holds: with --max-downloads 1 no second download has a byte on disk while the first runs;
  - the service's peak resident memory (VmHWM).
Then it cancels the downloads, stops the service with SIGTERM (it must exit 0 and remove its socket) and prints one
Markdown table with a verdict per row.

Usage: Benchmarks/service.py [--rate 1M] [--window 20] [--submissions 5] [--size 48] [--work DIR]
"""
import argparse, os, shutil, signal, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import download  # noqa: E402  (the asset generator and the origin wrapper)
import results as bench_results  # noqa: E402

UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_rate(text):
    text = text.strip().lower()
    multiplier = UNITS.get(text[-1:], 1)
    return int(float(text[:-1] if text[-1:] in UNITS else text) * multiplier)


def stowage_command(stowage, home, arguments, timeout=60):
    env = dict(os.environ, STOWAGE_HOME=home)
    started = time.monotonic()
    result = subprocess.run([stowage, *arguments], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, timeout=timeout)
    return result.returncode, time.monotonic() - started, result.stdout.decode(errors="replace"), \
        result.stderr.decode(errors="replace")


def package_bytes(home, asset):
    """Bytes on disk in the asset's package, .part files included (0 before it exists)."""
    return download.tree_bytes(os.path.join(home, "packages", asset))


def peak_rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", default="1M", help="the service's --limit-rate (1024-based, default 1M)")
    parser.add_argument("--window", type=float, default=20, help="seconds the rate is measured over (default 20)")
    parser.add_argument("--submissions", type=int, default=5, help="download --background calls timed (default 5)")
    parser.add_argument("--size", type=int, default=48, help="asset size in MiB; must outlast the window (default 48)")
    parser.add_argument("--work", default=os.environ.get("STOWAGE_BENCH_DIR")
                        or os.path.join(tempfile.gettempdir(), "stowage-bench-service"))
    args = parser.parse_args()
    rate = parse_rate(args.rate)
    if args.size * (1 << 20) < rate * (args.window + 5):
        parser.error(f"--size {args.size} MiB does not outlast {args.window} s at {args.rate}/s; raise --size")
    work, stowage = download.prepare(args.work, "Benchmarks/service.sh")
    name, info = download.generate(work, "ffmpeg", args.size, 600)
    home = os.path.join(work, "home")
    shutil.rmtree(home, ignore_errors=True)
    os.makedirs(home)

    origin = download.OriginServer(stowage, work, os.path.join(work, "origin.log"))
    service = None
    rows = []
    try:
        url = f"{origin.url}/{name}/master.m3u8"
        service_log = open(os.path.join(work, "service.log"), "wb")
        service = subprocess.Popen([stowage, "service", "run", "--limit-rate", args.rate, "--max-downloads", "1",
                                    "--keep-free", "64M"], env=dict(os.environ, STOWAGE_HOME=home),
                                   stdin=subprocess.DEVNULL, stdout=service_log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if stowage_command(stowage, home, ["service", "status"])[0] == 0:
                break
            time.sleep(0.05)
        else:
            raise download.Failure(f"the service did not come up (see {work}/service.log)")

        # Hand-off: the first submission runs, the others queue behind it.
        times = []
        assets = [f"bench-{index}" for index in range(args.submissions)]
        for asset in assets:
            code, seconds, out, err = stowage_command(stowage, home, ["download", "--background", url, "--asset-id", asset])
            if code != 0 or out.strip() != asset:
                raise download.Failure(f"download --background failed ({code}): {err.strip()}")
            times.append(seconds)
        median, worst = statistics.median(times), max(times)
        rows.append(("`download --background` wall time, median / max of %d" % len(times),
                     f"{median:.3f} s / {worst:.3f} s", "< 1 s", worst < 1.0))
        bench_results.record("service", f"`stowage download --background` hand-off, slowest of {len(times)}", worst * 1000,
                             "ms", target={"max_value": 1000}, higher_is_better=False,
                             note=f"median {median * 1000:.0f} ms")

        # Rate: from the first byte on disk, over the window.
        first = assets[0]
        deadline = time.monotonic() + 60
        while package_bytes(home, first) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        start_time, start_bytes = time.monotonic(), package_bytes(home, first)
        others_seen = 0
        samples = []
        while time.monotonic() - start_time < args.window:
            time.sleep(0.25)
            samples.append((time.monotonic() - start_time, package_bytes(home, first)))
            others_seen = max(others_seen, sum(package_bytes(home, a) for a in assets[1:]))
        elapsed = time.monotonic() - start_time
        measured = (package_bytes(home, first) - start_bytes) / elapsed
        ratio = measured / rate
        rows.append((f"rate of the running download over {elapsed:.1f} s (cap {args.rate} = {rate / 1e6:.3f} MB/s)",
                     f"{measured / 1e6:.3f} MB/s ({ratio:.3f}x the cap)", "0.90x-1.10x", 0.9 <= ratio <= 1.1))
        bench_results.record("service", f"rate of a download under `service run --limit-rate {args.rate}`, {elapsed:.0f} s",
                             measured / 1e6, "MB/s", reference="the cap", reference_value=rate / 1e6,
                             target={"between": [0.9 * rate / 1e6, 1.1 * rate / 1e6]},
                             peak_rss_mib=peak_rss_mib(service.pid))
        worst_second = 0.0
        for (t0, b0), (t1, b1) in zip(samples, samples[4:]):  # one-second windows
            worst_second = max(worst_second, (b1 - b0) / (t1 - t0) / rate)
        rows.append(("highest one-second rate / cap (bursts)", f"{worst_second:.2f}x", "informative", True))
        rows.append(("bytes on disk of the queued downloads while the first runs (--max-downloads 1)",
                     f"{others_seen} B", "0 B", others_seen == 0))
        rows.append(("service peak RSS", f"{peak_rss_mib(service.pid):.1f} MiB", "informative", True))

        for asset in assets:
            stowage_command(stowage, home, ["cancel", asset])
        service.send_signal(signal.SIGTERM)
        status = service.wait(timeout=30)
        socket_gone = not os.path.exists(os.path.join(home, "service.sock"))
        rows.append(("SIGTERM: exit status, socket removed", f"{status}, {'yes' if socket_gone else 'no'}", "0, yes",
                     status == 0 and socket_gone))
        service = None
    finally:
        if service is not None and service.poll() is None:
            service.kill()
            service.wait()
        origin.stop()

    cpu = ""
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        pass
    print(f"\nstowage service benchmark: {os.cpu_count()} cores, {cpu}, load {os.getloadavg()[0]:.2f}; "
          f"asset {info['encrypted_bytes'] / 1e6:.1f} MB AES-128 from `stowage origin` on loopback\n")
    print("| figure | measured | target | verdict |")
    print("|---|---|---|---|")
    for label, value, target, ok in rows:
        print(f"| {label} | {value} | {target} | {'ok' if ok else 'MISSED'} |")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except download.Failure as failure:
        sys.exit(f"error: {failure}")
