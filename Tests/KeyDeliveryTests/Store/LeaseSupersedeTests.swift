import Foundation
import KeyDelivery
import StowageCrypto
import Testing

/// `KeyStore.supersede(by:at:)`: a live recording's key rotation replaces the asset's lease with one covering every
/// key so far, and never opens a second playback window.
struct LeaseSupersedeTests {
    let server: TestKeyServer

    init() throws {
        server = try TestKeyServer()
    }

    static let k1 = "000102030405060708090a0b0c0d0e0f"
    static let k2 = "101112131415161718191a1b1c1d1e1f"

    func payload(_ leaseId: String, keys: [String], issuedAt: Int64) throws -> VerifiedLeasePayload {
        try server.payload(
            leaseId: leaseId,
            issuedAt: issuedAt,
            storageExpiresAt: issuedAt + 1_000_000,
            playbackDuration: 172_800,
            contentKeys: try keys.map { ($0, try SecretBytes(SecureRandom.bytes(count: 16))) }
        )
    }

    @Test func theNewerLeaseTakesTheFirstPlayAndTheOlderOneIsReturned() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try payload("lease-a", keys: [Self.k1], issuedAt: 1_000_000), from: server, at: 1_000_000)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_000_100).isValid)
        try store.persist(try payload("lease-b", keys: [Self.k1, Self.k2], issuedAt: 1_000_200), from: server, at: 1_000_200)
        #expect(try store.leaseToSupersedeWith(assetId: "movie-1") == "lease-b")

        let returned = try store.supersede(by: "lease-b", at: 1_000_200)
        #expect(returned.map(\.leaseId) == ["lease-a"])
        let newer = try #require(try store.lease(id: "lease-b"))
        #expect(newer.record.firstPlayedAt == 1_000_100 && newer.state == .playing)
        let older = try #require(try store.lease(id: "lease-a"))
        #expect(!older.state.holdsKeyMaterial && !older.hasKeyMaterial)
        #expect(try store.pendingReleases().map(\.leaseId) == ["lease-a"])
        #expect(try store.leaseToSupersedeWith(assetId: "movie-1") == nil)
        // The playback window is the one that began with the first play: it ends 48 h after it, not after now.
        let evaluation = try store.authorizePlayback(assetId: "movie-1", at: 1_000_300)
        #expect(evaluation.lease?.leaseId == "lease-b" && evaluation.playbackEndsAt == 1_000_100 + 172_800)
        #expect(try store.verifyAuditJournal().isIntact)
    }

    @Test func aWindowThatClosedStaysClosedForALeaseIssuedAfterIt() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try payload("lease-a", keys: [Self.k1], issuedAt: 1_000_000), from: server, at: 1_000_000)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_000_100).isValid)
        // The window closes and the store erases the lease; a resumed recording then obtains a new one.
        _ = try store.purgeExpired(at: 1_000_100 + 172_801)
        #expect(try store.lease(id: "lease-a")?.hasKeyMaterial == false)
        try store.persist(try payload("lease-b", keys: [Self.k1, Self.k2], issuedAt: 1_200_000), from: server, at: 1_200_000)
        try store.supersede(by: "lease-b", at: 1_200_000)
        #expect(try store.lease(id: "lease-b")?.record.firstPlayedAt == 1_000_100)
        let refused = try store.authorizePlayback(assetId: "movie-1", at: 1_200_001)
        #expect(!refused.isValid && refused.error?.reason == .playbackWindowExpired)
    }

    @Test func aLeaseThatDoesNotCoverTheOlderKeysIsRefused() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try payload("lease-a", keys: [Self.k1], issuedAt: 1_000_000), from: server, at: 1_000_000)
        try store.persist(try payload("lease-b", keys: [Self.k2], issuedAt: 1_000_200), from: server, at: 1_000_200)
        #expect(throws: LeaseError.self) { try store.supersede(by: "lease-b", at: 1_000_200) }
        #expect(try store.lease(id: "lease-a")?.hasKeyMaterial == true)
    }
}
