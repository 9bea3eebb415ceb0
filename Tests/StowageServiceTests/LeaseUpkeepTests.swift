import AssetDownload
import DownloadTestSupport
import Foundation
import KeyDelivery
import KeyServer
import OfflinePackage
import StowageCore
import StowageLibrary
import StowageService
import Testing

/// The service's lease upkeep against the real key server: renewal when a lease's storage window is 75% spent, queued
/// releases sent once the key server is back, each step journaled. Client and server share one test clock.
@Suite("Lease upkeep in the download service")
struct LeaseUpkeepTests {
    static func clocks() -> (TestClock, KeyServerClock) {
        let clock = TestClock(now: Int64(Date().timeIntervalSince1970))
        return (clock, KeyServerClock { Double(clock.now) })
    }

    static func download(_ fixture: DownloadFixture, _ library: OfflineLibrary, origin: URL, keyServer: URL) async throws {
        let task = try await library.download(
            DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                selection: MediaSelectionOptions(subtitles: .none),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token()
            )
        )
        _ = try await task.result()
    }

    /// Waits for the upkeep the service runs as it starts, so that the test's clock moves only after it (else the two
    /// runs would both see what the test set up).
    static func firstUpkeepDone(_ client: ServiceClient) async throws {
        for _ in 0..<200 where try await client.status().lastUpkeep == nil {
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(try await client.status().lastUpkeep != nil, "the service's first upkeep did not finish")
    }

    @Test("a lease 75% into its storage window is renewed by the service with the token command's token, and journaled")
    func renewsWhenThreeQuartersSpent() async throws {
        let (clock, serverClock) = Self.clocks()
        let fixture = try await DownloadFixture.make(serverClock: serverClock)
        defer { fixture.remove() }
        let tokenFile = fixture.root.appendingPathComponent("token.txt")
        let configuration = ServiceTests.configuration { $0.tokenCommand = "cat '\(tokenFile.path)'" }
        try await fixture.withServers { origin, keyServer in
            let service = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: configuration, clock: clock)
            try await Self.download(fixture, service.library, origin: origin, keyServer: keyServer)
            let before = try #require(try service.library.leases().first)
            let window = before.storageExpiresAt - clock.now  // the standard policy: 30 days
            #expect(window > 29 * 86_400)

            try await withService(service) { client in
                try await Self.firstUpkeepDone(client)
                // 70% spent: not due; nothing is asked of the key server.
                clock.advance(by: window * 70 / 100)
                let early = try await client.upkeepLeases()
                #expect(early.renewed.isEmpty && early.renewalFailures.isEmpty)

                // 76% spent: due. The token the download used has expired by now; the token command gives a fresh one.
                clock.advance(by: window * 6 / 100)
                try Data(try await fixture.token().utf8).write(to: tokenFile)
                let due = try await client.upkeepLeases()
                #expect(due.renewed == [before.leaseId], "\(due.renewalFailures)")
            }
            let after = try #require(try OfflineLibrary(dataDirectory: fixture.clientDirectory, clock: clock).leases().first)
            #expect(after.leaseId == before.leaseId)
            #expect(after.storageExpiresAt >= clock.now + 29 * 86_400)
            #expect(after.lastRenewedBy == "service")
            #expect(after.lastRenewedAt == clock.now)
            // The package still plays (verify: keys usable, lease valid).
            let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory, clock: clock)
            #expect(try await library.verify(assetId: fixture.assetId).isPlayable)
            await library.close()
        }
    }

    @Test("a key store that cannot be used is reported by upkeep (storeFailure), not taken for nothing to do")
    func storeFailureIsReported() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("upkeep-store-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let first = try OfflineLibrary(dataDirectory: DataDirectory(url: root))
        let healthy = await first.upkeepLeases { _ in nil }
        #expect(healthy.storeFailure == nil && !healthy.didSomething)
        await first.close()
        // The key store's secret replaced by another of the same length: the store opens, but no operation can run.
        let secretURL = root.appendingPathComponent(KeyStore.secretFileName)
        let secret = try Data(contentsOf: secretURL)
        try Data(secret.map { $0 ^ 0xFF }).write(to: secretURL)
        let broken = try OfflineLibrary(dataDirectory: DataDirectory(url: root))
        let report = await broken.upkeepLeases { _ in nil }
        await broken.close()
        let failure = try #require(report.storeFailure)
        #expect(report.didSomething)
        #expect(failure.message.contains("lease upkeep could not") && failure.message.contains(root.path), "\(failure.message)")
        // The secret put back, upkeep is clean again.
        try secret.write(to: secretURL)
        let mended = try OfflineLibrary(dataDirectory: DataDirectory(url: root))
        #expect(await mended.upkeepLeases { _ in nil }.storeFailure == nil)
        await mended.close()
    }

    @Test("without a token the due renewal is reported (no_token) and journaled as failed; the lease is left as it was")
    func missingTokenIsReported() async throws {
        let (clock, serverClock) = Self.clocks()
        let fixture = try await DownloadFixture.make(serverClock: serverClock)
        defer { fixture.remove() }
        let configuration = ServiceTests.configuration { $0.tokenCommand = "exit 1" }
        try await fixture.withServers { origin, keyServer in
            let service = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: configuration, clock: clock)
            try await Self.download(fixture, service.library, origin: origin, keyServer: keyServer)
            let before = try #require(try service.library.leases().first)
            try await withService(service) { client in
                try await Self.firstUpkeepDone(client)
                clock.advance(by: (before.storageExpiresAt - clock.now) * 80 / 100)
                let report = try await client.upkeepLeases()
                #expect(report.renewed.isEmpty)
                #expect(report.renewalFailures[before.leaseId]?.code == "no_token")
                // The next round skips it (back-off) rather than asking again at once.
                #expect(try await client.upkeepLeases().renewalFailures.isEmpty)
            }
            let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory, clock: clock)
            #expect(try library.leases().first?.storageExpiresAt == before.storageExpiresAt)
            let failed = try library.auditEntries().filter { $0.kind == .renewalFailed && $0.leaseId == before.leaseId }
            #expect(failed.count == 1)
            #expect(failed.first?.detail.contains(#""code":"no_token""#) == true)
            await library.close()
        }
    }

    /// The token source failing (the download records unreadable, say) is not a missing token: the report carries the
    /// failure's own code and says the token could not be read, so the user is not told to add a --token-command.
    @Test("a token that cannot be read is reported with its own code, not as no_token")
    func unreadableTokenIsNotNoToken() async throws {
        let (clock, serverClock) = Self.clocks()
        let fixture = try await DownloadFixture.make(serverClock: serverClock)
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory, clock: clock)
            try await Self.download(fixture, library, origin: origin, keyServer: keyServer)
            let before = try #require(try library.leases().first)
            clock.advance(by: (before.storageExpiresAt - clock.now) * 80 / 100)
            let report = await library.upkeepLeases { _ in
                throw ReportedError(code: .databaseFailure, message: "the download records cannot be read")
            }
            let failure = try #require(report.renewalFailures[before.leaseId])
            #expect(failure.code == "database_failure")
            #expect(failure.message.contains("could not be read: the download records cannot be read"), "\(failure.message)")
            #expect(!failure.message.contains("--token-command"))
            #expect(report.renewed.isEmpty)
            #expect(try library.leases().first?.storageExpiresAt == before.storageExpiresAt)
            await library.close()
        }
    }

    @Test("a release queued while the key server was down is sent by the service once it is back")
    func queuedReleaseIsSentWhenTheServerIsBack() async throws {
        let (clock, serverClock) = Self.clocks()
        let fixture = try await DownloadFixture.make(serverClock: serverClock)
        defer { fixture.remove() }
        let keyServerPort = try await fixture.withServers { origin, keyServer in
            let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory, clock: clock)
            try await Self.download(fixture, library, origin: origin, keyServer: keyServer)
            await library.close()
            return keyServer.port ?? 0
        }
        let service = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: ServiceTests.configuration(), clock: clock)
        let lease = try #require(try service.library.leases().first)
        try await withService(service) { client in
            // Deleted offline: keys erased, release queued, the key server unreachable.
            try await fixture.whileDown(ports: [keyServerPort]) {
                _ = try await client.delete(assetId: fixture.assetId)
                let offline = try await client.upkeepLeases()
                #expect(offline.released.isEmpty)
                #expect(offline.stillQueued[lease.leaseId] != nil)
                #expect(try service.library.leases().first?.pendingRelease == true)
            }

            try await fixture.withServers(keyServerPort: keyServerPort) { _, _ in
                let online = try await client.upkeepLeases()
                #expect(online.released == [lease.leaseId])
            }
        }
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory, clock: clock)
        #expect(try library.leases().first?.pendingRelease == false)
        #expect(try library.auditEntries().contains { $0.kind == .release && $0.leaseId == lease.leaseId })
        await library.close()
        // The key server has it released.
        let store = try fixture.keyServer.openStore()
        #expect(try await store.lease(id: lease.leaseId)?.releasedAt != nil)
    }
}
