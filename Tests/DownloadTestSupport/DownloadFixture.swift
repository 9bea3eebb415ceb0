public import AssetDownload
public import Foundation
import KeyDelivery
public import KeyServer
public import OfflinePackage
public import OriginServer
public import Packaging
import StowageCrypto
import StowageTestSupport
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
    /// connections, as a server that is down does: each is held bound and not listening, so no other test's server
    /// takes it before the servers come back on it.
    ///
    /// The servers just stopped may still have sockets on a port for a moment (accepted connections the client's pool
    /// has not closed yet), so taking each is tried again for up to 10 seconds.
    public func whileDown<T>(ports: [Int], _ body: () async throws -> T) async throws -> T {
        var held: [HeldPort] = []
        defer { for port in held { port.release() } }
        for port in ports {
            var attempt = 0
            while true {
                do {
                    held.append(try HeldPort(port: port))
                    break
                } catch {
                    attempt += 1
                    guard attempt < 200 else { throw error }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
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

    public func remove() {
        try? FileManager.default.removeItem(at: root)
    }
}
