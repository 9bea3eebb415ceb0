#!/usr/bin/env bash
# Installs what Stowage needs on a fresh Debian machine, only where it is missing: the Swift toolchain is assumed
# (/opt/swift); apt gives OpenSSL 3 headers, SQLite headers, pkg-config, ffmpeg, the sqlite3 shell, mpv, VLC,
# PostgreSQL, nginx, gdb, faketime, curl and strace.
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
    # scripts/test-watchdog.py prints every thread's stack of a test run that hangs.
    command -v gdb >/dev/null 2>&1 || missing+=(gdb)
    # The attack suite (scripts/attack.sh): a time shim preloaded into stowage, curl as another user's client, and
    # strace making stowage's system calls fail.
    command -v faketime >/dev/null 2>&1 || missing+=(faketime)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    command -v strace >/dev/null 2>&1 || missing+=(strace)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "==> installing ${missing[*]} (apt)"
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    command -v swift >/dev/null 2>&1 || { echo "error: swift is not on PATH (Swift 6.2 or later is required)" >&2; exit 2; }
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    stowage_ensure_deps
fi
