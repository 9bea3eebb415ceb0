import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import StowageCore
import StowageTestSupport
import Testing

@testable import KeyDelivery

/// A server at a key server's URL that is not one, or a proxy in front of one that fails: it answers each route from a
/// script, over real HTTP on 127.0.0.1, and counts the requests.
actor MisbehavingKeyServer {
    struct Answer: Sendable {
        var status: Int
        var contentType: String
        var body: String
    }

    private var answers: [String: Answer] = [:]
    private(set) var requests: [String: Int] = [:]

    func answer(_ route: String, _ answer: Answer) { answers[route] = answer }

    func count(_ route: String) -> Int { requests[route, default: 0] }

    func next(_ route: String) -> Answer {
        requests[route, default: 0] += 1
        return answers[route] ?? Answer(status: 404, contentType: "text/plain", body: "not found")
    }

    /// Runs the server while `body` runs with its base URL.
    nonisolated func serve<Result: Sendable>(_ body: (URL) async throws -> Result) async throws -> Result {
        let router = Router()
        router.post("v1/keys") { [self] _, _ in await self.response(for: "POST /v1/keys") }
        router.post("v1/leases/:id/renew") { [self] _, _ in await self.response(for: "POST /v1/leases/renew") }
        router.get("v1/server-key") { [self] _, _ in await self.response(for: "GET /v1/server-key") }
        return try await withLoopbackServer(router) { port in try await body(URL(string: "http://127.0.0.1:\(port)")!) }
    }

    private func response(for route: String) -> Response {
        let answer = next(route)
        var headers = HTTPFields()
        headers[.contentType] = answer.contentType
        return Response(status: .init(code: answer.status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: answer.body)))
    }
}

/// What the client does with answers that are not the key protocol's: a proxy's error page, a web page where JSON
/// should be, JSON of another shape. Each is `unexpected_response`, naming the server, the request and the status; no
/// lease is stored; only an answer a proxy may have lost after its upstream acted on it (502, 504) is asked again.
struct MisbehavingKeyServerTests {
    static let proxyPage = "<html><body><h1>502 Bad Gateway</h1><hr>nginx</body></html>"

    @Test(
        "a status with no Stowage error body: unexpected_response naming server, request and status; 502 and 504 asked again",
        arguments: [(502, 3), (504, 3), (500, 1), (403, 1), (404, 1)]
    )
    func statusWithoutProtocolBody(status: Int, requests: Int) async throws {
        let refused = try await Self.acquire(answeredWith: .init(status: status, contentType: "text/html", body: Self.proxyPage))
        #expect(refused.error?.httpStatus == status)
        #expect(refused.error?.message.contains("HTTP \(status) and no Stowage error in its body") == true, "\(refused.message)")
        #expect(refused.requests == requests)
    }

    @Test(
        "a 200 whose body is not the protocol's JSON (a web page, JSON of another shape, nothing): unexpected_response, asked once",
        arguments: ["<html><body>Welcome</body></html>", #"{"status":"ok"}"#, ""]
    )
    func okWithAnotherBody(body: String) async throws {
        let refused = try await Self.acquire(answeredWith: .init(status: 200, contentType: "application/json", body: body))
        #expect(refused.error?.httpStatus == 200)
        #expect(refused.message.contains("HTTP 200") && refused.message.contains("SignedPayload"), "\(refused.message)")
        #expect(refused.requests == 1)
    }

    /// Asks a server that answers `POST /v1/keys` with `answer` for keys; checks what every such refusal must hold
    /// (`unexpected_response` naming the server and the request, no lease stored) and returns the error, its message
    /// and how many key requests the server saw.
    static func acquire(
        answeredWith answer: MisbehavingKeyServer.Answer
    ) async throws -> (error: KeySessionError?, message: String, requests: Int) {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        let server = MisbehavingKeyServer()
        await server.answer("POST /v1/keys", answer)
        return try await server.serve { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: token)
                let error = await #expect(throws: KeySessionError.self) {
                    try await session.acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                }
                let message = error?.message ?? ""
                #expect(error?.code == "unexpected_response")
                #expect(message.contains("answered POST /v1/keys") && message.contains(session.keyServer), "\(message)")
                #expect(try session.store.leases().isEmpty)
                return (error, message, await server.count("POST /v1/keys"))
            }
        }
    }
}
