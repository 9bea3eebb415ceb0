import Foundation
import HTTPServing
import Packaging
import Playback
import StowageTestSupport
import Testing

/// Slow and idle clients against the play server (docs/RELIABILITY.md, "Hostile peers"): any program on the machine
/// can connect to it; 300 that say nothing and one that sends a byte every 300 ms do not hold up the player.
struct PlaybackHostilePeerTests {
    @Test("300 idle connections and a slowloris: the player's playlist request is served beside them, and they are closed at the deadline")
    func slowAndIdleClients() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await PackageCase(fixture: "ts-clear/index.m3u8", method: .sampleAES).make(in: root)
        var configuration = PlaybackServer.Configuration()
        configuration.connectionLimits = ConnectionLimits(
            maxConnections: 1024,
            headTimeout: .seconds(10),
            bodyTimeout: .seconds(2),
            idleTimeout: .seconds(20)
        )
        let (outcome, _) = try await PlaybackHarness.withSession(package, configuration: configuration) { address in
            try await HostileClients(port: address.port).run(
                normalRequest: "GET \(address.sessionMultivariantURL.path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                headTimeout: .seconds(10)
            )
        }
        #expect(outcome.normalStatusLine == "HTTP/1.1 200 OK")
        // Served beside them, not after their slots were freed (no timing bound: the suite loads the machine).
        #expect(outcome.normalAnswerSeconds != nil && outcome.idleOpenWhenAnswered == 300)
        #expect(outcome.idleClosed == 300)
        #expect(outcome.slowlorisClosedAfter != nil)
    }
}
