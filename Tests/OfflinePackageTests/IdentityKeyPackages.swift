import Foundation
import KeyDelivery
import OfflinePackage
import StowageCrypto

/// Offline packages laid out by hand from the committed AES-128 fixtures (Fixtures/media), with their identity keys
/// sealed in a real key store: enough for verification, the catalog and deletion without a key server.
struct IdentityKeyPackages {
    static let media = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/media")

    /// Keys and IVs from Keys/media-fixtures.test.json.
    enum Fixture: String, CaseIterable, Sendable {
        /// MPEG-TS, AES-128, one key, an explicit IV.
        case transportStream = "ts-aes128-iv"
        /// fMP4, AES-128: an encrypted init section, then a key rotation with IVs from the media sequence number.
        case fragmentedMP4 = "fmp4-aes128-openssl"
    }

    static let testMachineID = MachineID("0123456789abcdef0123456789abcdef")
    static let start: Int64 = 1_763_700_000

    let root: URL
    let dataDirectory: DataDirectory
    let store: KeyStore
    let device: DeviceIdentity
    let clock: TestClock

    /// A fresh data directory with its key store and device identity.
    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-verify-\(UUID().uuidString)")
        dataDirectory = DataDirectory(url: root.appendingPathComponent("data"))
        try dataDirectory.prepare()
        store = try KeyStore(dataDirectory: dataDirectory.url, machineID: Self.testMachineID, clock: TestClock(now: 0))
        device = try DeviceIdentity.loadOrCreate(in: dataDirectory.url)
        clock = TestClock(now: Self.start)
    }

    func remove() {
        try? FileManager.default.removeItem(at: root)
    }

    /// The key URI a fixture's key is stored under.
    static func keyURI(_ name: String, asset: String) -> String { "https://keys.example.test/\(asset)/\(name)" }

    /// Lays out a complete package of `fixture` for `assetId` and stores its keys (with `keyExpiresAt` as their local
    /// lifetime).
    @discardableResult
    func make(
        _ fixture: Fixture,
        assetId: String,
        title: String? = nil,
        keyExpiresAt: Int64? = nil
    ) throws -> (package: PackageDirectory, manifest: PackageManifest) {
        let package = try PackageDirectory(assetId: assetId, in: dataDirectory)
        let folder = package.url.appendingPathComponent("video")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let source = Self.media.appendingPathComponent(fixture.rawValue)

        var keys: [PackageKey] = []
        var keyIds: [String: String] = [:]
        func addKey(_ file: String, hex: String) throws {
            let uri = Self.keyURI(file, asset: assetId)
            let id = PackageKeyring.identityKeyID(uri: uri)
            keys.append(PackageKey(keyId: id, kind: .identity, uri: uri, keyFormat: "identity"))
            keyIds[file] = id
            try store.storeIdentityKey(SecretBytes(Hex.decode(hex)!), uri: uri, assetId: assetId, expiresAt: keyExpiresAt, at: clock.now)
        }
        func file(_ name: String, key: String?, iv: String) throws -> PackageFile {
            let bytes = try Data(contentsOf: source.appendingPathComponent(name))
            try bytes.write(to: folder.appendingPathComponent(name))
            return PackageFile(
                path: "video/\(name)",
                sourceURL: "https://origin.example.test/\(fixture.rawValue)/\(name)",
                size: Int64(bytes.count),
                sha256: Hex.encode(SHA256Hasher.hash(Array(bytes))),
                key: key.map { PackageSegmentKey(method: "AES-128", keyId: keyIds[$0]!, iv: iv) }
            )
        }

        var initSections: [PackageFile] = []
        var segments: [PackageSegment] = []
        switch fixture {
        case .transportStream:
            try addKey("aes128.test.key", hex: "618e0c850d814906461491ad97089fea")
            for index in 0..<3 {
                let stored = try file("seg_\(index).ts", key: "aes128.test.key", iv: "a97e67e7198ca85d61edaef31146d6fc")
                segments.append(PackageSegment(index: index, duration: 2, mediaSequence: index, discontinuitySequence: 0, file: stored))
            }
        case .fragmentedMP4:
            try addKey("k1.test.key", hex: "19129430d22103c46f9df16c1effa114")
            try addKey("k2.test.key", hex: "3ed8ff698a69a171146d738fa94921fe")
            initSections.append(try file("init.mp4", key: "k1.test.key", iv: "6cfdf5ce6856ed2d7622d3671d1ea344"))
            let ivs = ["6cfdf5ce6856ed2d7622d3671d1ea344", "00000000000000000000000000000001", "00000000000000000000000000000002"]
            for index in 0..<3 {
                let stored = try file("seg_\(index).m4s", key: index == 0 ? "k1.test.key" : "k2.test.key", iv: ivs[index])
                segments.append(
                    PackageSegment(index: index, duration: 2, mediaSequence: index, discontinuitySequence: 0, initSection: 0, file: stored)
                )
            }
        }
        let rendition = PackageRendition(
            id: "video",
            kind: .video,
            name: "video",
            isDefault: true,
            bandwidth: 800_000,
            sourceURL: "https://origin.example.test/\(fixture.rawValue)/index.m3u8",
            playlist: "video/index.m3u8",
            duration: 6,
            isComplete: true,
            initSections: initSections,
            segments: segments
        )
        let manifest = PackageManifest(
            assetId: assetId,
            title: title,
            sourceURL: "https://origin.example.test/\(fixture.rawValue)/index.m3u8",
            createdAt: clock.now,
            keys: keys,
            renditions: [rendition]
        )
        try package.writeManifest(manifest)
        return (package, manifest)
    }

    /// Rewrites the manifest of `package` through `change`.
    func editManifest(_ package: PackageDirectory, _ change: (inout PackageManifest) -> Void) throws {
        var manifest = try package.readManifest()
        change(&manifest)
        try package.writeManifest(manifest)
    }

    /// A verifier over this data directory.
    func verifier(deep: Bool = false, duration: Int64? = nil) -> PackageVerifier {
        PackageVerifier(store: store, device: device, clock: clock, options: .init(deep: deep, duration: duration))
    }

    /// The absolute URL of a package file.
    static func url(_ package: PackageDirectory, _ path: String) -> URL {
        package.url.appendingPathComponent(path)
    }

    /// Flips one byte of a file in place (the size stays).
    static func flipByte(_ url: URL, at offset: Int) throws {
        var bytes = try Data(contentsOf: url)
        bytes[offset] ^= 0xFF
        try bytes.write(to: url)
    }
}
