public import AssetDownload
public import Foundation
import KeyDelivery
public import KeyServer
public import OfflinePackage
public import OriginServer
public import Packaging
import StowageCrypto
import StowageTestSupport
import Synchronization
public import Testing

/// A real key server and a real origin over loopback, serving an asset packaged from a clear fixture with
/// `ContentPackager` (what `stowage package` does), and a client data directory to download into.
public struct DownloadFixture: Sendable {
    public static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    public static let demoFixture = repositoryRoot.appendingPathComponent("Fixtures/demo/master.m3u8")

    public let root: URL
    public let assetId: String
    public let keyServer: KeyServerDataDirectory
    public let serverClock: KeyServerClock
    /// Every port a server of this fixture has listened on, held bound (not listening) until ``remove()``: while the
    /// servers are down it refuses connections, and no other test's server or connection can take it before they
    /// come back on it.
    private let reservations = PortReservations()

    /// Served at `/`; the packaged asset is under `/<assetId>/`.
    public var originRoot: URL { root.appendingPathComponent("origin", isDirectory: true) }
    public var clientDirectory: DataDirectory { DataDirectory(url: root.appendingPathComponent("client", isDirectory: true)) }
    public var package: PackageDirectory { try! PackageDirectory(assetId: assetId, in: clientDirectory) }

    public static func make(
        clearPlaylist: URL = demoFixture,
        method: ContentPackager.Method = .sampleAES,
        assetId: String = "demo-1",
        serverClock clock: KeyServerClock = .system
    ) async throws -> DownloadFixture {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("download-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let directory = try KeyServerDataDirectory.initialize(at: root.appendingPathComponent("keyserver").path)
        // Tests download several assets of the fixture's origin with one token.
        var configuration = try directory.loadConfiguration()
        configuration.allowWildcardAssets = true
        try directory.saveConfiguration(configuration)
        let packager = ContentPackager(
            assetID: assetId,
            method: method,
            outputDirectory: root.appendingPathComponent("origin/\(assetId)"),
            rotationPeriod: nil,
            keyServerURL: nil,
            registrar: KeyRegistrar(directory.register)
        )
        _ = try await packager.package(playlistAt: clearPlaylist)
        return DownloadFixture(root: root, assetId: assetId, keyServer: directory, serverClock: clock)
    }

    /// Packages `clearPlaylist` again as another asset on the same origin and key server.
    public func addAsset(_ id: String, clearPlaylist: URL = demoFixture, method: ContentPackager.Method = .sampleAES) async throws {
        let packager = ContentPackager(
            assetID: id,
            method: method,
            outputDirectory: originRoot.appendingPathComponent(id),
            rotationPeriod: nil,
            keyServerURL: nil,
            registrar: KeyRegistrar(keyServer.register)
        )
        _ = try await packager.package(playlistAt: clearPlaylist)
    }

    /// Packages one clear media playlist of the fixture (`audio/fr/index.m3u8`) again with a fresh key of its own,
    /// in place of the asset's: that rendition then needs a key no other rendition (and no EXT-X-SESSION-KEY) names.
    /// Returns the new key ID. With `keyAsset`, the key is registered under (and the playlist names) that asset
    /// instead: a source that slips another asset's key into this asset's playlist.
    @discardableResult
    public func repackageWithOwnKey(
        _ relativePlaylist: String,
        method: ContentPackager.Method = .sampleAES,
        keyAsset: String? = nil
    ) async throws -> String {
        let clear = Self.demoFixture.deletingLastPathComponent().appendingPathComponent(relativePlaylist)
        let staging = root.appendingPathComponent("repackaged-\(UUID().uuidString)")
        let packager = ContentPackager(
            assetID: keyAsset ?? assetId,
            method: method,
            outputDirectory: staging,
            rotationPeriod: nil,
            keyServerURL: nil,
            registrar: KeyRegistrar(keyServer.register)
        )
        let report = try await packager.package(playlistAt: clear)
        let target = originRoot.appendingPathComponent(assetId).appendingPathComponent(relativePlaylist).deletingLastPathComponent()
        try FileManager.default.removeItem(at: target)
        try FileManager.default.moveItem(at: staging, to: target)
        return report.keyIDs[0]
    }

    /// The packaged asset's multivariant playlist on the origin.
    public func sourceURL(_ origin: URL, asset: String? = nil) -> String {
        origin.appendingPathComponent("\(asset ?? assetId)/master.m3u8").absoluteString
    }

    public func token() async throws -> String {
        try await keyServer.makeToken(subject: "alice", assets: ["*"], ttl: 86_400, clock: serverClock)
    }

    /// Runs `body` while `ports` (those a ``withServers(conditions:seed:log:keyServerPort:originPort:_:)`` used) refuse
    /// connections, as a server that is down does. Each is held bound and not listening from the moment its server
    /// first took it until ``remove()``, so nothing is bound here, and no other test's server takes it before the
    /// servers come back on it.
    public func whileDown<T>(ports: [Int], _ body: () async throws -> T) async throws -> T {
        for port in ports where !reservations.holds(port) {
            throw FixtureError(description: "port \(port) is not one this fixture's servers listened on: it cannot be held down")
        }
        return try await body()
    }

    /// Runs the key server and the origin on 127.0.0.1 while `body` runs, then stops both.
    /// - Parameters:
    ///   - keyServerPort: the key server's port; 0 picks a free one (give the same port again to bring a key server
    ///     back where the leases say it is).
    ///   - originPort: the origin's port, likewise.
    public func withServers<T: Sendable>(
        conditions: NetworkConditions = .unconditioned,
        seed: UInt64 = 1,
        log: OriginRequestLog? = nil,
        keyServerPort: Int = 0,
        originPort: Int = 0,
        _ body: @Sendable (_ origin: URL, _ keyServer: URL) async throws -> T
    ) async throws -> T {
        // Each server listens beside its port's reservation (both bound with SO_REUSEADDR; only one listens).
        let keyServerPort = try reservations.reserve(keyServerPort)
        let originPort = try reservations.reserve(originPort)
        let server = try await KeyServerApplication(dataDirectory: keyServer, clock: serverClock)
        let (keyAddresses, keyContinuation) = AsyncStream.makeStream(of: KeyServerApplication.Address.self)
        // Each stream ends with its server's task, so a server that cannot bind (its port taken) fails the call with
        // its error instead of leaving it waiting for an address.
        let keyTask = Task {
            defer { keyContinuation.finish() }
            try await server.run(port: keyServerPort) { keyContinuation.yield($0) }
        }
        let origin = Origin(configuration: .init(root: originRoot.path, port: originPort, conditions: conditions, seed: seed, requestLog: log))
        let (originAddresses, originContinuation) = AsyncStream.makeStream(of: Origin.Address.self)
        let originTask = Task {
            defer { originContinuation.finish() }
            try await origin.run { originContinuation.yield($0) }
        }
        defer {
            keyTask.cancel()
            originTask.cancel()
        }
        var keyIterator = keyAddresses.makeAsyncIterator()
        var originIterator = originAddresses.makeAsyncIterator()
        guard let keyAddress = await keyIterator.next() else {
            try await keyTask.value
            throw CancellationError()
        }
        guard let originAddress = await originIterator.next() else {
            try await originTask.value
            throw CancellationError()
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body(originAddress.baseURL, keyAddress.baseURL))
        } catch {
            result = .failure(error)
        }
        keyTask.cancel()
        originTask.cancel()
        _ = try? await keyTask.value
        _ = try? await originTask.value
        return try result.get()
    }

