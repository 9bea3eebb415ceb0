import AsyncHTTPClient
import Foundation
import HLS
import Hummingbird
import Logging
import NIOCore
import StowageCore
import StowageCrypto
import StowageTestSupport
import Testing

@testable import KeyDelivery

/// A key origin on 127.0.0.1: answers each path from a script (one answer per request, the last repeated), counts
/// requests and records the Authorization and Cookie headers it saw.
actor KeyOrigin {
    enum Answer: Sendable {
        case key([UInt8])
        case status(Int, retryAfter: String? = nil)
    }

    private var scripts: [String: [Answer]] = [:]
    private(set) var requests: [String: Int] = [:]
    private(set) var authorizations: [String] = []
    private(set) var cookies: [String] = []

    func script(_ path: String, _ answers: [Answer]) { scripts[path] = answers }

    func count(_ path: String) -> Int { requests[path, default: 0] }

    func answer(path: String, authorization: String?, cookie: String?) -> Answer {
        requests[path, default: 0] += 1
        if let authorization { authorizations.append(authorization) }
        if let cookie { cookies.append(cookie) }
        guard var answers = scripts[path], !answers.isEmpty else { return .status(404) }
        let next = answers.removeFirst()
        if !answers.isEmpty { scripts[path] = answers }
        return next
    }

    /// Runs the origin while `body` runs with its base URL.
    nonisolated func serve<Result: Sendable>(_ body: (URL) async throws -> Result) async throws -> Result {
        let router = Router()
        router.get("keys/:name") { [self] request, _ -> Response in
            let answer = await self.answer(
                path: request.uri.path,
                authorization: request.headers[.authorization],
                cookie: request.headers[.cookie]
            )
            switch answer {
            case .key(let bytes):
                return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
            case .status(let code, let retryAfter):
                var headers = HTTPFields()
                if let retryAfter { headers[.retryAfter] = retryAfter }
                return Response(status: .init(code: code), headers: headers)
            }
        }
        return try await withLoopbackServer(router) { port in try await body(URL(string: "http://127.0.0.1:\(port)")!) }
    }
}

struct IdentityKeyFetcherTests {
    static let key = Array(0..<16).map(UInt8.init)
    static let headers = [("Authorization", "Bearer origin-token"), ("Cookie", "session=abc123")]

    /// A key store in a fresh directory, a test clock, an origin and an HTTP client.
    private func withFetcher(
        lifetime: Int64? = nil,
        allowsAES256: Bool = false,
        // Generous: under the whole suite on two cores a loopback answer once took over 5 s, the attempt timed out and
        // was retried, and the tests that count requests saw two. Only the timeout test asks for a short one.
        timeoutSeconds: Int64 = 60,
        _ body: (IdentityKeyFetcher, KeyOrigin, URL, TestClock) async throws -> Void
    ) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("identity-fetch-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try KeyStore(dataDirectory: root, machineID: MachineID("0123456789abcdef0123456789abcdef"), clock: TestClock(now: 0))
        let clock = TestClock(now: 1_763_700_000)
        let origin = KeyOrigin()
        try await origin.serve { url in
            try await withHTTPClient { http in
                let configuration = IdentityKeyFetcher.Configuration(
                    headers: ScopedHeaders(Self.headers, playlistURL: url),
                    lifetimeSeconds: lifetime,
                    maxAttempts: 3,
                    initialBackoffSeconds: 0.05,
                    maxRetryAfterSeconds: 2,
                    timeoutSeconds: timeoutSeconds,
                    allowsAES256: allowsAES256
                )
                let fetcher = IdentityKeyFetcher(http: http, store: store, clock: clock, configuration: configuration)
                try await body(fetcher, origin, url, clock)
            }
        }
    }

