import Foundation
import StowageCore
import StowageCrypto
import Testing

@testable import KeyDelivery

/// The lease is what the server signed (docs/SECURITY.md): every edit a curious user can make to `stowage.sqlite`,
/// `key-store.anchor` or `key-server-pins.json` with the usual tools is refused, never rewarded.
///
/// The edits are raw SQL on the store's own database file, as `sqlite3 stowage.sqlite "UPDATE ..."` would make them.
struct LeaseIntegrityTests {
    let server: TestKeyServer

    init() throws {
        server = try TestKeyServer()
    }

    /// Issued 1_000_000, storage until 2_000_000, 48 h of playback.
    static let playbackEnd: Int64 = 1_100_000 + 172_800

    private func open(_ temporary: TemporaryDirectory, at now: Int64) throws -> KeyStore {
        try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: now))
    }

    /// A store holding lease-1 for movie-1, stored at 1_000_000 and, when `played`, first played at 1_100_000.
    private func storeWithLease(_ temporary: TemporaryDirectory, played: Bool) throws -> KeyStore {
        let store = try open(temporary, at: 1_000_000)
        try store.persist(try server.payload(), from: server, at: 1_000_000)
        if played { #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_100_000).isValid) }
        return store
    }

    /// The edits a curious user makes to stretch a lease, one bit each in `combination`.
    private static let edits = [
        "UPDATE key_leases SET first_played_at = NULL",
        "UPDATE key_leases SET storage_expires_at = 4102444800",
        "UPDATE key_leases SET state = 'persisted'",
        "UPDATE key_leases SET playback_duration = NULL",
    ]

    private static func apply(_ combination: Int, to store: KeyStore) throws {
        for (bit, sql) in edits.enumerated() where combination & (1 << bit) != 0 {
            try store.executeUncheckedForTesting(sql)
        }
    }

    private static let refusals: Set<String> = ["lease_tampered", "playback_window_expired", "storage_window_expired", "lease_expired"]

    @Test(arguments: 0..<16)
    func noEditAfterThePlaybackWindowPlaysAgain(_ combination: Int) throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: true)
        let late = Self.playbackEnd + 60
        try Self.apply(combination, to: store)
        // The running store (a playback server's per-request check) and a fresh open (a new `stowage play`).
        let running = try store.authorizePlayback(assetId: "movie-1", at: late)
        #expect(!running.isValid)
        #expect(Self.refusals.contains(running.code?.rawValue ?? ""), "\(running.code?.rawValue ?? "valid")")
        if combination != 0 { #expect(running.code == "lease_tampered") }
        let reopened = try open(temporary, at: late)
        let again = try reopened.authorizePlayback(assetId: "movie-1", at: late)
        #expect(!again.isValid)
        #expect(Self.refusals.contains(again.code?.rawValue ?? ""), "\(again.code?.rawValue ?? "valid")")
        // No path hands out the keys either.
        #expect(throws: (any Error).self) { try reopened.contentKeys(leaseId: "lease-1", device: server.device) }
    }

    @Test(arguments: 0..<16)
    func noEditAfterTheStorageWindowPlaysAgain(_ combination: Int) throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: false)
        let late: Int64 = 2_000_060
        try Self.apply(combination, to: store)
        let running = try store.authorizePlayback(assetId: "movie-1", at: late)
        #expect(!running.isValid)
        #expect(Self.refusals.contains(running.code?.rawValue ?? ""), "\(running.code?.rawValue ?? "valid")")
        let again = try open(temporary, at: late).authorizePlayback(assetId: "movie-1", at: late)
        #expect(!again.isValid)
        #expect(Self.refusals.contains(again.code?.rawValue ?? ""), "\(again.code?.rawValue ?? "valid")")
    }

    @Test func anEditedRowIsRefusedEvenInsideItsWindowsAndARenewalRepairsIt() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: true)
        try store.executeUncheckedForTesting("UPDATE key_leases SET storage_expires_at = 4102444800")
        let refused = try store.authorizePlayback(assetId: "movie-1", at: 1_100_100)
        #expect(refused.code == "lease_tampered")
        #expect(refused.error?.message.contains("renew") == true)
        #expect(refused.error?.message.contains("storage end") == true)
        // What `stowage keys list` shows, and the keys: none.
        #expect(try store.lease(id: "lease-1")?.record.tampering != nil)
        #expect(throws: LeaseError.self) { try store.contentKeys(leaseId: "lease-1", device: server.device) }
        // A renewal from the server stores fresh terms and state: the first play is kept (from the anchor).
        try store.renew(try server.payload(storageExpiresAt: 2_500_000, serverTime: 1_100_200), at: 1_100_200)
        let repaired = try store.authorizePlayback(assetId: "movie-1", at: 1_100_300)
        #expect(repaired.isValid)
        #expect(repaired.lease?.firstPlayedAt == 1_100_000)
        #expect(repaired.playbackEndsAt == Self.playbackEnd)
    }

    @Test func aRowCopiedBackFromBeforeTheFirstPlayDoesNotRestartTheWindow() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: false)
        // The row as it was before playback, with its then valid code, saved by the user...
        try store.executeUncheckedForTesting("CREATE TABLE saved AS SELECT * FROM key_leases")
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_100_000).isValid)
        // ...and copied back after the playback window.
        try store.executeUncheckedForTesting(
            """
            UPDATE key_leases SET first_played_at = (SELECT first_played_at FROM saved), state = (SELECT state FROM saved),
                state_mac = (SELECT state_mac FROM saved)
            """
        )
        #expect(try store.lease(id: "lease-1")?.record.tampering == nil)
        #expect(try store.lease(id: "lease-1")?.record.firstPlayedAt == 1_100_000)
        let late = try store.authorizePlayback(assetId: "movie-1", at: Self.playbackEnd + 60)
        #expect(late.code == "playback_window_expired")
    }

    @Test func aReleaseQueuedByHandForALeaseThatHoldsKeysIsNeverSent() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: false)
        try store.persist(try server.payload(leaseId: "lease-2", assetId: "movie-2"), from: server, at: 1_000_000)
        try store.returnLease(leaseId: "lease-2", at: 1_000_100)
        #expect(try store.pendingReleases().map(\.leaseId) == ["lease-2"])
        // Freeing lease-1's device slot on the server while its keys stay here: a queue row made by hand, even with the
        // code of a real one.
        try store.executeUncheckedForTesting(
            "INSERT INTO key_release_queue (lease_id, deleted_at, queued_at, mac) SELECT 'lease-1', deleted_at, queued_at, mac FROM key_release_queue"
        )
        #expect(try store.pendingReleases().map(\.leaseId) == ["lease-2"])
        try store.executeUncheckedForTesting("UPDATE key_release_queue SET mac = NULL WHERE lease_id = 'lease-2'")
        #expect(try store.pendingReleases().isEmpty)
    }

    @Test func aPinWrittenByHandDoesNotMakeAForgedPayloadVerify() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: true)
        // The user signs terms of their own, reusing the wrapped keys, and pins their own key for the server's URL.
        let forger = try TestKeyServer(device: server.device)
        let forged = try forger.payload(storageExpiresAt: 4_102_444_800, playbackDuration: nil)
        let pins = temporary.dataDirectory.appendingPathComponent(KeyStore.pinsFileName)
        let text = try String(contentsOf: pins, encoding: .utf8)
        let original = StrictBase64.encode(server.signingKey.publicKey.rawRepresentation)
        let replaced = text.replacingOccurrences(of: original, with: StrictBase64.encode(forger.signingKey.publicKey.rawRepresentation))
        #expect(replaced != text)
        try Data(replaced.utf8).write(to: pins)
        try store.executeUncheckedForTesting(
            "UPDATE key_lease_payloads SET payload = '\(forged.signed.payload)', signature = '\(forged.signed.signature)'"
        )
        let refused = try store.authorizePlayback(assetId: "movie-1", at: Self.playbackEnd + 60)
        #expect(refused.code == "lease_tampered")
        let pin = #expect(throws: KeyStoreError.self) { try store.pinnedServerKey(for: TestKeyServer.url) }
        #expect(pin?.code == "pinned_key_damaged")
    }

    @Test(arguments: ["row", "anchor", "both"])
    func aDeletedTimeRecordRefusesPlaybackUntilARenewal(_ deleted: String) throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: true)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_103_600).isValid)
        if deleted != "anchor" { try store.executeUncheckedForTesting("DELETE FROM key_time_anchor") }
        if deleted != "row" {
            try FileManager.default.removeItem(at: temporary.dataDirectory.appendingPathComponent(KeyStore.anchorFileName))
        }
        // An hour back: without the mark this would look like an ordinary time.
        let rolledBack = try store.authorizePlayback(assetId: "movie-1", at: 1_100_000)
        #expect(rolledBack.code == "lease_tampered")
        #expect(try open(temporary, at: 1_103_700).authorizePlayback(assetId: "movie-1", at: 1_103_700).code == "lease_tampered")
        #expect(try store.auditEntries().contains { $0.kind == .stateTampered })
        // A renewal re-anchors time to the server's.
        try store.renew(try server.payload(storageExpiresAt: 2_500_000, serverTime: 1_103_800), at: 1_103_800)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_103_900).isValid)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_100_000).code == "clock_rollback_detected")
    }

    /// A lease pointed with sqlite3 at a key server the user runs and has pinned, which signs renewals with endless
    /// terms: the ledger names the server that issued the lease, so renewals still go there, the other server's answer
    /// is refused, and a renewal from the issuer repairs the row.
    @Test func aLeasePointedAtAnotherKeyServerIsRenewedOnlyByItsIssuer() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: true)
        let own = try TestKeyServer(device: server.device)
        let ownURL = "http://127.0.0.1:9"
        try store.pin(own.signingKey.publicKey, for: ownURL, at: 1_100_000)
        try store.executeUncheckedForTesting("UPDATE key_leases SET key_server = '\(ownURL)'")
        let pointed = try #require(try store.lease(id: "lease-1"))
        #expect(pointed.keyServer == TestKeyServer.url)
        #expect(pointed.record.tampering?.contains("key server was changed") == true, "\(pointed.record.tampering ?? "")")

        let endless = try own.payload(storageExpiresAt: 9_000_000, playbackDuration: nil, renewableUntil: 9_000_000, serverTime: 1_100_100)
        #expect(throws: (any Error).self) { try store.renew(endless, at: 1_100_100) }
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_100_200).code == "lease_tampered")

        try store.renew(try server.payload(storageExpiresAt: 2_500_000, serverTime: 1_100_300), at: 1_100_300)
        let repaired = try store.authorizePlayback(assetId: "movie-1", at: 1_100_400)
        #expect(repaired.isValid, "\(repaired.code?.rawValue ?? "") \(repaired.error?.message ?? "")")
        #expect(try store.lease(id: "lease-1")?.record.tampering == nil)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: Self.playbackEnd + 10).code == "playback_window_expired")
    }

    /// The same with the ledger deleted first (so no entry names the issuer) and the stored payload replaced by one the
    /// user's server signed: the row no longer matches its code, so no key server may renew it.
    @Test func withTheLedgerGoneAnEditedRowIsRenewedByNoOne() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: true)
        let own = try TestKeyServer(device: server.device)
        let ownURL = "http://127.0.0.1:9"
        try store.pin(own.signingKey.publicKey, for: ownURL, at: 1_100_000)
        try FileManager.default.removeItem(at: temporary.dataDirectory.appendingPathComponent(KeyStore.anchorFileName))
        let forged = try own.payload(storageExpiresAt: 9_000_000, playbackDuration: nil, renewableUntil: 9_000_000, serverTime: 1_100_050).signed
        try store.executeUncheckedForTesting(
            """
            UPDATE key_leases SET key_server = '\(ownURL)', first_played_at = NULL, state = 'persisted';
            UPDATE key_lease_payloads SET payload = '\(forged.payload)', signature = '\(forged.signature)';
            """
        )
        let endless = try own.payload(storageExpiresAt: 9_000_000, playbackDuration: nil, renewableUntil: 9_000_000, serverTime: 1_100_100)
        let refused = #expect(throws: LeaseError.self) { try store.renew(endless, at: 1_100_100) }
        #expect(refused?.code == "lease_tampered" && refused?.message.contains("no key server may renew it") == true)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_100_200).code == "lease_tampered")
    }

    @Test func anOldRowCopiedBackDoesNotLowerTheMark() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try storeWithLease(temporary, played: true)
        try store.executeUncheckedForTesting("CREATE TABLE saved_mark AS SELECT * FROM key_time_anchor")
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_150_000).isValid)
        try store.executeUncheckedForTesting("DELETE FROM key_time_anchor; INSERT INTO key_time_anchor SELECT * FROM saved_mark")
        #expect(try store.timeHighWaterMark().mark == 1_150_000)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_140_000).code == "clock_rollback_detected")
    }

    @Test func everyOpenRecordsTheTime() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        _ = try open(temporary, at: 1_000_000)
        #expect(try open(temporary, at: 1_200_000).timeHighWaterMark().mark == 1_200_000)
        // Both copies hold it: deleting the row leaves the anchor's.
        let store = try open(temporary, at: 1_300_000)
        try store.executeUncheckedForTesting("DELETE FROM key_time_anchor")
        #expect(try store.timeHighWaterMark().mark == 1_300_000)
    }

    @Test func openingTheStoreAfterExpiryErasesThePayloadAndQueuesTheRelease() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try open(temporary, at: 1_000_000)
        let contentKey = try SecureRandom.bytes(count: 16)
        let payload = try server.payload(contentKeys: [(keyId: "000102030405060708090a0b0c0d0e0f", key: SecretBytes(contentKey))])
        try store.persist(payload, from: server, at: 1_000_000)
        let decoded = try #require(Data(base64Encoded: payload.signed.payload))
        let wrapped = payload.payload.keys.map(\.wrappedKey)
        var needles: [[UInt8]] = [Array(decoded), Array(payload.signed.signature.utf8)]
        for offset in stride(from: 0, to: payload.signed.payload.utf8.count - 48, by: 97) {
            needles.append(Array(payload.signed.payload.utf8.dropFirst(offset).prefix(48)))
        }
        for key in wrapped { needles += [Array(key.utf8), Array(Data(base64Encoded: key)!)] }
        needles += [contentKey, Array(Hex.encode(contentKey).utf8)]
        #expect(try !filesContaining(needles, under: temporary.dataDirectory).isEmpty)

        // No command runs in between: opening the store past the storage window is enough.
        let later = try open(temporary, at: 2_000_100)
        #expect(try later.lease(id: "lease-1")?.state == .expired)
        #expect(try later.lease(id: "lease-1")?.hasKeyMaterial == false)
        #expect(try later.pendingReleases().map(\.leaseId) == ["lease-1"])
        #expect(try filesContaining(needles, under: temporary.dataDirectory).isEmpty)
    }
}