    /// A session on the client directory with fast retries.
    public func session(_ configure: (inout DownloadSession.Configuration) -> Void = { _ in }) throws -> DownloadSession {
        var configuration = DownloadSession.Configuration(
            retry: RetryPolicy(maximumAttempts: 6, initialDelay: 0.02, maximumDelay: 0.2, networkDownGrace: 5)
        )
        configuration.readTimeout = 15
        configure(&configuration)
        return try DownloadSession(dataDirectory: clientDirectory, configuration: configuration)
    }

    /// Collects every event of `task` and its result.
    public static func run(_ task: DownloadTask) async -> (events: [DownloadEvent], result: Result<PackageManifest, any Error>) {
        var events: [DownloadEvent] = []
        for await event in task.events { events.append(event) }
        do {
            return (events, .success(try await task.result()))
        } catch {
            return (events, .failure(error))
        }
    }

    /// Every file of the package equals the origin's file (or byte range) it came from.
    public func assertPackageMatchesSource(_ manifest: PackageManifest, origin: URL, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for file in manifest.files {
            let local = try Data(contentsOf: package.url(forRelativePath: file.path))
            let sourcePath = String(file.sourceURL.dropFirst(origin.absoluteString.count))
            var source = try Data(contentsOf: originRoot.appendingPathComponent(sourcePath))
            if let range = file.byteRange { source = source.subdata(in: Int(range.offset)..<Int(range.offset + range.length)) }
            #expect(local == source, "\(file.path) differs from \(file.sourceURL)", sourceLocation: sourceLocation)
            #expect(file.size == Int64(local.count), sourceLocation: sourceLocation)
            var hasher = SHA256Hasher()
            hasher.update(Array(local))
            #expect(file.sha256 == Hex.encode(hasher.finalize()), sourceLocation: sourceLocation)
        }
    }

    /// The package's `verified.json` vouches only for what is true: each record has the SHA-256 the manifest has for its
    /// file and the identity the file has now; with `coveringAll`, every file of the manifest has one.
    public func assertVerifiedRecords(
        _ manifest: PackageManifest,
        coveringAll: Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> VerifiedFileRecords {
        let records = VerifiedFileRecords.read(in: package)
        let files = Dictionary(manifest.files.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        for (path, entry) in records.files {
            let file = try #require(files[path], "\(path) is recorded but not in the manifest", sourceLocation: sourceLocation)
            #expect(entry.sha256 == file.sha256, "\(path)", sourceLocation: sourceLocation)
            #expect(FileIdentity(path: package.url.appendingPathComponent(path).path) == entry.identity, "\(path)", sourceLocation: sourceLocation)
        }
        if coveringAll {
            #expect(Set(records.files.keys) == Set(files.keys), sourceLocation: sourceLocation)
        }
        return records
    }

    public func remove() {
        reservations.releaseAll()
        try? FileManager.default.removeItem(at: root)
    }
}

/// A failure of the fixture itself, not of the code under test.
public struct FixtureError: Error, CustomStringConvertible {
    public var description: String
}

/// Loopback ports held bound and not listening (``HeldPort``) for a fixture's life.
final class PortReservations: Sendable {
    private let held = Mutex<[Int: HeldPort]>([:])

    /// `port` (0: a free one the OS chooses), held from now on; the same port again is held once.
    func reserve(_ port: Int) throws -> Int {
        if port != 0, holds(port) { return port }
        let reservation = try HeldPort(port: port)
        held.withLock { $0[reservation.port] = reservation }
        return reservation.port
    }

    func holds(_ port: Int) -> Bool { held.withLock { $0[port] != nil } }

    func releaseAll() {
        let all = held.withLock { held in
            defer { held = [:] }
            return held
        }
        for reservation in all.values { reservation.release() }
    }
}
