#!/usr/bin/env python3
"""Runs a command (the test suite), copying its output to ours, and ends it when it goes quiet.

    test-watchdog.py SECONDS COMMAND...

Swift Testing prints a line whenever a test starts or ends, so a suite that prints nothing for SECONDS has a test that
never ends (docs/RELIABILITY.md: an awaited continuation that is never resumed). Then this prints the tests that
started and did not end, kills the command's processes (its group and every descendant), and exits 124, so that CI fails at once and names the
test instead of waiting for its own time limit. Before the kill it prints every thread's stack of each process in the
command's group (gdb, when installed), which is what a hang needs to be found. Otherwise it exits with the command's
status.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time


def tree(root):
    """The process `root` leads: every process in its process group and every descendant of them, wherever its group
    (SwiftPM starts the test binary in a group of its own, which a kill of the group alone left running)."""
    parents = {}
    groups = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
            groups[int(entry)] = int(fields[2])
        except (OSError, ValueError, IndexError):
            continue
    found = {pid for pid, group in groups.items() if group == root} | ({root} if root in parents else set())
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                changed = True
    return sorted(found)


def dump_stacks(group):
    """Prints the stacks of every thread of every process in process group `group`, at most 2 minutes each.

    SwiftPM's own process (`swift-test`/`swift-package`), which only waits for the test binary, comes first, so that
    the stacks of the test binary and of the processes its tests started come last, where a log cut to its tail
    still shows them; gdb's complaints about missing debug files are silenced."""
    gdb = shutil.which("gdb")
    if gdb is None:
        print("test-watchdog: gdb is not installed; no stacks", flush=True)
        return
    processes = []
    for pid in tree(group):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                name = cmdline.read().replace(b"\0", b" ").decode("utf-8", "replace")[:200]
        except OSError:
            continue
        processes.append((0 if "swift-package" in name or "swift-test " in name else 1, pid, name))
    for _, pid, name in sorted(processes):
        print(f"\ntest-watchdog: stacks of process {pid}: {name}", flush=True)
        try:
            result = subprocess.run(
                [gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off", "-ex", "set complaints 0",
                 "-ex", "thread apply all bt 40"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
            )
            lines = result.stdout.decode("utf-8", "replace").splitlines()
            print("\n".join(line for line in lines if not line.startswith("During symbol reading")), flush=True)
        except subprocess.TimeoutExpired:
            print("test-watchdog: gdb took more than 2 minutes; no stacks", flush=True)


def main():
    quiet_limit = float(sys.argv[1])
    command = sys.argv[2:]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    last_output = [time.monotonic()]
    running = {}

    def copy():
        for raw in iter(process.stdout.readline, b""):
            last_output[0] = time.monotonic()
            sys.stdout.buffer.write(raw)
            sys.stdout.buffer.flush()
            line = raw.decode("utf-8", "replace").strip()
            started = re.match(r"◇ Test (.+) started\.$", line)
            # A parameterized test prints a line when each of its cases starts but none when a case ends; its cases are
            # named by the test's own end line, so only tests are tracked.
            if started and not started.group(1).startswith("case passing "):
                running[started.group(1)] = time.monotonic()
                continue
            ended = re.match(r"[✔✘] Test (.+?) (?:with \d+ test cases? )?(?:passed|failed) after", line)
            if ended:
                running.pop(ended.group(1), None)

    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    while process.poll() is None:
        time.sleep(5)
        if time.monotonic() - last_output[0] > quiet_limit and process.poll() is None:
            def report():
                now = time.monotonic()
                print(f"\ntest-watchdog: no output for {quiet_limit:.0f} s; tests that started and did not end:",
                      flush=True)
                for name, began in sorted(running.items(), key=lambda item: item[1]):
                    if name != "run":
                        print(f"  {name} (for {now - began:.0f} s)", flush=True)
            report()
            dump_stacks(process.pid)
            # Again after the stacks, so that a log cut to its tail still names the tests.
            report()
            for pid in tree(process.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            process.wait()
            sys.exit(124)
    reader.join(timeout=10)
    sys.exit(process.returncode)


if __name__ == "__main__":
    main()
