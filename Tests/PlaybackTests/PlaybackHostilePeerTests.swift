import Foundation
import HTTPServing
import Packaging
import Playback
import StowageTestSupport
import Testing

/// Slow and idle clients against the play server (docs/RELIABILITY.md, "Hostile peers"): any program on the machine
/// can connect to it; 300 that say nothing and one that sends a byte every 300 ms do not hold up the player.
struct PlaybackHostilePeerTests {
    static func session<T: Sendable>(headTimeout: Duration, _ body: @Sendable (PlaybackServer.Address) async throws -> T) async throws -> T {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await PackageCase(fixture: "ts-clear/index.m3u8", method: .sampleAES).make(in: root)
        var configuration = PlaybackServer.Configuration()
        configuration.connectionLimits = ConnectionLimits(
            maxConnections: 1024,
            headTimeout: headTimeout,
            bodyTimeout: .seconds(2),
            idleTimeout: headTimeout * 2
        )
        return try await PlaybackHarness.withSession(package, configuration: configuration, body).0
    }

    static func request(_ address: PlaybackServer.Address) -> String {
        "GET \(address.sessionMultivariantURL.path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    }

    @Test("300 idle connections and a slowloris take nothing from the player: its playlist is served while they are all open")
    func servedBesideIdleClients() async throws {
        let outcome = try await Self.session(headTimeout: .seconds(120)) { address in
            try await HostileClients(port: address.port).run(normalRequest: Self.request(address), closing: nil)
        }
        #expect(outcome.normalStatusLine == "HTTP/1.1 200 OK")
        #expect(outcome.idleOpenWhenAnswered == 300)
    }

    @Test("a request head of 128 KiB is answered 400 at once, and the player's playlist beside it 200")
    func oversizedHead() async throws {
        let (oversized, normal) = try await Self.session(headTimeout: .seconds(120)) { address in
            try await HostileClients.oversizedHead(
                port: address.port,
                path: address.sessionMultivariantURL.path,
                normalRequest: Self.request(address)
            )
        }
        #expect(oversized == "HTTP/1.1 400 Bad Request")
        #expect(normal == "HTTP/1.1 200 OK")
    }

    @Test("connections that say nothing, and a slowloris, are closed at the 2 s head deadline")
    func idleClientsClosedAtTheDeadline() async throws {
        let outcome = try await Self.session(headTimeout: .seconds(2)) { address in
            try await HostileClients(port: address.port, idle: 20).run(normalRequest: Self.request(address), closing: .seconds(60))
        }
        #expect(outcome.normalStatusLine == "HTTP/1.1 200 OK")
        #expect(outcome.idleClosed == 20)
        #expect((outcome.slowlorisClosedAfter ?? 0) >= 1.5)
    }
}