    @Test func sendsHeadersStoresSealedAndServesTheSecondFetchFromTheCache() async throws {
        try await withFetcher { fetcher, origin, base, _ in
            await origin.script("/keys/a", [.key(Self.key)])
            let url = base.appendingPathComponent("keys/a")
            let first = try await fetcher.key(for: url, assetId: "movie-1")
            #expect(first.key == SecretBytes(Self.key))
            #expect(!first.fromCache)
            #expect(await origin.authorizations == ["Bearer origin-token"])
            #expect(await origin.cookies == ["session=abc123"])
            let uris = try fetcher.store.identityKeyURIs(assetId: "movie-1")
            #expect(uris == [url.absoluteString])

            let second = try await fetcher.key(for: url, assetId: "movie-1")
            #expect(second.key == SecretBytes(Self.key))
            #expect(second.fromCache)
            #expect(await origin.count("/keys/a") == 1)
        }
    }

    @Test func retriesA503() async throws {
        try await withFetcher { fetcher, origin, base, _ in
            await origin.script("/keys/flaky", [.status(503), .key(Self.key)])
            let fetched = try await fetcher.key(for: base.appendingPathComponent("keys/flaky"), assetId: "movie-1")
            #expect(fetched.key == SecretBytes(Self.key))
            #expect(await origin.count("/keys/flaky") == 2)
        }
    }

    @Test func honoursRetryAfterOnA429() async throws {
        try await withFetcher { fetcher, origin, base, _ in
            await origin.script("/keys/busy", [.status(429, retryAfter: "1"), .key(Self.key)])
            let fetched = try await fetcher.key(for: base.appendingPathComponent("keys/busy"), assetId: "movie-1")
            #expect(fetched.key == SecretBytes(Self.key))
            #expect(await origin.count("/keys/busy") == 2)
        }
    }

    @Test func refusesA15ByteBody() async throws {
        try await withFetcher { fetcher, origin, base, _ in
            await origin.script("/keys/short", [.key(Array(Self.key.prefix(15)))])
            let url = base.appendingPathComponent("keys/short")
            let error = await #expect(throws: KeySessionError.self) { try await fetcher.key(for: url, assetId: "movie-1") }
            #expect(error?.code == "invalid_identity_key")
            #expect(error?.message.contains("15 bytes") == true)
            let stored = try fetcher.store.identityKeyURIs(assetId: "movie-1")
            #expect(stored.isEmpty)
            #expect(await origin.count("/keys/short") == 1)
        }
    }

