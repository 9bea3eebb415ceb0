#!/usr/bin/env bash
# Benchmarks the key server on loopback with its SQLite store: requests per second and p50/p99 latency of
# POST /v1/keys (token check, device signature, replay cache, device limit, lease, audit, key wrapping, payload
# signature), with Benchmarks/key-server.py as the load generator. Needs swift, and python3 with the `cryptography`
# package (installed with pip if missing). Target: at least 2,000 requests/s with p99 under 50 ms.
# Environment: STOWAGE_BIN (a built `stowage`, default: release build of this package), REQUESTS (20000),
# CONCURRENCY (32), DEVICES (64).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c "import cryptography" 2>/dev/null || pip install -q cryptography
if [ -z "${STOWAGE_BIN:-}" ]; then
    swift build -c release --product stowage >/dev/null
    STOWAGE_BIN="$(swift build -c release --show-bin-path)/stowage"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/stowage-keyserver-bench.XXXXXX")"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

DATA="$WORK/data"
KEY_ID=000102030405060708090a0b0c0d0e0f
KEY=00112233445566778899aabbccddeeff
"$STOWAGE_BIN" keyserver init --data-dir "$DATA" >/dev/null
# Load, not abuse: lift the per-account, per-device and per-source rate limits (every request comes from 127.0.0.1)
# so the benchmark measures issuance.
python3 - "$DATA/config.json" <<'PY'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
config["rateLimit"] = {"requestsPerSecond": 1000000, "burst": 1000000}
config["sourceRateLimit"] = {"requestsPerSecond": 1000000, "burst": 1000000}
json.dump(config, open(path, "w"), indent=2)
PY
"$STOWAGE_BIN" keyserver add-asset bench-movie --key-id "$KEY_ID" --key "$KEY" --data-dir "$DATA" >/dev/null

"$STOWAGE_BIN" keyserver run --data-dir "$DATA" --port 0 >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
URL=""
for _ in $(seq 1 100); do
    URL="$(sed -n 's/^listening on //p' "$WORK/server.out")"
    [ -n "$URL" ] && break
    sleep 0.1
done
[ -n "$URL" ] || { echo "error: the key server did not start" >&2; cat "$WORK/server.err" >&2; exit 1; }

python3 Benchmarks/key-server.py --url "$URL" --data-dir "$DATA" --asset bench-movie --key-id "$KEY_ID" --key "$KEY" \
    --requests "${REQUESTS:-20000}" --concurrency "${CONCURRENCY:-32}" --devices "${DEVICES:-64}"
