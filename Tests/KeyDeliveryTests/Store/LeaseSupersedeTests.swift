import Foundation
import KeyDelivery
import StowageCore
import StowageCrypto
import Testing

/// A live recording's leases (docs/live-recording.md): `KeyStore.supersede(by:at:)` replaces a group's lease with one
/// covering its keys so far and never opens a second playback window; an asset holding several leases plays only
/// while every lease it needs allows it, under one playback window, and the strictest lease is reported.
struct LeaseSupersedeTests {
    let server: TestKeyServer

    init() throws {
        server = try TestKeyServer()
    }

    static let k1 = "000102030405060708090a0b0c0d0e0f"
    static let k2 = "101112131415161718191a1b1c1d1e1f"

    static let k3 = "202122232425262728292a2b2c2d2e2f"

    func payload(
        _ leaseId: String,
        keys: [String],
        issuedAt: Int64,
        storageFor: Int64 = 1_000_000,
        playbackDuration: Int64 = 172_800
    ) throws -> VerifiedLeasePayload {
        try server.payload(
            leaseId: leaseId,
            issuedAt: issuedAt,
            storageExpiresAt: issuedAt + storageFor,
            playbackDuration: playbackDuration,
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
        let returned = try store.supersedeCovered(assetId: "movie-1", at: 1_000_200)
        #expect(returned.map(\.leaseId) == ["lease-a"])
        let newer = try #require(try store.lease(id: "lease-b"))
        #expect(newer.record.firstPlayedAt == 1_000_100 && newer.state == .playing)
        let older = try #require(try store.lease(id: "lease-a"))
        #expect(!older.state.holdsKeyMaterial && !older.hasKeyMaterial)
        #expect(try store.pendingReleases().map(\.leaseId) == ["lease-a"])
        #expect(try store.supersedeCovered(assetId: "movie-1", at: 1_000_250).isEmpty)
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

    @Test("a lease for other keys joins the older one: both stay, and it takes the asset's first play")
    func aLeaseForOtherKeysJoinsTheOlderOne() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try payload("lease-a", keys: [Self.k1], issuedAt: 1_000_000), from: server, at: 1_000_000)
        #expect(try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1], at: 1_000_100).isValid)
        try store.persist(try payload("lease-b", keys: [Self.k2], issuedAt: 1_000_200), from: server, at: 1_000_200)
        #expect(try store.supersede(by: "lease-b", at: 1_000_200).isEmpty)
        #expect(try store.supersedeCovered(assetId: "movie-1", at: 1_000_200).isEmpty)
        let older = try #require(try store.lease(id: "lease-a"))
        let newer = try #require(try store.lease(id: "lease-b"))
        #expect(older.hasKeyMaterial && older.state == .playing)
        #expect(newer.hasKeyMaterial && newer.record.firstPlayedAt == 1_000_100)
        // Both keys play under the one window that began with the first play.
        let evaluation = try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1, Self.k2], at: 1_000_300)
        #expect(evaluation.isValid && evaluation.playbackEndsAt == 1_000_100 + 172_800)
        #expect(try store.verifyAuditJournal().isIntact)
    }

    @Test("an asset plays under every lease that holds its keys: first play recorded on each, the strictest reported")
    func everyGroupPlaysAndTheStrictestWins() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try payload("lease-a", keys: [Self.k1], issuedAt: 1_000_000), from: server, at: 1_000_000)
        try store.persist(try payload("lease-b", keys: [Self.k2], issuedAt: 1_000_010, playbackDuration: 86_400), from: server, at: 1_000_010)
        // Nothing played yet: the verdict without recording is the lease that would end first.
        let before = try store.evaluate(assetId: "movie-1", keyIds: [Self.k1, Self.k2], at: 1_000_050)
        #expect(before.isValid && before.lease?.leaseId == "lease-b")
        #expect(try store.lease(id: "lease-a")?.record.firstPlayedAt == nil)

        let granted = try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1, Self.k2], at: 1_000_100)
        #expect(granted.isValid && granted.lease?.leaseId == "lease-b" && granted.playbackEndsAt == 1_000_100 + 86_400)
        #expect(try store.lease(id: "lease-a")?.record.firstPlayedAt == 1_000_100)
        #expect(try store.lease(id: "lease-b")?.record.firstPlayedAt == 1_000_100)
        // Past the shorter window the asset is refused, though the other lease would still allow its own key.
        let late = try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1, Self.k2], at: 1_000_100 + 86_400)
        #expect(!late.isValid && late.error?.reason == .playbackWindowExpired && late.lease?.leaseId == "lease-b")
        #expect(try store.evaluate(assetId: "movie-1", keyIds: [Self.k1], at: 1_000_100 + 86_400).isValid)
        // Without key IDs, every key the asset's leases hold counts.
        #expect(try store.evaluate(assetId: "movie-1", at: 1_000_100 + 86_400).error?.reason == .playbackWindowExpired)
        #expect(try store.verifyAuditJournal().isIntact)
    }

    @Test("one lease refused refuses the asset, and no other lease's window starts")
    func oneGroupRefusedRefusesTheAsset() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try payload("lease-a", keys: [Self.k1], issuedAt: 1_000_000), from: server, at: 1_000_000)
        try store.persist(try payload("lease-b", keys: [Self.k2], issuedAt: 1_000_000, storageFor: 100), from: server, at: 1_000_000)
        let refused = try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1, Self.k2], at: 1_000_200)
        #expect(!refused.isValid && refused.error?.reason == .storageWindowExpired && refused.lease?.leaseId == "lease-b")
        #expect(try store.lease(id: "lease-a")?.record.firstPlayedAt == nil)

        // A group's lease returned (its keys erased) refuses the asset too; a key no lease ever held is the keyring's.
        try store.returnLease(leaseId: "lease-b", at: 1_000_300)
        #expect(try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1, Self.k2], at: 1_000_400).error?.reason == .returned)
        #expect(try store.lease(id: "lease-a")?.record.firstPlayedAt == nil)
        #expect(try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1, Self.k3], at: 1_000_400).isValid)
    }

    @Test("a lease issued after the asset played takes the earliest first play of the asset's valid leases")
    func aNewGroupStartsAtTheAssetsFirstPlay() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try payload("lease-a", keys: [Self.k1], issuedAt: 1_000_000), from: server, at: 1_000_000)
        #expect(try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1], at: 1_000_100).isValid)
        // Stored without the supersede a recording does (a run killed in between): the gate still gives it the
        // asset's window, not one starting now.
        try store.persist(try payload("lease-b", keys: [Self.k2], issuedAt: 1_050_000), from: server, at: 1_050_000)
        let granted = try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1, Self.k2], at: 1_100_000)
        #expect(granted.isValid && granted.playbackEndsAt == 1_000_100 + 172_800)
        #expect(try store.lease(id: "lease-b")?.record.firstPlayedAt == 1_000_100)
    }

    /// A recording's group lease is stored with the asset's first play in the transaction that stores it, so no moment
    /// exists (a recorder killed there) at which it holds keys under a window of its own. Without `superseding` it
    /// would: after the asset's window closed and its lease was erased, a user who drops the ended lease's keys from
    /// `manifest.json` would play the new group under a window starting now.
    @Test(arguments: [true, false])
    func aGroupLeaseIsStoredWithTheAssetsFirstPlay(superseding: Bool) throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try payload("lease-a", keys: [Self.k1], issuedAt: 1_000_000), from: server, at: 1_000_000)
        #expect(try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1], at: 1_000_100).isValid)
        _ = try store.purgeExpired(at: 1_000_100 + 172_801)
        let stored = try store.persist(
            try payload("lease-b", keys: [Self.k2], issuedAt: 1_200_000),
            from: server,
            at: 1_200_000,
            superseding: superseding
        )
        let onlyTheNewGroup = try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k2], at: 1_200_001)
        if superseding {
            #expect(stored.firstPlayedAt == 1_000_100 && stored.state == .playing)
            #expect(try store.lease(id: "lease-b")?.record.firstPlayedAt == 1_000_100)
            #expect(!onlyTheNewGroup.isValid && onlyTheNewGroup.error?.reason == .playbackWindowExpired)
        } else {
            #expect(stored.firstPlayedAt == nil)
            #expect(onlyTheNewGroup.isValid && onlyTheNewGroup.playbackEndsAt == 1_200_001 + 172_800)
        }
        #expect(try store.verifyAuditJournal().isIntact)
    }

    /// A group lease stored without superseding (by a recorder that stored and superseded in two steps, killed between
    /// them) is taken in when the same payload is stored again superseding.
    @Test func storingTheSamePayloadAgainSupersedes() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try payload("lease-a", keys: [Self.k1], issuedAt: 1_000_000), from: server, at: 1_000_000)
        #expect(try store.authorizePlayback(assetId: "movie-1", keyIds: [Self.k1], at: 1_000_100).isValid)
        let newer = try payload("lease-b", keys: [Self.k1, Self.k2], issuedAt: 1_000_200)
        try store.persist(newer, from: server, at: 1_000_200)
        #expect(try store.lease(id: "lease-a")?.hasKeyMaterial == true)
        let stored = try store.persist(newer, from: server, at: 1_000_300, superseding: true)
        #expect(stored.firstPlayedAt == 1_000_100)
        #expect(try store.lease(id: "lease-a").map { !$0.state.holdsKeyMaterial && !$0.hasKeyMaterial } == true)
        #expect(try store.pendingReleases().map(\.leaseId) == ["lease-a"])
    }
}
