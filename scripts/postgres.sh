#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the test suite (the fleet key server's store): initdb in a temporary
# folder, the server on 127.0.0.1 at a free port with trust authentication for the role `stowage` and fsync off (the
# data is thrown away; STOWAGE_PG_DURABLE=1 keeps PostgreSQL's durable defaults, for benchmarks), stopped and removed when the calling shell exits. Exports STOWAGE_TEST_POSTGRES, the URL the
# tests create their databases through. Sourced by scripts/test.sh; PostgreSQL comes from Debian (ensure-deps.sh).
set -euo pipefail

stowage_start_postgres() {
    local bin
    bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
    [ -x "$bin/initdb" ] || { echo "error: PostgreSQL's initdb is not installed (apt-get install postgresql)" >&2; exit 2; }
    STOWAGE_PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/stowage-pg.XXXXXX")"
    local run=()
    if [ "$(id -u)" -eq 0 ]; then
        # PostgreSQL refuses to run as root: the cluster belongs to Debian's postgres user.
        chown postgres:postgres "$STOWAGE_PG_DIR"
        run=(setpriv --reuid=postgres --regid=postgres --init-groups)
    fi
    local port
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    "${run[@]}" "$bin/initdb" -D "$STOWAGE_PG_DIR/data" -U stowage --auth=trust -E UTF8 >/dev/null
    local durability="-c fsync=off -c synchronous_commit=off"
    [ "${STOWAGE_PG_DURABLE:-0}" = 1 ] && durability=""
    "${run[@]}" "$bin/pg_ctl" -D "$STOWAGE_PG_DIR/data" -l "$STOWAGE_PG_DIR/server.log" -w -t 60 \
        -o "-p $port -k $STOWAGE_PG_DIR -c listen_addresses=127.0.0.1 $durability -c max_connections=300" \
        start >/dev/null
    STOWAGE_PG_CTL=("${run[@]}" "$bin/pg_ctl")
    trap stowage_stop_postgres EXIT
    export STOWAGE_TEST_POSTGRES="postgres://stowage@127.0.0.1:$port/postgres?sslmode=disable"
    echo "==> PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (throwaway cluster)"
}

stowage_stop_postgres() {
    if [ -n "${STOWAGE_PG_DIR:-}" ]; then
        "${STOWAGE_PG_CTL[@]}" -D "$STOWAGE_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
        rm -rf "$STOWAGE_PG_DIR"
    fi
}
