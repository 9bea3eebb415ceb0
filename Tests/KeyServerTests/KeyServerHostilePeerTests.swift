import Foundation
import HTTPServing
import KeyServer
import StowageTestSupport
import Testing

/// Slow and idle clients against the key server (docs/RELIABILITY.md, "Hostile peers"): a normal client is answered
/// beside them, and they are closed at the request deadlines.
struct KeyServerHostilePeerTests {
    static let limits = ConnectionLimits(maxConnections: 1024, headTimeout: .seconds(2), bodyTimeout: .seconds(2), idleTimeout: .seconds(4))
    static let request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    @Test("300 idle connections and a slowloris take nothing from /healthz: it is served while they are all open")
    func servedBesideIdleClients() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let patient = ConnectionLimits(maxConnections: 1024, headTimeout: .seconds(120), bodyTimeout: .seconds(120), idleTimeout: .seconds(240))
        let outcome = try await fixture.withLiveServer(limits: patient) { client in
            try await HostileClients(port: try #require(URL(string: client.baseURL)?.port)).run(normalRequest: Self.request, closing: nil)
        }
        #expect(outcome.normalStatusLine == "HTTP/1.1 200 OK")
        #expect(outcome.idleOpenWhenAnswered == 300)
    }

    @Test("a request head of 128 KiB is answered 400 at once, and /healthz beside it 200")
    func oversizedHead() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let (oversized, normal) = try await fixture.withLiveServer(limits: Self.limits) { client in
            try await HostileClients.oversizedHead(
                port: try #require(URL(string: client.baseURL)?.port),
                path: "/v1/keys",
                normalRequest: Self.request
            )
        }
        #expect(oversized == "HTTP/1.1 400 Bad Request")
        #expect(normal == "HTTP/1.1 200 OK")
    }

    @Test("connections that say nothing, and a slowloris, are closed at the 2 s head deadline")
    func idleClientsClosedAtTheDeadline() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let outcome = try await fixture.withLiveServer(limits: Self.limits) { client in
            try await HostileClients(port: try #require(URL(string: client.baseURL)?.port), idle: 20)
                .run(normalRequest: Self.request, closing: .seconds(60))
        }
        #expect(outcome.normalStatusLine == "HTTP/1.1 200 OK")
        #expect(outcome.idleClosed == 20)
        #expect((outcome.slowlorisClosedAfter ?? 0) >= 1.5)
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
            // At the deadline, not before it; the upper bound only ends a test whose server never closes.
            #expect(!open && closedAfter > .milliseconds(1500), "\(closedAfter)")
            // The server answers others as before.
            let health = try await client.get("/healthz")
            #expect(health.status == 200)
        }
    }
}
