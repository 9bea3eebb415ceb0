import AssetDownload
import DownloadTestSupport
import Foundation
import OfflinePackage
import OriginServer
import Testing

@Suite("Downloads through each network profile")
struct NetworkProfileTests {
    @Test("a package byte-identical to the source under every named profile", arguments: NetworkConditions.profileNames)
    func profile(_ name: String) async throws {
        let base = try #require(NetworkConditions.profile(named: name))
        // The fault mix of the profile on a link fast enough for a test: at least 4 MB/s, latency and stalls shortened.
        let factor = base.bandwidthBytesPerSecond.map { max(1, 4_000_000 / Double($0)) } ?? 1
        let conditions = base.scaled(bandwidth: factor).scaled(time: 0.2)
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = OriginRequestLog()
        try await fixture.withServers(conditions: conditions, seed: 7, log: log) { origin, keyServer in
            let session = try fixture.session()
            let request = DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                selection: MediaSelectionOptions(audio: .all, subtitles: .all),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token()
            )
            let run = await DownloadFixture.run(try session.start(request))
            try await session.shutdown()
            let manifest = try run.result.get()
            #expect(manifest.isComplete)
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            if base.errorRate + base.resetRate + base.truncateRate > 0.1 {
                // The faults really happened and were survived.
                #expect(log.entries.contains { $0.fault != .none })
                let errors = try String(contentsOf: fixture.package.errorLogURL, encoding: .utf8)
                #expect(errors.split(separator: "\n").contains { !$0.hasPrefix("#") })
            }
        }
    }

    @Test("a body that stalls longer than the read timeout is abandoned and fetched again")
    func stalls() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = OriginRequestLog()
        let conditions = NetworkConditions(stallRate: 0.5, stallMilliseconds: 2_500)
        try await fixture.withServers(conditions: conditions, seed: 3, log: log) { origin, keyServer in
            // Half the responses stall (the master's first two attempts among them, for this seed), and on a loaded
            // machine a response that does not stall can still miss a 1 s read timeout now and then: the attempt cap
            // is raised so the test is about stalls being abandoned and fetched again, not about the cap.
            let session = try fixture.session {
                $0.readTimeout = 1
                $0.retry.maximumAttempts = 30
            }
            let request = DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                selection: MediaSelectionOptions(subtitles: .none),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token(),
                concurrency: 4
            )
            let manifest = try await DownloadFixture.run(try session.start(request)).result.get()
            try await session.shutdown()
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            #expect(log.entries.contains { $0.fault == .stall })
            let errors = try String(contentsOf: fixture.package.errorLogURL, encoding: .utf8)
            #expect(errors.lowercased().contains("timeout") || errors.contains("truncated_body"))
        }
    }
}
