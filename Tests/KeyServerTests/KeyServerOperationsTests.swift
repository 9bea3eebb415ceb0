import AsyncHTTPClient
import Foundation
import KeyDelivery
import KeyServer
import NIOCore
import NIOHTTP1
import Testing

/// `GET /healthz`, `/readyz`, `/metrics` and request IDs, on a live server over loopback (SQLite; the PostgreSQL side
/// is in ``KeyServerFleetTests``).
struct KeyServerOperationsTests {
    struct Answer {
        var status: Int
        var requestID: String?
        var body: String
    }

    static func send(
        _ http: HTTPClient,
        _ url: String,
        method: HTTPMethod = .GET,
        requestID: String? = nil,
        token: String? = nil,
        body: TestDevice.SignedBody? = nil
    )
        async throws -> Answer
    {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let requestID { request.headers.add(name: "X-Request-ID", value: requestID) }
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "Stowage-Device-Signature", value: body.signature)
            request.body = .bytes(ByteBuffer(bytes: body.body))
        }
        let response = try await http.execute(request, timeout: .seconds(30))
        let collected = try await response.body.collect(upTo: 1 << 20)
        return Answer(
            status: Int(response.status.code),
            requestID: response.headers.first(name: "X-Request-ID"),
            body: String(buffer: collected)
        )
    }

    @Test("health, readiness, request IDs echoed or made, and metrics that count answers, refusals and active leases")
    func operationsEndpoints() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { client in
            let http = client.http
            let base = client.baseURL
            let health = try await Self.send(http, base + "/healthz")
            #expect(health.status == 200 && health.body == #"{"status":"ok"}"#)
            let ready = try await Self.send(http, base + "/readyz")
            #expect(ready.status == 200 && ready.body == #"{"status":"ready"}"#)

            // A caller's ID is kept; one that could break a log line is replaced by a fresh UUID.
            let device = try TestDevice()
            let granted = try await Self.send(
                http,
                base + "/v1/keys",
                method: .POST,
                requestID: "lb-7f3a.42",
                token: token,
                body: try device.keyRequest(asset: "movie-1", keyIDs: KeyServerFixture.movieKeyIDs)
            )
            #expect(granted.status == 200)
            #expect(granted.requestID == "lb-7f3a.42")
            let refused = try await Self.send(
                http,
                base + "/v1/keys",
                method: .POST,
                requestID: "two words",
                token: nil,
                body: try device.keyRequest(asset: "movie-1", keyIDs: KeyServerFixture.movieKeyIDs)
            )
            #expect(refused.status == 401, "\(refused.body)")
            let made = try #require(refused.requestID)
            #expect(UUID(uuidString: made) != nil, "\(made)")
            let long = try await Self.send(http, base + "/healthz", requestID: String(repeating: "a", count: 65))
            #expect(long.requestID.map { UUID(uuidString: $0) != nil } == true)

            // Only the operator's scraper, holding the data directory's metrics-token, reads the counters.
            let anonymous = try await Self.send(http, base + "/metrics")
            #expect(anonymous.status == 401 && !anonymous.body.contains("stowage_keyserver"), "\(anonymous.body)")
            #expect(anonymous.body.contains(#""code":"invalid_token""#), "\(anonymous.body)")
            let guessed = try await Self.send(http, base + "/metrics", token: String(repeating: "0", count: 64))
            #expect(guessed.status == 401)
            let metricsToken = try String(contentsOfFile: fixture.directory.path(of: KeyServerDataDirectory.metricsTokenFile), encoding: .utf8)
            #expect(metricsToken.count == 64)
            let metrics = try await Self.send(http, base + "/metrics", token: metricsToken)
            #expect(metrics.status == 200)
            let lines = Set(metrics.body.split(separator: "\n").map(String.init))
            #expect(lines.contains(#"stowage_keyserver_requests_total{route="/v1/keys",status="200"} 1"#), "\(metrics.body)")
            #expect(lines.contains(#"stowage_keyserver_requests_total{route="/v1/keys",status="401"} 1"#), "\(metrics.body)")
            #expect(lines.contains(#"stowage_keyserver_refusals_total{code="invalid_token"} 1"#), "\(metrics.body)")
            #expect(lines.contains(#"stowage_keyserver_active_leases{type="persistent"} 1.0"#), "\(metrics.body)")
            #expect(lines.contains(#"stowage_keyserver_active_leases{type="streaming"} 0.0"#), "\(metrics.body)")
            #expect(lines.contains(#"stowage_keyserver_request_duration_seconds_count{route="/v1/keys"} 2"#), "\(metrics.body)")
            #expect(lines.contains("stowage_keyserver_database_up 1.0"), "\(metrics.body)")
            // SQLite has no connection pool to report.
            #expect(!metrics.body.contains("database_operations_in_flight"))
        }
    }

    /// A data directory made before the metrics token existed has no `metrics-token`: the counters are not served to
    /// anyone, and the answer says how to turn them on.
    @Test func metricsWithoutATokenFileAreServedToNobody() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        try FileManager.default.removeItem(atPath: fixture.directory.path(of: KeyServerDataDirectory.metricsTokenFile))
        let server = try await KeyServerApplication(dataDirectory: fixture.directory, clock: fixture.clock.keyServerClock)
        let reopened = KeyServerFixture(directory: fixture.directory, clock: fixture.clock, server: server)
        try await reopened.withLiveServer { client in
            for token in [nil, String(repeating: "0", count: 64)] {
                let answer = try await Self.send(client.http, client.baseURL + "/metrics", token: token)
                #expect(answer.status == 403 && answer.body.contains(#""code":"metrics_disabled""#), "\(answer.body)")
                #expect(answer.body.contains("stowage keyserver init") && !answer.body.contains("stowage_keyserver_"))
            }
        }
    }
}
