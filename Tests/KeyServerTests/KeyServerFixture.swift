import AsyncHTTPClient
import Foundation
import HTTPServing
import KeyDelivery
import KeyServer
import NIOCore
import NIOHTTP1
import StowageCore
import StowageCrypto
import StowageTestSupport

/// A key server in a fresh temporary data directory, with a movable clock and known assets:
/// - `movie-1`: two keys, the default policy (30 days, 48 h playback, renewable for 90 days, 3 devices);
/// - `rental`: one key, a policy that cannot be renewed and allows 1 device;
/// - `live`: one key, streaming only.
struct KeyServerFixture: Sendable {
    static let movieKeyIDs = ["000102030405060708090a0b0c0d0e0f", "101112131415161718191a1b1c1d1e1f"]
    static let movieKeys = ["00112233445566778899aabbccddeeff", "ffeeddccbbaa99887766554433221100"]
    static let rentalKeyID = "202122232425262728292a2b2c2d2e2f"
    static let rentalKey = "0f0e0d0c0b0a09080706050403020100"
    static let liveKeyID = "303132333435363738393a3b3c3d3e3f"
    static let liveKey = "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
    static var allContentKeys: [[UInt8]] { (movieKeys + [rentalKey, liveKey]).map { Hex.decode($0)! } }

    let directory: KeyServerDataDirectory
    let clock: ManualClock
    let server: KeyServerApplication

    /// - Parameters:
    ///   - clock: the server's clock (November 2025 by default).
    ///   - configure: changes to the configuration written to config.json before the server opens it.
    static func make(
        clock: ManualClock = ManualClock(),
        configure: (inout KeyServerConfiguration) -> Void = { _ in }
    ) async throws
        -> KeyServerFixture
    {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keyserver-tests-\(UUID().uuidString)").path
        let directory = try KeyServerDataDirectory.initialize(at: path)
        var configuration = try directory.loadConfiguration()
        configuration.allowWildcardAssets = true
        configuration.maxTokenLifetime = 365 * 86_400
        configuration.policies["rental"] = AssetPolicy(
            storageDuration: 7 * 86_400,
            playbackDuration: 86_400,
            renewable: false,
            renewalExtension: 86_400,
            renewableFor: 0,
            maxDevices: 1
        )
        configuration.policies["stream-only"] = AssetPolicy(
            storageDuration: 86_400,
            playbackDuration: nil,
            persistentAllowed: false,
            renewable: false,
            renewalExtension: 86_400,
            renewableFor: 0,
            maxDevices: nil,
            streamingDuration: 3_600
        )
        configure(&configuration)
        try write(configuration, to: directory)
        for (keyID, key) in zip(movieKeyIDs, movieKeys) {
            try await directory.addAsset(id: "movie-1", keyID: keyID, key: SecretBytes(Hex.decode(key)!), clock: clock.keyServerClock)
        }
        try await directory.addAsset(id: "rental", keyID: rentalKeyID, key: SecretBytes(Hex.decode(rentalKey)!), policy: "rental")
        try await directory.addAsset(id: "live", keyID: liveKeyID, key: SecretBytes(Hex.decode(liveKey)!), policy: "stream-only")
        let server = try await KeyServerApplication(dataDirectory: directory, clock: clock.keyServerClock)
        return KeyServerFixture(directory: directory, clock: clock, server: server)
    }

    static func write(_ configuration: KeyServerConfiguration, to directory: KeyServerDataDirectory) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(configuration).write(to: URL(fileURLWithPath: directory.path(of: KeyServerDataDirectory.configurationFile)))
    }

    /// A token for `account`, valid for a year of the fixture's clock.
    func token(_ account: String = "alice", assets: [String] = ["*"], ttl: Int64 = 365 * 86_400) async throws -> String {
        try await directory.makeToken(subject: account, assets: assets, ttl: ttl, clock: clock.keyServerClock)
    }

    /// Runs the server on 127.0.0.1 with an OS-assigned port while `body` runs, then stops it.
    /// - Parameter limits: the server's connection limits, when not the standard ones.
    func withLiveServer<Result: Sendable>(
        limits: ConnectionLimits? = nil,
        _ body: (LiveClient) async throws -> Result
    ) async throws -> Result {
        var server = self.server
        if let limits { server.connectionLimits = limits }
        let started = try await ListeningServer.start { [server] onListening in try await server.run(port: 0, onListening: onListening) }
        let task = started.task
        let address = try started.listeningAddress()
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let result: Swift.Result<Result, any Error>
        do {
            // Devices sign requests with the server's clock as their own, so `clientTime` keeps up when a test moves it.
            result = .success(
                try await TestDevice.$clock.withValue(clock) { try await body(LiveClient(http: http, baseURL: address.baseURL.absoluteString)) }
            )
        } catch {
            result = .failure(error)
        }
        try await http.shutdown()
        task.cancel()
        _ = try? await task.value
        return try result.get()
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory.path)
    }
}

/// The protocol client side of the tests, over AsyncHTTPClient.
struct LiveClient: Sendable {
    let http: HTTPClient
    let baseURL: String

    struct Reply: Sendable {
        var status: Int
        var contentType: String?
        var body: [UInt8]

        /// The protocol error code of an error reply.
        var errorCode: String? { (try? JSONDecoder().decode(KeyProtocolErrorBody.self, from: Data(body)))?.error.code }

        func decode<Message: Decodable>(_ type: Message.Type) throws -> Message { try JSONDecoder().decode(type, from: Data(body)) }
    }

    func post(
        _ path: String,
        _ signed: TestDevice.SignedBody?,
        token: String?,
        signature: String? = nil,
        rawBody: [UInt8]? = nil
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let value = signature ?? signed?.signature { request.headers.add(name: "Stowage-Device-Signature", value: value) }
        request.body = .bytes(ByteBuffer(bytes: rawBody ?? signed?.body ?? []))
        return try await send(request)
    }

    /// `GET /metrics` with the data directory's metrics token.
    func metrics(_ directory: KeyServerDataDirectory) async throws -> Reply {
        let token = try String(contentsOfFile: directory.path(of: KeyServerDataDirectory.metricsTokenFile), encoding: .utf8)
        return try await get("/metrics", token: token)
    }

    func get(_ path: String, token: String? = nil) async throws -> Reply {
        var request = HTTPClientRequest(url: baseURL + path)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        return try await send(request)
    }

    private func send(_ request: HTTPClientRequest) async throws -> Reply {
        let response = try await http.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return Reply(
            status: Int(response.status.code),
            contentType: response.headers.first(name: "Content-Type"),
            body: Array(body.readableBytesView)
        )
    }

    // Protocol operations.

    func requestKeys(_ signed: TestDevice.SignedBody, token: String?) async throws -> Reply {
        try await post("/v1/keys", signed, token: token)
    }

    func renew(_ leaseID: String, _ signed: TestDevice.SignedBody, token: String?) async throws -> Reply {
        try await post("/v1/leases/\(leaseID)/renew", signed, token: token)
    }

    func release(_ leaseID: String, _ signed: TestDevice.SignedBody) async throws -> Reply {
        try await post("/v1/leases/\(leaseID)/release", signed, token: nil)
    }

    /// `GET /v1/server-key`, decoded.
    func serverKey() async throws -> Ed25519.PublicKey {
        let reply = try await get("/v1/server-key")
        let response = try reply.decode(ServerKeyResponse.self)
        return try Ed25519.PublicKey(rawRepresentation: StrictBase64.decode(response.signingKey, byteCount: 32)!)
    }
}
