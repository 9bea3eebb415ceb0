import AsyncHTTPClient
public import Foundation
import HLS
public import KeyDelivery
public import KeyServer
public import OfflinePackage
public import Packaging
import StowageCore
import StowageCrypto
import StowageTestSupport

/// How a test package's keys are delivered and held on the device.
public enum TestKeyDelivery: Sendable {
    /// Stowage skd keys: registered with a real key server (under `policy`), acquired by a real `KeySession` as a
    /// persistent lease into the device's key store. The manifest lists the keys with kind `.skd`.
    case skd(policy: AssetPolicy)
    /// Standard AES keys (KEYFORMAT `identity`) at `https://keys.stowage.test/ASSET/KEY_ID.key`, sealed into the key
    /// store with `KeyStore.storeIdentityKey` and a local lifetime ending at `expiresAt` (nil: none). No lease.
    case identity(expiresAt: Int64?)

    /// skd keys under a policy with a playback window: kept 30 days, 48 hours of playback once started.
    public static let standardSkd = TestKeyDelivery.skd(policy: TestPackages.standardPolicy)
}

/// An offline package made for a test, complete and with its keys held, in its own data directory.
public struct TestPackage: Sendable {
    /// The device's data directory (`stowage.sqlite`, `packages/`).
    public let dataDirectory: DataDirectory
    /// `packages/ASSET/` inside ``dataDirectory``.
    public let package: PackageDirectory
    /// The manifest as written to `manifest.json`.
    public let manifest: PackageManifest
    /// The device's key store (holding the lease or the sealed identity keys).
    public let store: KeyStore
    /// The device identity the lease was issued to.
    public let device: DeviceIdentity
    /// The clock the key server, the key session and the key store were driven by; move it to expire windows.
    public let clock: TestClock
    /// The clear playlist the package was made from (what playback must reproduce).
    public let clearSource: URL
    /// The stored lease (skd packages), nil for identity packages.
    public let leaseId: String?
    /// The key server's data directory (its keys are registered there), for tests that want to acquire again.
    public let keyServerDirectory: KeyServerDataDirectory
    /// The folder holding everything of this package (data directory, key server, packager output).
    public let root: URL

    /// The absolute URL of a file of the package (`video/00001.ts`).
    public func url(of relativePath: String) -> URL {
        package.url.appendingPathComponent(relativePath)
    }

    /// The rendition of `kind` (the first one), e.g. the video.
    public func rendition(_ kind: PackageRendition.Kind) -> PackageRendition? {
        manifest.renditions.first { $0.kind == kind }
    }

    /// Flips one byte of a file in place (same size, so only a checksum can tell).
    public func damage(_ relativePath: String, at offset: Int? = nil) throws {
        let url = url(of: relativePath)
        var bytes = try Data(contentsOf: url)
        let index = offset ?? bytes.count / 2
        bytes[index] ^= 0x5a
        try bytes.write(to: url)
    }

    /// Removes the whole folder of the test.
    public func remove() {
        try? FileManager.default.removeItem(at: root)
    }
}

/// Makes real offline packages for tests: the clear fixture is encrypted by KeyServer's `ContentPackager` (as
/// `stowage package` does) with fresh keys, the keys are obtained the way a device obtains them, and the result is
/// laid out as the download engine lays out a package (docs/package-format.md).
///
/// ```swift
/// let package = try await TestPackages.make(clearPlaylist: fixture, method: .sampleAES, assetId: "movie-ts", in: tmp)
/// ```
public enum TestPackages {
    /// The test start time (2025-11-21), the key server's and the device's clock.
    public static let startTime: Int64 = 1_763_700_000
    /// The name of the policy test assets are registered under.
    public static let policyName = "test-policy"
    /// Kept 30 days, 48 hours of playback once started, renewable.
    public static let standardPolicy = AssetPolicy(
        storageDuration: 30 * 86_400,
        playbackDuration: 48 * 3_600,
        persistentAllowed: true,
        renewable: true,
        renewalExtension: 30 * 86_400,
        renewableFor: 90 * 86_400,
        maxDevices: nil
    )
    /// The machine ID the device's key store seals with (tests never read /etc/machine-id).
    public static let machineID = MachineID("0123456789abcdef0123456789abcdef")

