import AsyncHTTPClient
import Foundation
import KeyDelivery
import KeyServer
import StowageCore
import StowageCrypto
import StowageTestSupport

/// A real key server (KeyServerApplication) in a fresh temporary directory, driven by the client's TestClock, with
/// `movie-1` (two keys, default policy) and `live` (streaming only); and a client data directory.
struct KeySessionFixture: Sendable {
    static let movieKeyIDs = ["000102030405060708090a0b0c0d0e0f", "101112131415161718191a1b1c1d1e1f"]
    static let movieKeys = ["00112233445566778899aabbccddeeff", "ffeeddccbbaa99887766554433221100"]
    static let liveKeyID = "303132333435363738393a3b3c3d3e3f"
    static let liveKey = "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
    static var allContentKeys: [[UInt8]] { (movieKeys + [liveKey]).map { Hex.decode($0)! } }

    let root: URL
    let clock: TestClock
    /// The port the fixture's server listens on each time it runs, so leases (which remember their key server's URL)
    /// find it again after a restart. Chosen free by the OS when the fixture is made.
    var port: Int { reservation.port }
    /// Holds ``port`` (bound, not listening) for the fixture's life, so no other test's server or connection takes it
    /// while this one's server is down: a port released and bound again later was taken by another test under load,
    /// and the server then could not start. The server binds it beside this socket (both with SO_REUSEADDR; Linux
    /// allows that while this one does not listen), and connections to it are refused while the server is down.
    let reservation: HeldPort
    /// The machine the client's key store is bound to (the system's for tests that run the `stowage` executable on it).
    let machineID: MachineID
    let directory: KeyServerDataDirectory
    let server: KeyServerApplication

    var clientDirectory: URL { root.appendingPathComponent("client", isDirectory: true) }
    var serverClock: KeyServerClock { KeyServerClock { [clock] in Double(clock.now) } }

    static func make(
        start: Int64 = 1_763_700_000,
        machineID: MachineID = MachineID("0123456789abcdef0123456789abcdef"),
        maxClockSkew: Int64 = 300
    ) async throws
        -> KeySessionFixture
    {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keysession-tests-\(UUID().uuidString)")
        let clock = TestClock(now: start)
        let serverClock = KeyServerClock { [clock] in Double(clock.now) }
        let directory = try KeyServerDataDirectory.initialize(at: root.appendingPathComponent("server").path)
        var configuration = try directory.loadConfiguration()
        configuration.allowWildcardAssets = true
        configuration.maxTokenLifetime = 365 * 86_400
        configuration.maxClockSkew = maxClockSkew
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
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(configuration).write(to: URL(fileURLWithPath: directory.path(of: KeyServerDataDirectory.configurationFile)))
        for (keyID, key) in zip(movieKeyIDs, movieKeys) {
            try await directory.addAsset(id: "movie-1", keyID: keyID, key: SecretBytes(Hex.decode(key)!), clock: serverClock)
        }
        try await directory.addAsset(id: "live", keyID: liveKeyID, key: SecretBytes(Hex.decode(liveKey)!), policy: "stream-only", clock: serverClock)
        let server = try await KeyServerApplication(dataDirectory: directory, clock: serverClock)
        return KeySessionFixture(
            root: root,
            clock: clock,
            reservation: try HeldPort(),
            machineID: machineID,
            directory: directory,
            server: server
        )
    }

    func token(assets: [String] = ["*"]) async throws -> String {
        try await directory.makeToken(subject: "alice", assets: assets, ttl: 365 * 86_400, clock: serverClock)
    }

    /// The client's key store and device identity, opened (or reopened) from the client directory.
    func openClient() throws -> (KeyStore, DeviceIdentity) {
        let store = try KeyStore(dataDirectory: clientDirectory, machineID: machineID, clock: clock)
        return (store, try DeviceIdentity.loadOrCreate(in: clientDirectory))
    }

    /// Runs `server` on 127.0.0.1 (an OS-assigned port, or `port`) while `body` runs with its base URL, then stops it.
    static func withLiveServer<Result: Sendable>(
        _ server: KeyServerApplication,
        port: Int = 0,
        _ body: (URL) async throws -> Result
    ) async throws -> Result {
        let started = try await ListeningServer.start { onListening in try await server.run(port: port, onListening: onListening) }
        let task = started.task
        let address = try started.listeningAddress()
        let result: Swift.Result<Result, any Error>
        do {
            result = .success(try await body(address.baseURL))
        } catch {
            result = .failure(error)
        }
        task.cancel()
        _ = try? await task.value
        return try result.get()
    }

    /// Runs the fixture's server on its ``port`` while `body` runs.
    func withLiveServer<Result: Sendable>(_ body: (URL) async throws -> Result) async throws -> Result {
        try await Self.withLiveServer(server, port: port, body)
    }

    func session(_ http: HTTPClient, url: URL, token: String?, timeoutSeconds: Int64 = 10) throws -> KeySession {
        let (store, device) = try openClient()
        return KeySession(clock: clock, http: http, store: store, device: device, serverURL: url, token: token, timeoutSeconds: timeoutSeconds)
    }

    func remove() {
        reservation.release()
        try? FileManager.default.removeItem(at: root)
    }
}

/// Runs `body` with an HTTPClient and shuts it down after.
func withHTTPClient<Result: Sendable>(_ body: (HTTPClient) async throws -> Result) async throws -> Result {
    let http = HTTPClient(eventLoopGroupProvider: .singleton)
    let result: Swift.Result<Result, any Error>
    do {
        result = .success(try await body(http))
    } catch {
        result = .failure(error)
    }
    try await http.shutdown()
    return try result.get()
}