    @Test func accepts32BytesOnlyWhenAsked() async throws {
        let long = Array(0..<32).map(UInt8.init)
        try await withFetcher { fetcher, origin, base, _ in
            await origin.script("/keys/long", [.key(long)])
            let error = await #expect(throws: KeySessionError.self) {
                try await fetcher.key(for: base.appendingPathComponent("keys/long"), assetId: "movie-1")
            }
            #expect(error?.code == "invalid_identity_key")
        }
        try await withFetcher(allowsAES256: true) { fetcher, origin, base, _ in
            await origin.script("/keys/long", [.key(long)])
            let fetched = try await fetcher.key(for: base.appendingPathComponent("keys/long"), assetId: "movie-1")
            #expect(fetched.key == SecretBytes(long))
        }
    }

    @Test func a404FailsNamingTheURIWithoutRetrying() async throws {
        try await withFetcher { fetcher, origin, base, _ in
            let url = base.appendingPathComponent("keys/missing")
            let error = await #expect(throws: KeySessionError.self) { try await fetcher.key(for: url, assetId: "movie-1") }
            #expect(error?.code == "identity_key_fetch_failed")
            #expect(error?.httpStatus == 404)
            #expect(error?.message.contains(url.absoluteString) == true)
            #expect(await origin.count("/keys/missing") == 1)
        }
    }

    @Test func persistentServerErrorsGiveUpAfterTheLastAttempt() async throws {
        try await withFetcher { fetcher, origin, base, _ in
            await origin.script("/keys/down", [.status(500)])
            let error = await #expect(throws: KeySessionError.self) {
                try await fetcher.key(for: base.appendingPathComponent("keys/down"), assetId: "movie-1")
            }
            #expect(error?.httpStatus == 500)
            #expect(await origin.count("/keys/down") == 3)
        }
    }

    @Test func connectionErrorsAreRetriedThenReportedAsUnreachable() async throws {
        // AsyncHTTPClient keeps reconnecting until the deadline, so each attempt lasts the whole-transfer timeout.
        // A port held bound and not listening refuses connections (no assumption that some port, 9 say, does).
        let closed = try HeldPort()
        defer { closed.release() }
        try await withFetcher(timeoutSeconds: 1) { fetcher, _, _, _ in
            let url = URL(string: "http://127.0.0.1:\(closed.port)/keys/a")!
            let error = await #expect(throws: KeySessionError.self) { try await fetcher.key(for: url, assetId: "movie-1") }
            #expect(error?.code == "identity_key_unreachable")
            #expect(error?.message.contains(url.absoluteString) == true)
        }
    }

    @Test func anExpiredLocalLifetimeIsRefetched() async throws {
        try await withFetcher(lifetime: 60) { fetcher, origin, base, clock in
            await origin.script("/keys/a", [.key(Self.key)])
            let url = base.appendingPathComponent("keys/a")
            let first = try await fetcher.key(for: url, assetId: "movie-1")
            #expect(!first.fromCache)
            clock.advance(by: 30)
            let cached = try await fetcher.key(for: url, assetId: "movie-1")
            #expect(cached.fromCache)
            #expect(await origin.count("/keys/a") == 1)
            clock.advance(by: 31)
            let refetched = try await fetcher.key(for: url, assetId: "movie-1")
            #expect(!refetched.fromCache)
            #expect(await origin.count("/keys/a") == 2)
            // The new copy has a fresh lifetime.
            let reopened = try fetcher.store.identityKey(uri: url.absoluteString, at: clock.now + 59)
            #expect(reopened == SecretBytes(Self.key))
        }
    }

    /// KeySession.acquireKeys with identity entries only: every URI fetched once, then served from the store.
    @Test func sessionAcquiresIdentityKeys() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let origin = KeyOrigin()
        await origin.script("/keys/a", [.key(Self.key)])
        await origin.script("/keys/b", [.key(Self.key.reversed())])
        // No key server: a port held bound and not listening refuses connections.
        let nowhere = try HeldPort()
        defer { nowhere.release() }
        try await origin.serve { base in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: URL(string: "http://127.0.0.1:\(nowhere.port)")!, token: nil)
                let keys = [
                    EncryptionKey(method: .aes128, uri: "keys/a"), EncryptionKey(method: .aes128, uri: "keys/b", keyFormat: "identity"),
                    EncryptionKey(method: .aes128, uri: "keys/a"),
                ]
                let playlist = base.appendingPathComponent("media.m3u8")
                let first = try await session.acquireKeys(
                    for: keys,
                    assetId: "movie-1",
                    baseURL: playlist,
                    lease: .persistent,
                    identityHeaders: ScopedHeaders(Self.headers, playlistURL: playlist),
                    identityLifetime: 3_600
                )
                #expect(first.acquisition == nil)
                #expect(first.identityKeyURIs == ["\(base.absoluteString)/keys/a", "\(base.absoluteString)/keys/b"])
                #expect(first.cachedIdentityKeyURIs.isEmpty)
                #expect(try session.store.identityKeyURIs(assetId: "movie-1").count == 2)
                #expect(await origin.authorizations.count == 2)

                let second = try await session.acquireKeys(for: keys, assetId: "movie-1", baseURL: playlist, lease: .persistent)
                #expect(second.cachedIdentityKeyURIs == second.identityKeyURIs)
                #expect(await origin.count("/keys/a") == 1)
                #expect(await origin.count("/keys/b") == 1)

                let missingAsset = await #expect(throws: KeySessionError.self) {
                    try await session.acquireKeys(for: keys, assetId: nil, baseURL: playlist, lease: .persistent)
                }
                #expect(missingAsset?.code == "invalid_request")
            }
        }
    }
}
