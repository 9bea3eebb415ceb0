#!/usr/bin/env bash
# Proves that the checks on the lease and trust path are guarded by tests (docs/SECURITY.md): for each check in the
# list below, removes it from a throwaway copy of HEAD (a git worktree under $TMPDIR, built in its own .build), runs
# the tests named beside it, and expects them to FAIL; then puts the check back. Prints one line per check (caught or
# MISSED) and exits 1 if any was missed. Slow (an incremental build per check, a first full build): run it by hand
# after changing a check, not in CI. Needs what scripts/test.sh needs; `--only NAME[,NAME...]` runs those checks.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
source scripts/postgres.sh
stowage_ensure_deps

only="${2:-}"
[ "${1:-}" = "--only" ] || only=""
work="$(mktemp -d "${TMPDIR:-/tmp}/stowage-mutate.XXXXXX")"
git worktree add --detach "$work/tree" HEAD >/dev/null
cleanup() { git worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap 'cleanup; stowage_stop_postgres' EXIT
stowage_start_postgres

# name | file | text of the check | what it becomes | tests that must fail without it
checks=$(cat <<'LIST'
null-mac|Sources/KeyDelivery/Store/KeyStoreSecrets.swift|guard let code else { return false }|guard let code else { return true }|AttackTests/nullStateCode
ipv4-loopback|Sources/KeyDelivery/Store/ServerKeyPins.swift|guard parts.count == 4, parts[0] == "127" else { return false }|guard parts.count == 4 else { return false }|TrustTests/loopbackHosts
dot-localhost|Sources/KeyDelivery/Store/ServerKeyPins.swift|if name == "localhost" \|\| name == "::1" { return true }|if name == "localhost" \|\| name.hasSuffix(".localhost") \|\| name == "::1" { return true }|TrustTests/loopbackHosts
ledger|Sources/KeyDelivery/Store/KeyStore+Leases.swift|        if entry == nil {|        if entry == nil, CommandLine.arguments.isEmpty {|AttackTests/eraseAndRestoreRows
anchor-change-time|Sources/KeyDelivery/Store/KeyStoreAnchor.swift|        if recorded.changedAt == changedAt && recorded.generation == generation { return nil }|        if recorded.generation == generation { return nil }|AttackTests/restoreRowsAndAnchor
anchor-change-time-unread|Sources/KeyDelivery/Store/KeyStoreAnchor.swift|        guard let changedAt else {|        guard let changedAt else { return nil }; if false {|AttackTests/restoreRowsAndAnchor
kernel-clock|Sources/KeyDelivery/Lease/Clock.swift|    public var now: Int64 { KernelTime.now }|    public var now: Int64 { KernelTime.libraryNow }|AttackTests/timeShim
clock-disagreement|Sources/KeyDelivery/Lease/Clock.swift|        guard abs(library - kernel) > tolerance else { return nil }|        guard CommandLine.arguments.isEmpty else { return nil }|AttackTests/timeShim
per-lease-latch|Sources/KeyDelivery/Store/KeyStoreAnchor.swift|        return ((entry?.rollbackCount ?? 0) < rollbackCount, (entry?.tamperCount ?? 0) < tamperCount)|        return (entry == nil && CommandLine.arguments.isEmpty, false)|KeyStoreLeaseTests/rollbackIsDetectedAndClearedOnlyByARenewal
identity-key-latch|Sources/KeyDelivery/Store/KeyStore+IdentityKeys.swift|now < mark.addingClamped(-KeyProtocol.clockLeeway) \|\| recorded.rollbackCount < state.anchor.rollbackCount|now < mark.addingClamped(-KeyProtocol.clockLeeway)|PackageVerifierTests/aClockSetBackIsCaught
identity-key-anchor|Sources/KeyDelivery/Store/KeyStore+IdentityKeys.swift|anchor != Latches(state.anchor).anchorCreatedAt {|anchor != Latches(state.anchor).anchorCreatedAt, CommandLine.arguments.isEmpty {|IdentityKeySealingTests/aKeyIsHeldWhenTheAnchorItWasStoredUnderIsMadeAnew
play-url-uid|Sources/Playback/PlaybackSessionPath.swift|guard let peer, peer.uid == owner else { return .otherUser }|guard let peer else { return .otherUser }|EntryLatchTests/onlyTheServersOwnUserClaimsIt
lease-from-key-store|Sources/Playback/Gate/PlaybackGate.swift|needsLease = !manifestSKD.isEmpty \|\| facts.hasHadLease|needsLease = !manifestSKD.isEmpty|AttackTests/editedManifest
secret-on-command-line|Sources/KeyDelivery/Device/SecretInput.swift|guard option == "-" else { throw SecretInputError.onCommandLine(option: "--token", alternatives: tokenAlternatives) }|guard option == "-" else { return option }|SecretInputTests/aTokenIsRefusedOnTheCommandLineAndFromTwoPlacesOrNowhere
token-sealed|Sources/AssetDownload/State/DownloadStore.swift|        RequestSecrets.strip(&clear)|        clear.concurrency += 0|AttackTests/tokenStaysSecret
client-time|Sources/KeyServer/Service/KeyService.swift|        guard let clientTime else { return }|        guard let clientTime, CommandLine.arguments.isEmpty else { return }|AttackServerTests/replayAfterTheNonceWindow
pooled-device-limit|Sources/KeyServer/Issuance/LeaseIssuance.swift|        } else if let maxDevices = policy.maxDevices {|        } else if !streaming, let maxDevices = policy.maxDevices {|IssuanceConformanceTests
rental-every-kind|Sources/KeyServer/Issuance/LeaseIssuance.swift|        if policy.oncePerAccount {|        if policy.oncePerAccount, request.kind == .persistent {|IssuanceConformanceTests
key-from-playing-lease|Sources/OfflinePackage/Keys/PackageKeyring.swift|(leaseIds?.contains(lease.leaseId) ?? true)|(leaseIds?.contains(lease.leaseId) ?? true \|\| !CommandLine.arguments.isEmpty)|AttackTests/ownKeyServerLease
ledger-issuer|Sources/KeyDelivery/Store/KeyStore+Leases.swift|        let keyServer = entry?.keyServer ?? row.keyServer|        let keyServer = row.keyServer|LeaseIntegrityTests/aLeasePointedAtAnotherKeyServerIsRenewedOnlyByItsIssuer
renewal-unvouched-row|Sources/KeyDelivery/Store/KeyStore+Leases.swift|            } else if secrets.isAuthentic(row.stateMAC, for: Self.stateFields(row)) {|            } else if secrets.isAuthentic(row.stateMAC, for: Self.stateFields(row)) \|\| !CommandLine.arguments.isEmpty {|LeaseIntegrityTests/withTheLedgerGoneAnEditedRowIsRenewedByNoOne
one-key-server-per-asset|Sources/KeyDelivery/Store/KeyStore+Leases.swift|.first(where: { $0.keyServer != keyServer && |.first(where: { $0.keyServer != keyServer && CommandLine.arguments.isEmpty && |AttackTests/ownKeyServerLease
user-namespace|Sources/Playback/Gate/PlaybackGate.swift|if needsLease, let confinement = UserNamespace.confinement() {|if needsLease, CommandLine.arguments.isEmpty, let confinement = UserNamespace.confinement() {|AttackTests/overlayInAUserNamespace
anchor-catch-up|Sources/KeyDelivery/Store/ClientState.swift|        state.anchorToRecord = catchUp|        state.anchorToRecord = CommandLine.arguments.isEmpty ? catchUp : nil|AnchorChangeTimeTests/anAnchorAheadOfAFailedCommitIsNotTampering
header-origin|Sources/KeyDelivery/HTTP/ScopedHeaders.swift|if scheme == "http", !plainHTTPAllowed { return false }|if scheme == "http", !plainHTTPAllowed, CommandLine.arguments.isEmpty { return false }|SecretInputTests/headersGoToThePlaylistsOriginOnly
identity-stream-name|Sources/KeyServer/Service/KeyService.swift|let bearer = EntitlementVerifier.bearerToken(authorization) ?? ""|let bearer = authorization ?? ""|AttackServerTests/oneTokenOneStream
metrics-token|Sources/KeyServer/HTTP/KeyServerOperations.swift|            guard Self.bears(metricsToken, request.headers[.authorization]) else {|            guard !CommandLine.arguments.isEmpty \|\| Self.bears(metricsToken, request.headers[.authorization]) else {|KeyServerOperationsTests/operationsEndpoints
LIST
)

missed=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    name="${line%%|*}"
    [ -z "$only" ] || [[ ",$only," == *",$name,"* ]] || continue
    python3 - "$work/tree" "$line" <<'PY'
import sys
root, line = sys.argv[1], sys.argv[2]
fields = [field.replace("\\|", "|") for field in __import__("re").split(r"(?<!\\)\|", line)]
name, path, check, mutant = fields[0], fields[1], fields[2], fields[3]
text = open(f"{root}/{path}").read()
if text.count(check) != 1:
    sys.exit(f"{name}: the check is not found once in {path}; update scripts/mutate.sh")
open(f"{root}/{path}", "w").write(text.replace(check, mutant))
PY
    filter="$(python3 -c 'import re,sys; print(re.split(r"(?<!\\)\|", sys.argv[1])[4])' "$line")"
    file="$(python3 -c 'import re,sys; print(re.split(r"(?<!\\)\|", sys.argv[1])[1])' "$line")"
    if (cd "$work/tree" && swift build --build-tests --scratch-path "$work/build" >"$work/build.log" 2>&1); then
        if (cd "$work/tree" && swift test --skip-build --scratch-path "$work/build" --filter "$filter" >"$work/test.log" 2>&1); then
            echo "MISSED  $name: $filter passed without the check"
            missed=1
        else
            echo "caught  $name: $filter fails without the check"
        fi
    else
        echo "MISSED  $name: the mutant does not build (see the log); fix the list"
        tail -20 "$work/build.log"
        missed=1
    fi
    git -C "$work/tree" checkout -- "$file"
done <<< "$checks"
exit "$missed"
