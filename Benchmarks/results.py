"""The rows every benchmark reports to Benchmarks/run.sh, and the one table they make.

A benchmark script calls `record(...)` for each figure it measured. When $STOWAGE_BENCH_RESULTS names a file (run.sh
sets it), each row is appended to it as one JSON line; otherwise record() does nothing, so every script still runs on
its own and prints its own report. Benchmarks/report.py reads the file back and prints the table.

A row: the benchmark, the figure, our value and its unit, the reference (a tool nobody here wrote, measured in the same
run on the same input) and its value, the ratio ours/reference (reference/ours when lower is better), the target and
whether it was met, and the peak resident memory of our command.

Targets, one of:
  {"min_ratio": 0.8}       ours >= 0.8x the reference (inverted for lower-is-better figures)
  {"min_value": 1.5}       ours >= 1.5 in the row's unit
  {"max_value": 20}        ours <= 20 in the row's unit
  {"max_ratio": 2.0}       ours <= 2x the reference (time to first byte within 2x nginx)
  {"between": [0.9, 1.1]}  0.9 <= ours <= 1.1 in the row's unit
"""

import json
import os
import subprocess
import sys
import time

RESULTS_ENV = "STOWAGE_BENCH_RESULTS"


def record(benchmark, figure, ours, unit, reference=None, reference_value=None, target=None, higher_is_better=True,
           peak_rss_mib=None, note=None):
    """Appends one row to $STOWAGE_BENCH_RESULTS (if set) and returns it."""
    ratio = None
    if ours is not None and reference_value:
        ratio = ours / reference_value if higher_is_better else reference_value / ours if ours else None
    met = None
    if target and ours is not None:
        if "min_ratio" in target:
            met = ratio is not None and ratio >= target["min_ratio"]
        elif "max_ratio" in target:
            met = ours is not None and reference_value and ours / reference_value <= target["max_ratio"]
        elif "min_value" in target:
            met = ours >= target["min_value"]
        elif "max_value" in target:
            met = ours <= target["max_value"]
        elif "between" in target:
            met = target["between"][0] <= ours <= target["between"][1]
    row = {
        "benchmark": benchmark, "figure": figure, "ours": ours, "unit": unit, "reference": reference,
        "reference_value": reference_value, "ratio": ratio, "higher_is_better": higher_is_better, "target": target,
        "met": met, "peak_rss_mib": peak_rss_mib, "note": note,
    }
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps(row) + "\n")
    return row


def record_flat_memory(benchmark, command, sizes_and_peaks, unit_of_size="MB", allowed_growth_mib=8):
    """One row: peak RSS of `command` at the largest input against the smallest (target: at most +N MiB)."""
    if len(sizes_and_peaks) < 2:
        return None
    small, small_peak = min(sizes_and_peaks)
    big, big_peak = max(sizes_and_peaks)
    return record(benchmark, f"{command}: peak RSS growth {small} -> {big} {unit_of_size}", big_peak - small_peak, "MiB",
                  target={"max_value": allowed_growth_mib}, higher_is_better=False, peak_rss_mib=big_peak,
                  note=f"{small_peak:.1f} MiB at {small} {unit_of_size}, {big_peak:.1f} MiB at {big} {unit_of_size}")


def timed(command, env=None, cwd=None):
    """Runs `command` in a fresh interpreter so its peak RSS is its own (ru_maxrss of the children of that interpreter
    only); returns (seconds, peak RSS MiB). Exits with the command's error output when it fails."""
    code = (
        "import resource,subprocess,sys,time,json;c=json.loads(sys.argv[1]);s=time.perf_counter();"
        "r=subprocess.run(c,stdout=subprocess.DEVNULL,stderr=subprocess.PIPE);e=time.perf_counter()-s;"
        "print(json.dumps([r.returncode,e,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024.0,"
        "r.stderr.decode(errors='replace')[-1500:]]))"
    )
    out = subprocess.run([sys.executable, "-c", code, json.dumps(command)], capture_output=True, text=True, check=True,
                         env=env, cwd=cwd)
    status, elapsed, peak, err = json.loads(out.stdout)
    if status != 0:
        sys.exit(f"failed: {' '.join(command)}\n{err}")
    return elapsed, peak


def best_of(runs, command, before=None, env=None, cwd=None):
    """The fastest of `runs` runs of `command` (calling `before` first each time) and the largest peak RSS."""
    times, peaks = [], []
    for _ in range(runs):
        if before:
            before()
        elapsed, peak = timed(command, env=env, cwd=cwd)
        times.append(elapsed)
        peaks.append(peak)
    return min(times), max(peaks)


def drop_writeback():
    """Flushes dirty pages so one run's writeback does not land on the next."""
    os.sync()
    time.sleep(0.05)

