#!/usr/bin/env bash
# Runs Stowage's whole test suite on a fresh machine: installs what is missing (scripts/ensure-deps.sh), checks the
# formatting, builds once, starts a throwaway PostgreSQL (scripts/postgres.sh), runs every test target (Swift
# Testing runs tests in parallel), then a short fault soak (scripts/soak.sh 10) and 30 s of each fuzz target.
# Needs: Debian with Swift 6.2+ on PATH; root or sudo for apt when something is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
source scripts/postgres.sh
stowage_ensure_deps

echo "==> swift format lint"
swift format lint --strict -r Sources Tests Package.swift Fuzz Examples

echo "==> swift build --build-tests"
swift build --build-tests

echo "==> swift test"
# The fleet key server's store runs against a real PostgreSQL, started once for the whole run.
stowage_start_postgres
# Line-buffered, so that the log shows which tests are running at any moment; a run that prints nothing for 10 minutes
# has a test that never ends, and the watchdog names it, prints every thread's stack and fails the run
# (docs/RELIABILITY.md).
# At most 8 tests at once (STOWAGE_TEST_WIDTH): unbounded, Swift Testing starts all 857 at the same moment on this
# 2-core machine's two cooperative threads, and a test's own deadlines (a 1 s head timeout, a 60 s database answer,
# a 20 s wait for a segment) then run out while it waits its turn; bounded, the run takes as long (217 s against 212 s).
stdbuf -oL -eL python3 scripts/test-watchdog.py "${STOWAGE_TEST_QUIET_LIMIT:-600}" \
    stdbuf -oL -eL swift test --skip-build --experimental-maximum-parallelization-width "${STOWAGE_TEST_WIDTH:-8}"

echo "==> fault soak (10 kills of the CLI, 10 of the service)"
# The same debug build the tests used; scripts/soak.sh 50 is the documented long run (docs/RELIABILITY.md).
STOWAGE_BIN="$(swift build --show-bin-path)/stowage" bash scripts/soak.sh 10

echo "==> fuzzing, 30 s per target (playlists, media, key protocol and files)"
# Each builds its own libFuzzer target (about a minute) into .build-fuzz/; a crash, a hang over 10 s on one input, a
# leak or a broken property fails the run and leaves the input in .build-fuzz/*/crashes/ (docs/fuzzing.md).
bash scripts/fuzz-hls.sh 30
bash scripts/fuzz-media.sh 30
bash scripts/fuzz-protocol.sh 30
