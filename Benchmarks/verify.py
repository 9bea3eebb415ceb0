#!/usr/bin/env python3
"""Benchmark: `stowage verify --deep` against `openssl dgst -sha256` of the same files.

What it needs: `stowage` (STOWAGE_BIN, a release build: Benchmarks/run.sh builds it), OpenSSL and Debian's ffmpeg
(download.py's generator makes the AES-128 asset, never committed: copies of one real x264 chunk encrypted with
`openssl enc -aes-128-cbc`, kept under $STOWAGE_BENCH_DIR and reused).

For each size it downloads the asset once with `stowage download` from `stowage origin` into a fresh STOWAGE_HOME,
then times, best of --runs, with the files in the page cache:
  - `stowage verify bench --deep`: SHA-256 of every file against the manifest, and every segment decrypted and its
    MPEG-TS validated (it must report the asset playable);
  - `openssl dgst -sha256` of the same files in one process (the reference: hashing alone, no decryption).
MB/s counts the package's bytes. Target (issue 17): verify --deep >= 0.8x openssl dgst; peak RSS flat (+8 MiB at most)
between the two sizes. Prints a table; with $STOWAGE_BENCH_RESULTS set, records the rows of docs/PERFORMANCE.md.

Usage: Benchmarks/verify.py [SIZE_MiB ...] [--runs 3] [--work DIR]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import download  # noqa: E402
import results  # noqa: E402



def package_files(home):
    package = os.path.join(home, "packages", "bench")
    files = []
    for directory, _, names in os.walk(package):
        files += [os.path.join(directory, name) for name in sorted(names)]
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, help="asset sizes in MiB (default 256 512)")
    parser.add_argument("--runs", type=int, default=3, help="runs per command; the fastest is reported (default 3)")
    parser.add_argument("--work", default=os.environ.get("STOWAGE_BENCH_DIR")
                        or os.path.join(tempfile.gettempdir(), "stowage-bench-download"))
    args = parser.parse_args()
    sizes = sorted(set(args.sizes or [256, 512]))
    work, stowage = download.prepare(args.work, "Benchmarks/verify.py")
    figures = {}
    origin = download.OriginServer(stowage, work, os.path.join(work, "origin-verify.log"))
    homes = []
    try:
        for size in sizes:
            name, _ = download.generate(work, "ffmpeg", size, 600)
            home = tempfile.mkdtemp(prefix=f"home-verify-{size}-", dir=work)
            homes.append(home)
            env = dict(os.environ, STOWAGE_HOME=home)
            subprocess.run([stowage, "download", f"{origin.url}/{name}/master.m3u8", "--asset-id", "bench"], env=env,
                           check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=600)
            files = package_files(home)
            total = sum(os.path.getsize(f) for f in files)
            ours, peak = results.best_of(args.runs, [stowage, "verify", "bench", "--deep"], env=env)
            theirs, openssl_peak = results.best_of(args.runs, ["openssl", "dgst", "-sha256", *files])
            figures[size] = (total / ours / 1e6, peak, total / theirs / 1e6, openssl_peak, total)
            download.log(f"  {size} MiB: verify --deep {figures[size][0]:.0f} MB/s, openssl dgst {figures[size][2]:.0f} MB/s")
    finally:
        origin.stop()
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)

    print(f"{'size':>9}  {'verify --deep MB/s':>19} {'peak MiB':>9} {'openssl dgst MB/s':>18} {'ratio':>6}")
    for size, (ours, peak, theirs, _, _) in figures.items():
        print(f"{size:>5} MiB  {ours:>19.0f} {peak:>9.1f} {theirs:>18.0f} {ours / theirs:>5.2f}x")
    big = max(sizes)
    ours, peak, theirs, _, total = figures[big]
    results.record("verify", f"`stowage verify --deep`, {total / 1e6:.0f} MB package (AES-128 TS)", ours, "MB/s",
                   reference="openssl dgst -sha256, same files", reference_value=theirs, target={"min_ratio": 0.8},
                   peak_rss_mib=peak)
    if len(sizes) > 1:
        results.record_flat_memory("verify", "`stowage verify --deep`", [(s, figures[s][1]) for s in sizes],
                                   unit_of_size="MiB")


if __name__ == "__main__":
    main()