    /// The folder of the repository's `Fixtures/` (found from this source file).
    public static var fixturesURL: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures", isDirectory: true)
    }

    /// A clear fixture playlist by its path under `Fixtures/media/`, e.g. `ts-clear/index.m3u8`.
    public static func mediaFixture(_ path: String) -> URL {
        fixturesURL.appendingPathComponent("media").appendingPathComponent(path)
    }

    /// Makes a complete package of `clearPlaylist` (a media or a multivariant playlist) in a new folder under `root`.
    ///
    /// - Parameters:
    ///   - clearPlaylist: the clear source: `Fixtures/media/ts-clear/index.m3u8`, `.../shaka/fmp4-clear/master.m3u8`.
    ///   - method: SAMPLE-AES (TS sample encryption or fMP4 cbcs) or AES-128.
    ///   - assetId: the asset ID, also the package folder's name.
    ///   - keys: skd keys under a lease (default: a policy with a playback window) or identity keys.
    ///   - root: where the test's folder is made (a temporary directory).
    ///   - start: the time the clock starts at.
    ///   - rotationPeriod: segments per key (key rotation); nil for one key.
    /// - Returns: the package, its data directory, key store and clock.
    public static func make(
        clearPlaylist: URL,
        method: ContentPackager.Method,
        assetId: String,
        keys: TestKeyDelivery = .standardSkd,
        in root: URL,
        start: Int64 = startTime,
        rotationPeriod: Int? = nil
    ) async throws -> TestPackage {
        let folder = root.appendingPathComponent("\(assetId)-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let clock = TestClock(now: start)
        let serverClock = KeyServerClock { [clock] in Double(clock.now) }

        // The key server's data directory, with the test policy.
        let server = try KeyServerDataDirectory.initialize(at: folder.appendingPathComponent("keyserver").path)
        var configuration = try server.loadConfiguration()
        if case .skd(let policy) = keys { configuration.policies[policyName] = policy }
        configuration.maxTokenLifetime = 365 * 86_400
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(configuration).write(to: URL(fileURLWithPath: server.path(of: KeyServerDataDirectory.configurationFile)))

        // Content preparation: fresh keys, registered with the server (and remembered for identity delivery).
        var policy: String?
        if case .skd = keys { policy = policyName }
        let registrar = RecordingRegistrar(directory: server, policy: policy, clock: serverClock)
        let packaged = folder.appendingPathComponent("packaged", isDirectory: true)
        let packager = ContentPackager(
            assetID: assetId,
            method: method,
            outputDirectory: packaged,
            rotationPeriod: rotationPeriod,
            registrar: registrar
        )
        let report = try await packager.package(playlistAt: clearPlaylist)

        // The device.
        let data = DataDirectory(url: folder.appendingPathComponent("data", isDirectory: true))
        try data.prepare()
        let store = try KeyStore(dataDirectory: data.url, machineID: machineID, clock: clock)
        let device = try DeviceIdentity.loadOrCreate(in: data.url)

        var leaseId: String?
        let mode: PackageLayout.KeyMode
        switch keys {
        case .skd:
            mode = .skd
            if !report.keyIDs.isEmpty {
                leaseId = try await acquireLease(
                    assetId: assetId,
                    keyIds: report.keyIDs,
                    server: server,
                    serverClock: serverClock,
                    clock: clock,
                    store: store,
                    device: device
                )
            }
        case .identity(let expiresAt):
            mode = .identity
            for (keyID, key) in registrar.keys {
                try store.storeIdentityKey(
                    key,
                    uri: PackageLayout.identityURI(assetId: assetId, keyID: keyID),
                    assetId: assetId,
                    expiresAt: expiresAt,
                    at: clock.now
                )
            }
        }

        let package = try PackageDirectory(assetId: assetId, in: data)
        let layout = PackageLayout(assetId: assetId, mode: mode, package: package, createdAt: clock.now)
        let manifest = try layout.write(from: report.playlist, sourceURL: clearPlaylist)
        return TestPackage(
            dataDirectory: data,
            package: package,
            manifest: manifest,
            store: store,
            device: device,
            clock: clock,
            clearSource: clearPlaylist,
            leaseId: leaseId,
            keyServerDirectory: server,
            root: folder
        )
    }

    /// Runs a real key server on 127.0.0.1 (OS port), acquires a persistent lease with a real key session, stops the
    /// server: from then on the device is offline.
    private static func acquireLease(
        assetId: String,
        keyIds: [String],
        server: KeyServerDataDirectory,
        serverClock: KeyServerClock,
        clock: TestClock,
        store: KeyStore,
        device: DeviceIdentity
    ) async throws -> String {
        let application = try await KeyServerApplication(dataDirectory: server, clock: serverClock)
        let token = try await server.makeToken(subject: "tester", assets: [assetId], ttl: 365 * 86_400, clock: serverClock)
        let started = try await ListeningServer.start { onListening in try await application.run(port: 0, onListening: onListening) }
        let task = started.task
        defer { task.cancel() }
        let address = try started.listeningAddress()
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let result: Result<String, any Error>
        do {
            let session = KeySession(
                clock: clock,
                http: http,
                store: store,
                device: device,
                serverURL: address.baseURL,
                token: token,
                timeoutSeconds: 10
            )
            let acquisition = try await session.acquire(assetId: assetId, keyIds: keyIds, lease: .persistent)
            result = .success(acquisition.terms.leaseId)
        } catch {
            result = .failure(error)
        }
        try await http.shutdown()
        task.cancel()
        _ = try? await task.value
        return try result.get()
    }
}

/// Registers keys with the key server's data directory under the test policy and the test clock, and remembers
/// them (test material only) so identity delivery can seal them on the device.
private final class RecordingRegistrar: ContentKeyRegistrar, @unchecked Sendable {
    // @unchecked: `recorded` is only touched under `lock`.
    let directory: KeyServerDataDirectory
    let policy: String?
    let clock: KeyServerClock
    private let lock = NSLock()
    private var recorded: [(String, SecretBytes)] = []

    init(directory: KeyServerDataDirectory, policy: String?, clock: KeyServerClock) {
        self.directory = directory
        self.policy = policy
        self.clock = clock
    }

    var keys: [(String, SecretBytes)] { lock.withLock { recorded } }

    func register(assetID: String, keyID: String, key: SecretBytes) async throws {
        try await directory.addAsset(id: assetID, keyID: keyID, key: key, policy: policy, clock: clock)
        lock.withLock { recorded.append((keyID, key)) }
    }
}
