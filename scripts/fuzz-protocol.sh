#!/usr/bin/env bash
# Builds the libFuzzer target for what Stowage parses from key servers, devices and files a user can edit (Fuzz/
# ProtocolFuzz: key-protocol messages and signatures on both sides, wrapped keys, a package's manifest.json, the key
# server's config.json, the origin's request paths and the play server's relative paths, Range headers) with swiftc
# -sanitize=fuzzer,address and fuzzes it for $1 seconds (default 60). Like scripts/fuzz-media.sh: no SwiftPM,
# everything in .build-fuzz/protocol/ (git-ignored), crashes in .build-fuzz/protocol/crashes/ make it exit non-zero.
# Needs libssl-dev (OpenSSL's libcrypto, which StowageCrypto calls). See docs/fuzzing.md.
#
# The parsers live in modules that also hold database and network code (GRDB, NIO); only the files that parse are
# compiled here, each set under its module's name, so the harness calls them as a client does (`import KeyDelivery`).
#
# Usage: scripts/fuzz-protocol.sh [SECONDS] [extra libFuzzer flags...]
#   FUZZ_NO_BUILD=1 reuses the last build; SWIFTC=/path/to/swiftc picks a toolchain.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SECONDS_TO_RUN="${1:-60}"
shift || true

OUT=.build-fuzz/protocol
NAME=fuzz-protocol
BIN="$OUT/protocol-fuzz"
source scripts/fuzz-common.sh

# --- Build -----------------------------------------------------------------------------------------------------
if [[ "${FUZZ_NO_BUILD:-0}" != 1 || ! -x "$BIN" ]]; then
    mapfile -t core < <(find Sources/StowageCore -name '*.swift' | LC_ALL=C sort)
    mapfile -t crypto < <(find Sources/StowageCrypto -name '*.swift' | LC_ALL=C sort)
    fuzz_build_module StowageCore "${core[@]}"
    fuzz_build_module StowageCrypto "${crypto[@]}"
    # The key protocol: its messages, signing, key wrapping, and the device identity the wrapping names.
    mapfile -t delivery < <(find Sources/KeyDelivery/Protocol Sources/KeyDelivery/Crypto Sources/KeyDelivery/Device -name '*.swift' | LC_ALL=C sort)
    fuzz_build_module KeyDelivery "${delivery[@]}"
    # Packages on disk: the manifest, the package folder's path rules, the data directory.
    fuzz_build_module OfflinePackage Sources/OfflinePackage/Manifest/*.swift Sources/OfflinePackage/Layout/PackageDirectory.swift \
        Sources/OfflinePackage/DataDirectory.swift
    # The key server's configuration.
    fuzz_build_module KeyServer Sources/KeyServer/Configuration/KeyServerConfiguration.swift Sources/KeyServer/Configuration/AssetPolicy.swift \
        Sources/KeyServer/Configuration/KeyServerSetupError.swift Fuzz/ProtocolFuzz/Shims/ForwardedSource.swift
    fuzz_link "$BIN" ProtocolFuzz Fuzz/ProtocolFuzz/ProtocolFuzz.swift Sources/OriginServer/Files/RequestPath.swift \
        "$OUT/obj/StowageCore.o" "$OUT/obj/StowageCrypto.o" "$OUT/obj/KeyDelivery.o" "$OUT/obj/OfflinePackage.o" "$OUT/obj/KeyServer.o"
fi

# --- Seeds -----------------------------------------------------------------------------------------------------
# Regenerated every run: a mode byte, then a real input of that kind.
rm -f "$SEEDS"/*
seed() {  # MODE, the input on standard input (often from a pipeline, so no counter in the shell)
    local mode="$1"
    { printf "\\x$(printf %02x "$mode")"; cat; } >"$(mktemp "$SEEDS/seed-$mode-XXXXXX")"
}
# 0, 1: lease payloads and signed payloads as a key server answers (docs/key-protocol-extensions.md shapes).
payload='{"version":1,"lease":{"leaseId":"8f5e0a51-2d4c-4b8e-9a50-3a6f0f5e2b11","assetId":"movie-1","deviceId":"00112233445566778899aabbccddeeff","keyIds":["000102030405060708090a0b0c0d0e0f"],"type":"persistent","issuedAt":1763700000,"storageExpiresAt":1766292000,"playbackDuration":172800,"renewableUntil":1771476000,"requestNonce":"AAECAwQFBgcICQoLDA0ODw==","firstPlayedAt":1763700100},"keys":[{"keyId":"000102030405060708090a0b0c0d0e0f","ephemeralKey":"3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=","nonce":"AAECAwQFBgcICQoL","wrappedKey":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}],"serverTime":1763700000}'
printf '%s' "$payload" | seed 0
printf '{"payload":"%s","signature":"%s"}' "$(printf '%s' "$payload" | base64 -w0)" "$(head -c 64 /dev/zero | base64 -w0)" | seed 1
# 2: request bodies.
printf '{"version":1,"assetId":"movie-1","keyIds":["000102030405060708090a0b0c0d0e0f"],"lease":"persistent","nonce":"AAECAwQFBgcICQoLDA0ODw==","clientTime":1763700000,"device":{"deviceId":"00112233445566778899aabbccddeeff","signingKey":"A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=","agreementKey":"3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08="}}' | seed 2
printf '{"version":1,"leaseId":"8f5e0a51-2d4c-4b8e-9a50-3a6f0f5e2b11","deviceId":"00112233445566778899aabbccddeeff","nonce":"AAECAwQFBgcICQoLDA0ODw==","clientTime":1763700000,"firstPlayedAt":1763700100}' | seed 2
printf '{"version":1,"leaseId":"8f5e0a51-2d4c-4b8e-9a50-3a6f0f5e2b11","deviceId":"00112233445566778899aabbccddeeff","nonce":"AAECAwQFBgcICQoLDA0ODw==","deletedAt":1763700200}' | seed 2
# 3: a signature header.
printf 'ed25519=%s' "$(head -c 64 /dev/zero | base64 -w0)" | seed 3
# 4: manifests as packages hold them (the test fixtures'), 5: key server configurations.
for file in $(find Fixtures Tests -name 'manifest*.json' 2>/dev/null | head -20); do seed 4 <"$file"; done
printf '{"schemaVersion":1,"assetId":"fuzz-asset","createdAt":1763700000,"updatedAt":1763700000,"multivariantPlaylist":"master.m3u8","sourceURL":"https://cdn.example/master.m3u8","keys":[],"renditions":[],"availableRenditions":[]}' | seed 4
printf '{"audience":"stowage","defaultPolicy":"default","maxTokenLifetime":86400,"policies":{"default":{"storageDuration":2592000,"playbackDuration":172800,"persistentAllowed":true,"renewable":true,"renewalExtension":2592000,"renewableFor":7776000,"maxDevices":3}}}' | seed 5
# 6: request targets and relative paths, 7: Range headers after three size bytes.
for target in '/demo/master.m3u8' '/a%20b/seg.ts?token=1' '/../etc/passwd' '/a/%2e%2e/b' 'video/00001.ts' 'a\b' '/x%00y'; do printf '%s' "$target" | seed 6; done
for range in 'bytes=0-99' 'bytes=-100' 'bytes=100-' 'bytes=0-0,5-9' 'items=1-2' 'bytes=18446744073709551615-'; do printf '\x01\x00\x00%s' "$range" | seed 7; done
echo "fuzz-protocol: $(find "$SEEDS" -type f | wc -l) seeds"

# --- Fuzz ------------------------------------------------------------------------------------------------------
fuzz_run "$BIN" "$SECONDS_TO_RUN" 65536 "$@"
