#!/usr/bin/env bash
# Installs what Stowage needs on a fresh Debian machine, only where it is missing: the Swift toolchain is assumed
# (/opt/swift); apt gives OpenSSL 3 headers, SQLite headers, pkg-config, ffmpeg, the sqlite3 shell, mpv, VLC,
# PostgreSQL, nginx with its RTMP module, gdb, faketime, curl, strace, xxd, python3 and man; and a machine ID where
# the system has none.
# Sourced by scripts/test.sh and scripts/demo.sh; safe to run twice.
set -euo pipefail

stowage_ensure_deps() {
    local missing=()
    dpkg -s libssl-dev >/dev/null 2>&1 || missing+=(libssl-dev)
    dpkg -s libsqlite3-dev >/dev/null 2>&1 || missing+=(libsqlite3-dev)
    dpkg -s pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    command -v ffmpeg >/dev/null 2>&1 || missing+=(ffmpeg)
    # The tests edit stowage.sqlite with the sqlite3 shell, as a curious user would.
    command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)
    # Real players as the playback gate's clients (PlaybackTests/RealPlayerTests).
    command -v mpv >/dev/null 2>&1 || missing+=(mpv)
    command -v cvlc >/dev/null 2>&1 || missing+=(vlc-bin)
    dpkg -s vlc-plugin-base >/dev/null 2>&1 || missing+=(vlc-plugin-base)
    # The fleet key server's store, tested against a real server (scripts/postgres.sh).
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
    # A TLS-terminating proxy in front of key servers and origins (TLSTests, KeyServerFleetTests).
    [ -x /usr/sbin/nginx ] || missing+=(nginx)
    # nginx-rtmp's live HLS, one of the live sources nobody here wrote (LiveSourceTests, scripts/live-sources/).
    [ -f /usr/lib/nginx/modules/ngx_rtmp_module.so ] || missing+=(libnginx-mod-rtmp)
    # xxd writes the rotating keys of scripts/live-sources/ffmpeg-live.sh.
    command -v xxd >/dev/null 2>&1 || missing+=(xxd)
    # scripts/test-watchdog.py prints every thread's stack of a test run that hangs.
    command -v gdb >/dev/null 2>&1 || missing+=(gdb)
    # The attack suite (scripts/attack.sh): a time shim preloaded into stowage, curl as another user's client, and
    # strace making stowage's system calls fail.
    command -v faketime >/dev/null 2>&1 || missing+=(faketime)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    command -v strace >/dev/null 2>&1 || missing+=(strace)
    # The test watchdog, the error-code check and the benchmarks' load generators are Python.
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    # ManualPageTests reads the generated pages with man, as a user would.
    command -v man >/dev/null 2>&1 || missing+=(man-db)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "==> installing ${missing[*]} (apt)"
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    command -v swift >/dev/null 2>&1 || { echo "error: swift is not on PATH (Swift 6.2 or later is required)" >&2; exit 2; }
    stowage_ensure_machine_id
}

# The key store is bound to the machine (its secret is derived with /etc/machine-id): a container or chroot without
# one gets one, as systemd-machine-id-setup would make it (32 random hex digits), written once and never changed.
stowage_ensure_machine_id() {
    if [ -s /etc/machine-id ] || [ -s /var/lib/dbus/machine-id ]; then
        return
    fi
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "==> this system has no machine ID; writing /etc/machine-id"
    if command -v systemd-machine-id-setup >/dev/null 2>&1; then
        $sudo systemd-machine-id-setup >/dev/null
    else
        od -An -N16 -tx1 /dev/urandom | tr -d ' \n' | $sudo tee /etc/machine-id >/dev/null
        echo | $sudo tee -a /etc/machine-id >/dev/null
    fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    stowage_ensure_deps
fi
