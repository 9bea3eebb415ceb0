import Foundation
import HTTPServing
import KeyServer
import StowageTestSupport
import Testing

/// Slow and idle clients against the key server (docs/RELIABILITY.md, "Hostile peers"): they are closed at the
/// request deadlines, and a normal client is answered meanwhile.
struct KeyServerHostilePeerTests {
    static let limits = ConnectionLimits(maxConnections: 1024, headTimeout: .seconds(10), bodyTimeout: .seconds(2), idleTimeout: .seconds(20))

    @Test("300 idle connections and a slowloris: /healthz is served beside them, and the server closes them at its deadline")
    func slowAndIdleClients() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let outcome = try await fixture.withLiveServer(limits: Self.limits) { client in
            let port = try #require(URL(string: client.baseURL)?.port)
            return try await HostileClients(port: port).run(
                normalRequest: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                headTimeout: .seconds(10)
            )
        }
        #expect(outcome.normalStatusLine == "HTTP/1.1 200 OK")
        // Served beside them, not after their slots were freed (no timing bound: the suite loads the machine).
        #expect(outcome.normalAnswerSeconds != nil && outcome.idleOpenWhenAnswered == 300)
        #expect(outcome.idleClosed == 300)
        #expect(outcome.slowlorisClosedAfter != nil)
    }

    @Test("a key request whose body trickles in a byte at a time is closed at the 2 s body deadline")
    func slowBody() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        try await fixture.withLiveServer(limits: Self.limits) { client in
            let port = try #require(URL(string: client.baseURL)?.port)
            let slow = try await RawConnection.open(port: port)[0]
            defer { slow.close() }
            #expect(slow.send("POST /v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"))
            let began = ContinuousClock.now
            var open = true
            // One byte every 250 ms would take 100 s; bounded at 30 s.
            while open, ContinuousClock.now - began < .seconds(30) {
                open = slow.send("{")
                if open { open = await !slow.closedByServer(within: .milliseconds(250)) }
            }
            let closedAfter = ContinuousClock.now - began
            #expect(!open && closedAfter > .milliseconds(1500) && closedAfter < .seconds(20), "\(closedAfter)")
            // The server answers others as before.
            let health = try await client.get("/healthz")
            #expect(health.status == 200)
        }
    }
}
