#!/usr/bin/env bash
# Benchmarks the key server on loopback: requests per second and p50/p99 latency of POST /v1/keys (token check,
# device signature, replay window, device limit, lease, audit, key wrapping, payload signature), with
# Benchmarks/key-server.py as the load generator, in three layouts measured in one run:
#   sqlite           one `stowage keyserver run` on its data directory's SQLite file
#   postgres         one instance on PostgreSQL (a throwaway cluster, durable: fsync and synchronous commit on)
#   postgres-3-nginx three instances on that database behind nginx with TLS (deploy/nginx-keyserver.conf, a throwaway
#                    CA made with openssl), the fleet layout of docs/deploy.md
# Prints one JSON object per layout, then a Markdown table. Needs swift, python3 with `cryptography` (installed with
# pip if missing), PostgreSQL and nginx from Debian (scripts/ensure-deps.sh). Target: at least 2,000 requests/s with
# p99 under 50 ms on SQLite (issue 17: 5,000/s with p99 under 20 ms). With $STOWAGE_BENCH_RESULTS set, records the
# rows of docs/PERFORMANCE.md (Benchmarks/run.sh).
# Environment: STOWAGE_BIN (a built `stowage`, default: release build of this package), REQUESTS (20000),
# CONCURRENCY (32), DEVICES (64), LAYOUTS ("sqlite postgres postgres-3-nginx").
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c "import cryptography" 2>/dev/null || pip install -q cryptography
if [ -z "${STOWAGE_BIN:-}" ]; then
    swift build -c release --product stowage >/dev/null
    STOWAGE_BIN="$(swift build -c release --show-bin-path)/stowage"
fi
LAYOUTS="${LAYOUTS:-sqlite postgres postgres-3-nginx}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/stowage-keyserver-bench.XXXXXX")"
PIDS=()
SERVER_PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    PIDS=()
    if declare -F stowage_stop_postgres >/dev/null; then stowage_stop_postgres; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

KEY_ID=000102030405060708090a0b0c0d0e0f
KEY=00112233445566778899aabbccddeeff

# A data directory (with --database URL when given), the rate limits lifted (load, not abuse: every request comes from
# 127.0.0.1, so the per-source limit would measure itself), one asset.
prepare() {
    local data="$1"; shift
    "$STOWAGE_BIN" keyserver init --data-dir "$data" "$@" >/dev/null
    python3 - "$data/config.json" <<'PY'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
config["rateLimit"] = {"requestsPerSecond": 1000000, "burst": 1000000}
config["sourceRateLimit"] = {"requestsPerSecond": 1000000, "burst": 1000000}
json.dump(config, open(path, "w"), indent=2)
PY
    # The content key on standard input: a key on a command line is refused (other users can read it).
    printf '%s' "$KEY" | "$STOWAGE_BIN" keyserver add-asset bench-movie --key-id "$KEY_ID" --key - --data-dir "$data" "$@" >/dev/null
}

# Starts `stowage keyserver run` and sets INSTANCE_URL once it listens (not in a command substitution: its subshell
# would keep the PID from cleanup).
start_instance() {
    local data="$1" log="$2"; shift 2
    "$STOWAGE_BIN" keyserver run --data-dir "$data" --port 0 "$@" >"$log.out" 2>"$log.err" &
    PIDS+=($!)
    SERVER_PIDS+=($!)
    local url=""
    for _ in $(seq 1 100); do
        url="$(sed -n 's/^listening on //p' "$log.out")"
        [ -n "$url" ] && break
        sleep 0.1
    done
    [ -n "$url" ] || { echo "error: the key server did not start" >&2; cat "$log.err" >&2; exit 1; }
    INSTANCE_URL="$url"
}

measure() {
    local layout="$1" url="$2" data="$3"; shift 3
    python3 Benchmarks/key-server.py --url "$url" --data-dir "$data" --asset bench-movie --key-id "$KEY_ID" --key "$KEY" \
        --requests "${REQUESTS:-20000}" --concurrency "${CONCURRENCY:-32}" --devices "${DEVICES:-64}" "$@" >"$WORK/$layout.json"
    echo "$layout: $(tr -d '\n' <"$WORK/$layout.json" | tr -s ' ')"
    # The peak resident memory of the key server processes (not nginx), summed over instances.
    local peak=0 pid hwm
    for pid in "${SERVER_PIDS[@]}"; do
        hwm="$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)"
        peak=$((peak + ${hwm:-0}))
    done
    echo "$peak" >"$WORK/$layout.peak-kib"
}

stop_instances() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    PIDS=()
    SERVER_PIDS=()
}

