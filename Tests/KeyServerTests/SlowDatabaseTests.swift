import Foundation
import KeyServer
import StowageCore
import StowageTestSupport
import Testing

/// PostgreSQL slow rather than gone (issue 15): the fleet store's operations are answered at their time limit with
/// `database_unavailable` while the database holds its answers, and the store serves again once it answers, with no
/// restart. The database is real; a relay between it and the store holds what it sends.
@Suite("A PostgreSQL that answers late")
struct SlowDatabaseTests {
    @Test(StoreKind.needsPostgres) func aStalledDatabaseIsAnsweredAtTheLimitAndServesAgainOnceItAnswers() async throws {
        guard let url = StoreKind.postgresURL else { return }
        try await TestDatabase.with(url) { databaseURL in
            var components = try #require(URLComponents(string: databaseURL))
            let relay = try StallingRelay(upstreamPort: try #require(components.port))
            defer { relay.stop() }
            components.port = relay.port
            let store = try PostgresKeyServerStore(url: try #require(components.string), operationTimeout: .seconds(2))
            do {
                try await store.migrate()
                try await store.saveAsset(AssetRecord(id: "movie", policy: "default", createdAt: 0), keys: [])
                #expect(try await store.asset(id: "movie")?.id == "movie")

                relay.stall()
                for _ in 0..<2 {
                    let started = ContinuousClock.now
                    let error = await #expect(throws: KeyServerSetupError.self) { _ = try await store.asset(id: "movie") }
                    let waited = ContinuousClock.now - started
                    #expect(error?.code == "database_unavailable")
                    #expect(error?.message.contains("no answer within 2") == true, "\(error?.message ?? "")")
                    // Answered at the limit, not at whatever the database takes (a stall lasts until resumed here).
                    #expect(waited >= .seconds(2) && waited < .seconds(15), "\(waited)")
                }

                relay.resume()
                // The held answers arrive late, for requests already answered; the next ones are served again.
                var served: String?
                for _ in 0..<30 where served == nil {
                    served = try? await store.asset(id: "movie")?.id
                    if served == nil { try await Task.sleep(for: .milliseconds(200)) }
                }
                #expect(served == "movie")
            } catch {
                await store.close()
                throw error
            }
            await store.close()
        }
    }
}
