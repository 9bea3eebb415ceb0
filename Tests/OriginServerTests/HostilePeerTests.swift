import Foundation
import HTTPServing
import OriginServer
import StowageTestSupport
import Testing

/// Slow and idle clients against the origin (docs/RELIABILITY.md, "Hostile peers"): 300 connections that say nothing
/// and one that sends its request a byte every 300 ms take nothing from a normal client, and the server closes them
/// at its head deadline.
struct HostilePeerTests {
    @Test("300 idle connections and a slowloris: a normal request is served beside them, and the server closes them at its deadline")
    func slowAndIdleClients() async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try Data("#EXTM3U\n".utf8).write(to: root.appendingPathComponent("index.m3u8"))
        var configuration = Origin.Configuration(root: root.path)
        configuration.connectionLimits = ConnectionLimits(
            maxConnections: 1024,
            headTimeout: .seconds(10),
            bodyTimeout: .seconds(2),
            idleTimeout: .seconds(20)
        )
        let outcome = try await OriginFixture.withOrigin(configuration) { base in
            let port = try #require(URL(string: base)?.port)
            return try await HostileClients(port: port).run(
                normalRequest: "GET /index.m3u8 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                headTimeout: .seconds(10)
            )
        }
        #expect(outcome.normalStatusLine == "HTTP/1.1 200 OK")
        // Served beside them, not after their slots were freed (no timing bound: the suite loads the machine).
        #expect(outcome.normalAnswerSeconds != nil && outcome.idleOpenWhenAnswered == 300)
        #expect(outcome.idleClosed == 300)
        // Closed at its deadline (within the 30 s the slowloris tries), long before its 130 s head could have arrived.
        #expect(outcome.slowlorisClosedAfter != nil)
    }

    @Test("with every connection slot taken by idle clients, a normal request is answered once the head deadline frees them")
    func connectionCapFreesItself() async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try Data("#EXTM3U\n".utf8).write(to: root.appendingPathComponent("index.m3u8"))
        var configuration = Origin.Configuration(root: root.path)
        configuration.connectionLimits = ConnectionLimits(
            maxConnections: 8,
            headTimeout: .seconds(1),
            bodyTimeout: .seconds(2),
            idleTimeout: .seconds(5)
        )
        try await OriginFixture.withOrigin(configuration) { base in
            let port = try #require(URL(string: base)?.port)
            // Three times the cap: the server accepts a few past it in one burst of accepts, never all of them.
            let idlers = try await RawConnection.open(port: port, count: 24)
            defer { for idler in idlers { idler.close() } }
            try await Task.sleep(for: .milliseconds(200))
            let asked = ContinuousClock.now
            let normal = try await RawConnection.open(port: port)[0]
            defer { normal.close() }
            normal.send("GET /index.m3u8 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let answer = await normal.read(until: "\r\n\r\n", within: .seconds(10))
            let waited = ContinuousClock.now - asked
            #expect(answer.hasPrefix("HTTP/1.1 200 OK"), "\(answer)")
            // Held back by the cap until the idle ones ahead of it were closed, 8 or so every second, then answered.
            #expect(waited > .milliseconds(500) && waited < .seconds(60), "\(waited)")
        }
    }
}
