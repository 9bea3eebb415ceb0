#!/usr/bin/env bash
# Runs the whole test suite under a sanitizer (docs/RELIABILITY.md): `scripts/sanitize.sh address` (AddressSanitizer:
# out-of-bounds, use-after-free, leaks in C code such as OpenSSL calls) or `scripts/sanitize.sh thread`
# (ThreadSanitizer: data races). Each builds into its own folder (.build-asan, .build-tsan; a clean build takes 10 to
# 20 minutes on 2 cores) so the normal build is untouched, starts the throwaway PostgreSQL like scripts/test.sh, and
# passes any further arguments to `swift test` (e.g. --filter PlaybackTests). Not run by .ci/run (it would not fit
# the time limit); run it before each release and after changes to the crypto, TS or fMP4 code.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
source scripts/postgres.sh
stowage_ensure_deps

sanitizer="${1:-address}"
shift || true
case "$sanitizer" in
    address) folder=.build-asan ;;
    thread) folder=.build-tsan ;;
    *) echo "usage: scripts/sanitize.sh address|thread [swift test arguments...]" >&2; exit 2 ;;
esac

echo "==> swift build --build-tests --sanitize=$sanitizer (into $folder)"
swift build --build-tests --sanitize="$sanitizer" --build-path "$folder"

echo "==> swift test --sanitize=$sanitizer"
stowage_start_postgres
# Swift's crash backtracer and the sanitizers' own reports get in each other's way; the sanitizer's report is the one.
export SWIFT_BACKTRACE=enable=no
# Child processes (the `stowage` executable the tests start) are built with the same sanitizer.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0:second_deadlock_stack=1}"
# At most 8 tests at once, as scripts/test.sh runs them: the sanitizers slow everything 2 to 10 times, and a test's own
# deadlines must not run out while it waits its turn.
swift test --skip-build --sanitize="$sanitizer" --build-path "$folder" \
    --experimental-maximum-parallelization-width "${STOWAGE_TEST_WIDTH:-8}" "$@"
