import Foundation
import KeyDelivery
import StowageCore
import StowageCrypto
import StowageTestSupport
import Testing

struct KeyStoreLeaseTests {
    let server: TestKeyServer

    init() throws {
        server = try TestKeyServer()
    }

    @Test func persistStoresTheTermsAndThePayloadExactlyAsReceived() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let payload = try server.payload()
        try store.recordAcquisition(payload, at: 1_000_010)
        let record = try store.persist(payload, from: server, at: 1_000_010)
        #expect(record.state == .persisted)
        let stored = try #require(try store.lease(id: "lease-1"))
        #expect(stored.record.terms == payload.terms)
        #expect(stored.hasKeyMaterial && stored.persistedAt == 1_000_010 && stored.renewalCount == 0)
        #expect(try store.storedPayload(leaseId: "lease-1") == payload.signed)
        #expect(try mode(of: temporary.dataDirectory) == 0o700)
        #expect(try mode(of: temporary.dataDirectory.appendingPathComponent(KeyStore.databaseFileName)) == 0o600)
        #expect(try store.auditEntries().map(\.kind) == [.acquire, .serverKeyPinned, .persist])
        #expect(try store.timeHighWaterMark().mark == 1_000_010)
    }

    /// A private file's temporary copy left by a process killed mid-write (red team, round 4: never cleaned before)
    /// is removed when the store opens; the live files stay.
    @Test func aKilledWritersTemporaryFileIsRemovedWhenTheStoreOpens() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        _ = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let before = try FileManager.default.contentsOfDirectory(atPath: temporary.dataDirectory.path).sorted()
        // A PID no process has: the writer is gone.
        let dead = ProcessRunner.unusedProcessID()
        let leftover = temporary.dataDirectory.appendingPathComponent(".\(KeyStore.anchorFileName).\(dead).4242.tmp")
        try Data(repeating: 7, count: 64).write(to: leftover)
        _ = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        #expect(!FileManager.default.fileExists(atPath: leftover.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.dataDirectory.path).sorted() == before)
    }

    @Test func persistingTwiceIsIdempotentButAnotherPayloadMustBeARenewal() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let payload = try server.payload()
        try store.persist(payload, from: server, at: 1_000_000)
        try store.persist(payload, from: server, at: 1_000_001)
        #expect(try store.leases().count == 1)
        let other = try server.payload(storageExpiresAt: 2_500_000)
        let error = #expect(throws: KeyStoreError.self) { try store.persist(other, from: server, at: 1_000_002) }
        #expect(error?.code == "lease_already_stored")
        #expect(try store.storedPayload(leaseId: "lease-1") == payload.signed)
    }

    /// A payload is stored only under a key server whose key is pinned, and a pin stays while a lease from that server
    /// holds keys (else the lease could no longer be verified); once no lease holds keys, it can go.
    @Test func pinsComeBeforeLeasesAndStayWhileLeasesHoldKeys() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let unpinned = #expect(throws: KeyStoreError.self) {
            try store.persist(try server.payload(), keyServer: TestKeyServer.url, at: 1_000_000)
        }
        #expect(unpinned?.code == "server_key_not_pinned")
        #expect(try store.leases().isEmpty)

        try store.persist(try server.payload(), from: server, at: 1_000_000)
        let held = #expect(throws: KeyStoreError.self) { try store.unpin(TestKeyServer.url, at: 1_000_001) }
        #expect(held?.code == "pin_in_use")
        #expect(held?.message.contains("lease-1") == true)
        #expect(try store.pinnedServerKey(for: TestKeyServer.url) != nil)

        _ = try store.returnAsset(assetId: "movie-1", at: 1_000_002)
        #expect(try store.unpin(TestKeyServer.url, at: 1_000_003))
        #expect(try store.pinnedServerKey(for: TestKeyServer.url) == nil)
    }

    @Test func streamingLeasesAreNeverStored() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let error = #expect(throws: KeyStoreError.self) { try store.persist(try server.payload(type: .streaming), from: server, at: 1_000_000) }
        #expect(error?.code == "lease_not_persistent")
        #expect(try store.leases().isEmpty)
    }

    @Test func firstPlayIsRecordedOnceWithTheAuthorization() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try server.payload(), from: server, at: 1_000_000)
        let first = try store.authorizePlayback(assetId: "movie-1", at: 1_100_000)
        #expect(first.isValid)
        #expect(first.lease?.firstPlayedAt == 1_100_000)
        #expect(first.playbackEndsAt == 1_272_800)
        let second = try store.authorizePlayback(assetId: "movie-1", at: 1_200_000)
        #expect(second.isValid)
        #expect(second.lease?.firstPlayedAt == 1_100_000)
        #expect(try store.lease(id: "lease-1")?.record.firstPlayedAt == 1_100_000)
        #expect(try store.lease(id: "lease-1")?.state == .playing)
        #expect(try store.auditEntries().filter { $0.kind == .firstPlay }.count == 1)
        // After the playback window: refused, and first play unchanged.
        let late = try store.authorizePlayback(assetId: "movie-1", at: 1_272_800)
        #expect(late.error?.reason == .playbackWindowExpired)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_272_799).isValid)
    }

    @Test func aRefusedAuthorizationRecordsNoFirstPlay() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try server.payload(issuedAt: 1_000_000, serverTime: 999_000), from: server, at: 999_000)
        let early = try store.authorizePlayback(assetId: "movie-1", at: 999_699)
        #expect(early.error?.reason == .notYetValid)
        #expect(try store.lease(id: "lease-1")?.record.firstPlayedAt == nil)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 999_700).lease?.firstPlayedAt == 999_700)
        #expect(try store.authorizePlayback(assetId: "other", at: 999_800).error?.reason == .noLease)
    }

    @Test func twoConcurrentAuthorizationsRecordOneFirstPlay() async throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let directory = temporary.dataDirectory
        try KeyStore(dataDirectory: directory, machineID: testMachineID, clock: TestClock(now: 0)).persist(
            try server.payload(),
            from: server,
            at: 1_000_000
        )
        // Two store instances: two connections, as two processes would have.
        let stores = try (0..<3).map { _ in try KeyStore(dataDirectory: directory, machineID: testMachineID, clock: TestClock(now: 1_000_000)) }
        for round in 0..<10 {
            let assetId = round == 0 ? "movie-1" : "movie-\(round + 1)"
            let base = 1_100_000 + Int64(round) * 100
            if round > 0 { try stores[0].persist(try server.payload(leaseId: "lease-r\(round)", assetId: assetId), from: server, at: base) }
            let results = try await withThrowingTaskGroup(of: LeaseEvaluation.self) { group in
                for (index, store) in stores.enumerated() {
                    group.addTask { try store.authorizePlayback(assetId: assetId, at: base + 1 + Int64(index)) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.allSatisfy { $0.isValid }, "\(results.map { $0.error?.description ?? "valid" })")
            let recorded = try #require(try stores[0].leases(assetId: assetId).first?.record.firstPlayedAt)
            #expect((base + 1...base + 3).contains(recorded))
            #expect(results.allSatisfy { $0.lease?.firstPlayedAt == recorded })
            #expect(try stores[1].auditEntries(assetId: assetId).filter { $0.kind == .firstPlay }.count == 1)
        }
    }

    @Test func renewalReplacesThePayloadAndKeepsFirstPlay() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try server.payload(), from: server, at: 1_000_000)
        _ = try store.authorizePlayback(assetId: "movie-1", at: 1_100_000)
        let renewal = try server.payload(storageExpiresAt: 2_500_000, serverTime: 1_900_000)
        let record = try store.renew(renewal, at: 1_900_000)
        #expect(record.terms.storageExpiresAt == 2_500_000)
        #expect(record.firstPlayedAt == 1_100_000)
        let stored = try #require(try store.lease(id: "lease-1"))
        #expect(stored.renewalCount == 1 && stored.renewedAt == 1_900_000)
        #expect(stored.record.terms.storageExpiresAt == 2_500_000)
        #expect(try store.storedPayload(leaseId: "lease-1") == renewal.signed)
        #expect(try store.auditEntries().map(\.kind).suffix(2) == [.renewal, .timeReanchored])
    }

    @Test func aRefusedRenewalLeavesEverythingAsItWas() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let original = try server.payload()
        try store.persist(original, from: server, at: 1_000_000)
        let entriesBefore = try store.auditEntries()
        // Same lease ID, another asset: the whole transaction is refused.
        let wrongAsset = try server.payload(assetId: "movie-2", storageExpiresAt: 2_500_000, serverTime: 1_500_000)
        #expect(throws: LeaseError.self) { try store.renew(wrongAsset, at: 1_500_000) }
        let unknown = try server.payload(leaseId: "lease-9", serverTime: 1_500_000)
        let error = #expect(throws: KeyStoreError.self) { try store.renew(unknown, at: 1_500_000) }
        #expect(error?.code == "unknown_lease")
        #expect(try store.storedPayload(leaseId: "lease-1") == original.signed)
        #expect(try store.lease(id: "lease-1")?.record.terms == original.terms)
        #expect(try store.auditEntries() == entriesBefore)
        #expect(try store.timeHighWaterMark().mark == 1_000_000)
        // A returned lease cannot be renewed.
        try store.returnLease(leaseId: "lease-1", at: 1_100_000)
        #expect(throws: LeaseError.self) { try store.renew(try server.payload(serverTime: 1_200_000), at: 1_200_000) }
        #expect(try store.storedPayload(leaseId: "lease-1") == nil)
    }

    @Test func rollbackIsDetectedAndClearedOnlyByARenewal() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let clock = TestClock(now: 1_500_000)
        try store.persist(try server.payload(serverTime: 1_500_000), from: server, at: clock.now)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: clock.now).isValid)
        // Exactly 300 s back is tolerated; 301 s is a rollback.
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_499_700).isValid)
        clock.set(1_499_699)
        let refused = try store.authorizePlayback(assetId: "movie-1", at: clock.now)
        #expect(refused.error?.reason == .clockRollbackDetected)
        #expect(try store.timeHighWaterMark().isRollbackLatched)
        #expect(try store.auditEntries().filter { $0.kind == .rollbackDetected }.count == 1)
        // Putting the clock right again does not clear it; neither does reopening, nor storing another lease.
        clock.set(1_500_100)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: clock.now).error?.reason == .clockRollbackDetected)
        let reopened = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: clock)
        #expect(try reopened.evaluate(assetId: "movie-1", at: clock.now).error?.reason == .clockRollbackDetected)
        // A lease stored after the rollback was found is not held by it (its key server vouched for it since).
        try reopened.persist(try server.payload(leaseId: "lease-2", assetId: "movie-2", serverTime: 1_500_100), from: server, at: clock.now)
        #expect(try reopened.authorizePlayback(assetId: "movie-2", at: clock.now).isValid)
        #expect(try reopened.authorizePlayback(assetId: "movie-1", at: clock.now).error?.reason == .clockRollbackDetected)
        // Only a renewal of that very lease, from its key server, clears its latch.
        clock.set(1_500_200)
        try reopened.renew(try server.payload(storageExpiresAt: 2_600_000, serverTime: 1_500_200), at: clock.now)
        #expect(try reopened.authorizePlayback(assetId: "movie-1", at: clock.now).isValid)
        #expect(try reopened.authorizePlayback(assetId: "movie-2", at: clock.now).isValid)
        let reanchor = try #require(try reopened.auditEntries().last { $0.kind == .timeReanchored })
        #expect(reanchor.detail.contains("\"rollbackCleared\":true"))
    }

    @Test func aRenewalWithTheClockStillBehindDoesNotClearTheRollback() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try server.payload(serverTime: 1_500_000), from: server, at: 1_500_000)
        try store.observe(localTime: 1_000_000)
        try store.renew(try server.payload(storageExpiresAt: 2_600_000, serverTime: 1_500_500), at: 1_000_001)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_000_002).error?.reason == .clockRollbackDetected)
    }

    @Test func returnErasesKeyMaterialKeepsTheRecordAndQueuesTheRelease() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try server.payload(), from: server, at: 1_000_000)
        try store.storeIdentityKey(try SecretBytes.random(count: 16), uri: "https://k/1", assetId: "movie-1", at: 1_000_000)
        let returned = try store.returnAsset(assetId: "movie-1", at: 1_100_000)
        #expect(returned.map(\.state) == [.returned])
        let stored = try #require(try store.lease(id: "lease-1"))
        #expect(stored.state == .returned && !stored.hasKeyMaterial && stored.endedAt == 1_100_000)
        #expect(try store.storedPayload(leaseId: "lease-1") == nil)
        #expect(try store.identityKeyURIs(assetId: "movie-1").isEmpty)
        #expect(try store.pendingReleases().map(\.leaseId) == ["lease-1"])
        #expect(try store.pendingReleases().first?.deletedAt == 1_100_000)
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_100_001).error?.reason == .returned)
        // Returning again changes nothing.
        try store.returnLease(leaseId: "lease-1", at: 1_200_000)
        #expect(try store.pendingReleases().first?.deletedAt == 1_100_000)
        #expect(try store.auditEntries().filter { $0.kind == .return }.count == 1)
    }

    @Test func purgeErasesOnlyWhatHasExpired() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try server.payload(leaseId: "short", assetId: "a", storageExpiresAt: 1_200_000), from: server, at: 1_000_000)
        try store.persist(try server.payload(leaseId: "played", assetId: "b", playbackDuration: 1_000), from: server, at: 1_000_000)
        try store.persist(try server.payload(leaseId: "long", assetId: "c"), from: server, at: 1_000_000)
        _ = try store.authorizePlayback(assetId: "b", at: 1_000_000)
        try store.storeIdentityKey(try SecretBytes.random(count: 16), uri: "https://k/old", assetId: "a", expiresAt: 1_100_000, at: 1_000_000)
        try store.storeIdentityKey(try SecretBytes.random(count: 16), uri: "https://k/forever", assetId: "a", at: 1_000_000)

        #expect(try store.purgeExpired(at: 1_000_999) == PurgeReport(expiredLeaseIds: [], erasedIdentityKeyURIs: []))
        let report = try store.purgeExpired(at: 1_200_000)
        #expect(Set(report.expiredLeaseIds) == ["short", "played"])
        #expect(report.erasedIdentityKeyURIs == ["https://k/old"])
        #expect(try store.lease(id: "short")?.state == .expired)
        #expect(try store.storedPayload(leaseId: "short") == nil)
        #expect(try store.storedPayload(leaseId: "long") != nil)
        #expect(try store.identityKeyURIs(assetId: "a") == ["https://k/forever"])
        #expect(Set(try store.pendingReleases().map(\.leaseId)) == ["short", "played"])
        #expect(try store.authorizePlayback(assetId: "a", at: 1_200_001).error?.reason == .leaseExpired)
        let expiry = try store.auditEntries(leaseId: "played").last
        #expect(expiry?.kind == .expiry)
        #expect(expiry?.detail.contains("playback_window_expired") == true)
        #expect(try store.purgeExpired(at: 1_300_000).expiredLeaseIds.isEmpty)
    }

    @Test func theReleaseQueueSurvivesReopeningAndIsIdempotent() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        do {
            let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
            try store.persist(try server.payload(leaseId: "l1", assetId: "a"), from: server, at: 1_000_000)
            try store.persist(try server.payload(leaseId: "l2", assetId: "b"), from: server, at: 1_000_000)
            try store.returnLease(leaseId: "l1", at: 1_000_100)
            try store.expire(leaseId: "l2", at: 1_000_200)
            try store.expire(leaseId: "l2", at: 1_000_300)
            try store.recordReleaseFailure(leaseId: "l1", error: "network unreachable", at: 1_000_400)
        }
        let reopened = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 1_000_450))
        let pending = try reopened.pendingReleases()
        #expect(pending.map(\.leaseId) == ["l1", "l2"])
        #expect(pending[0].attempts == 1 && pending[0].lastError == "network unreachable" && pending[0].lastAttemptAt == 1_000_400)
        #expect(pending[1].deletedAt == 1_000_200 && pending[1].attempts == 0)
        let request = pending[1].request(nonce: "bm9uY2U=")
        #expect(request.leaseId == "l2" && request.deletedAt == 1_000_200 && request.deviceId == server.device.deviceId)

        #expect(try reopened.markReleased(leaseId: "l1", at: 1_000_500).state == .released)
        #expect(try reopened.markReleased(leaseId: "l1", at: 1_000_600).state == .released)
        #expect(try reopened.pendingReleases().map(\.leaseId) == ["l2"])
        #expect(try reopened.lease(id: "l1")?.releasedAt == 1_000_500)
        #expect(try reopened.auditEntries(leaseId: "l1").map(\.kind) == [.persist, .return, .releaseFailed, .release])
        #expect(try reopened.authorizePlayback(assetId: "a", at: 1_000_700).error?.reason == .released)
        // A lease that still holds keys cannot be marked released; an unknown one is reported.
        try reopened.persist(try server.payload(leaseId: "l3", assetId: "c"), from: server, at: 1_000_000)
        #expect(throws: LeaseError.self) { try reopened.markReleased(leaseId: "l3", at: 1_000_800) }
        #expect(throws: KeyStoreError.self) { try reopened.markReleased(leaseId: "nope", at: 1_000_800) }
    }

    @Test func coverageForVerifyFor() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try server.payload(playbackDuration: 172_800), from: server, at: 1_000_000)
        #expect(try store.coverage(assetId: "movie-1", duration: 172_800, at: 1_500_000).isValid)
        #expect(try store.coverage(assetId: "movie-1", duration: 172_801, at: 1_500_000).error?.reason == .expiresTooSoon)
        #expect(try store.lease(id: "lease-1")?.record.firstPlayedAt == nil)
        #expect(try store.evaluate(assetId: "movie-1", at: 1_500_000).timeLeft == 500_000)
    }

    @Test func anotherPlayingLeaseIsPreferredSoNoSecondWindowStarts() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try server.payload(leaseId: "old", storageExpiresAt: 1_900_000), from: server, at: 1_000_000)
        _ = try store.authorizePlayback(assetId: "movie-1", at: 1_100_000)
        try store.persist(try server.payload(leaseId: "new", storageExpiresAt: 2_500_000), from: server, at: 1_150_000)
        let evaluation = try store.authorizePlayback(assetId: "movie-1", at: 1_200_000)
        #expect(evaluation.lease?.leaseId == "old")
        #expect(try store.lease(id: "new")?.record.firstPlayedAt == nil)
        // Once the old one's playback window closes, the new one starts.
        #expect(try store.authorizePlayback(assetId: "movie-1", at: 1_272_800).lease?.leaseId == "new")
    }
}