for layout in $LAYOUTS; do
    case "$layout" in
    sqlite)
        prepare "$WORK/sqlite"
        start_instance "$WORK/sqlite" "$WORK/sqlite-server"
        measure sqlite "$INSTANCE_URL" "$WORK/sqlite"
        stop_instances
        ;;
    postgres | postgres-3-nginx)
        if [ -z "${STOWAGE_TEST_POSTGRES:-}" ]; then
            # shellcheck source=../scripts/postgres.sh
            source scripts/postgres.sh
            STOWAGE_PG_DURABLE=1 stowage_start_postgres >/dev/null
            trap cleanup EXIT  # postgres.sh set its own; cleanup stops the cluster too
        fi
        name="bench_$(echo "$layout" | tr -d '-')_$$"
        database="${STOWAGE_TEST_POSTGRES%/postgres*}/$name?sslmode=disable"
        psql "${STOWAGE_TEST_POSTGRES%%\?*}" -qc "CREATE DATABASE $name" >/dev/null
        data="$WORK/$layout"
        prepare "$data" --database "$database"
        if [ "$layout" = postgres ]; then
            start_instance "$data" "$WORK/pg-server" --database "$database"
            measure postgres "$INSTANCE_URL" "$data"
        else
            upstreams=()
            for index in 1 2 3; do
                start_instance "$data" "$WORK/pg-server-$index" --database "$database"
                upstreams+=("$INSTANCE_URL")
            done
            ca="$WORK/ca"
            mkdir -p "$ca" "$WORK/nginx"
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$ca/ca.key" -out "$ca/ca.pem" \
                -days 2 -subj "/CN=Stowage benchmark CA (throwaway)" 2>/dev/null
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$ca/server.key" -out "$ca/server.csr" \
                -subj "/CN=127.0.0.1" 2>/dev/null
            printf 'subjectAltName = IP:127.0.0.1\n' >"$ca/ext"
            openssl x509 -req -in "$ca/server.csr" -CA "$ca/ca.pem" -CAkey "$ca/ca.key" -CAcreateserial -days 2 \
                -extfile "$ca/ext" -out "$ca/server.pem" 2>/dev/null
            port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
            servers=""
            for upstream in "${upstreams[@]}"; do servers+="server ${upstream#http://} max_fails=1 fail_timeout=5s; "; done
            # The deployment file as it is, its placeholders filled (comment lines left alone).
            sed -e "/^[[:space:]]*#/!{s|@PREFIX@|$WORK/nginx|g; s|@LISTEN@|127.0.0.1:$port|g; s|@CERTIFICATE_KEY@|$ca/server.key|g;" \
                -e "s|@CERTIFICATE@|$ca/server.pem|g; s|@UPSTREAM_SERVERS@|$servers|g}" deploy/nginx-keyserver.conf >"$WORK/nginx/nginx.conf"
            globals="daemon off;"
            [ "$(id -u)" -eq 0 ] && globals="daemon off; user root;"
            /usr/sbin/nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" -g "$globals" &
            PIDS+=($!)
            for _ in $(seq 1 100); do
                python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
                sleep 0.1
            done
            measure postgres-3-nginx "https://127.0.0.1:$port" "$data" --ca-file "$ca/ca.pem"
        fi
        stop_instances
        ;;
    *) echo "error: unknown layout $layout (sqlite, postgres, postgres-3-nginx)" >&2; exit 2 ;;
    esac
done

echo
echo "| layout | requests/s | p50 ms | p99 ms | requests | concurrency |"
echo "|---|---:|---:|---:|---:|---:|"
for layout in $LAYOUTS; do
    python3 - "$WORK/$layout.json" "$layout" "$WORK/$layout.peak-kib" "$WORK/sqlite.json" <<'PY'
import json, os, sys
sys.path.insert(0, "Benchmarks")
import results
result = json.load(open(sys.argv[1]))
layout = sys.argv[2]
latency = result["latency_ms"]
peak = int(open(sys.argv[3]).read().strip() or 0) / 1024
print(f"| {layout} | {result['requests_per_second']:,.0f} | {latency['p50']} | {latency['p99']} | {result['requests']} | {result['concurrency']} |")
# Issue 17's targets are SQLite's; PostgreSQL layouts are shown beside SQLite.
sqlite = json.load(open(sys.argv[4])) if layout != "sqlite" and os.path.exists(sys.argv[4]) else None
what = f"`POST /v1/keys`, {layout}, {result['concurrency']} clients, {result['requests']} requests"
results.record("key server", what + ": requests/s", result["requests_per_second"], "req/s",
               reference="sqlite layout" if sqlite else None, reference_value=sqlite["requests_per_second"] if sqlite else None,
               target={"min_value": 5000} if layout == "sqlite" else None, peak_rss_mib=peak)
results.record("key server", what + ": p99 latency", latency["p99"], "ms",
               reference="sqlite layout" if sqlite else None, reference_value=sqlite["latency_ms"]["p99"] if sqlite else None,
               target={"max_value": 20} if layout == "sqlite" else None, higher_is_better=False, peak_rss_mib=peak)
PY
done
