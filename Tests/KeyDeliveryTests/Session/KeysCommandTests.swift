import AsyncHTTPClient
import Foundation
import KeyDelivery
import StowageTestSupport
import Testing

/// `stowage keys` as a user runs it, on a data directory filled by KeySession from the real key server.
struct KeysCommandTests {
    struct Run {
        var status: Int32
        var output: String
        var error: String
    }

    static func stowage(_ arguments: [String], home: URL, token: String? = nil) async throws -> Run {
        var environment = ProcessInfo.processInfo.environment
        environment["STOWAGE_HOME"] = home.path
        environment["STOWAGE_TOKEN"] = token
        let result = try await ProcessRunner.run(try StowageExecutable.url(), arguments, environment: environment)
        return Run(
            status: result.status,
            output: String(decoding: result.standardOutput, as: UTF8.self),
            error: String(decoding: result.standardError, as: UTF8.self)
        )
    }

    struct Row: Decodable {
        var leaseId: String
        var assetId: String
        var keyIds: [String]
        var type: String
        var state: String
        var storageExpiresAt: Int64
        var playbackTimeLeft: Int64?
        var renewableUntil: Int64?
        var pendingRelease: Bool
    }

    @Test func listRenewReturnSyncAndAudit() async throws {
        // The `stowage` executable opens the key store with this machine's ID, so the fixture's client does too.
        let fixture = try await KeySessionFixture.make(start: SystemClock().now, machineID: try MachineID.system())
        defer { fixture.remove() }
        let token = try await fixture.token()
        let home = fixture.clientDirectory
        try await fixture.withLiveServer { url in
            let leaseId = try await withHTTPClient { http in
                try await fixture.session(http, url: url, token: token)
                    .acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent).terms.leaseId
            }
            let list = try await Self.stowage(["keys", "list", "--json"], home: home)
            #expect(list.status == 0, "\(list.error)")
            let rows = try JSONDecoder().decode([Row].self, from: Data(list.output.utf8))
            #expect(rows.map(\.leaseId) == [leaseId])
            #expect(rows.first?.keyIds == KeySessionFixture.movieKeyIDs)
            #expect(rows.first?.state == "persisted")
            #expect(rows.first?.playbackTimeLeft == Int64(172_800))
            #expect(rows.first?.pendingRelease == false)

            let renew = try await Self.stowage(["keys", "renew", "movie-1"], home: home, token: token)
            #expect(renew.status == 0, "\(renew.error)")
            #expect(renew.output.contains("renewed movie-1"))

            let returned = try await Self.stowage(["keys", "return", "movie-1"], home: home)
            #expect(returned.status == 0, "\(returned.error)")
            #expect(returned.output.contains("released lease \(leaseId)"))

            let after = try JSONDecoder().decode([Row].self, from: Data(try await Self.stowage(["keys", "list", "--json"], home: home).output.utf8))
            #expect(after.first?.state == "released")
            #expect(after.first?.pendingRelease == false)

            let sync = try await Self.stowage(["keys", "sync"], home: home)
            #expect(sync.status == 0, "\(sync.error)")
            #expect(sync.output.contains("nothing queued"))
        }
        let audit = try await Self.stowage(["keys", "audit", "--verify"], home: home)
        #expect(audit.status == 0, "\(audit.error)")
        #expect(audit.output.contains("intact"))
        let journal = try await Self.stowage(["keys", "audit"], home: home)
        #expect(journal.output.contains("renewal"))
        #expect(journal.output.contains("release"))
    }
}
