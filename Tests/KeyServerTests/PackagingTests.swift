import Foundation
import HLS
import KeyDelivery
import OfflinePackage
import Packaging
import StowageCore
import StowageCrypto
import StowageTestSupport
import Testing

@testable import KeyServer

/// `ContentPackager` on real clear media: the playlists it writes, the keys it registers, and round trips through
/// `PlaylistDecryption` and ffmpeg.
struct PackagingTests {
    static let media = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/media")
    static let tsClear = media.appendingPathComponent("shaka/ts-clear-aac")
    static let fmp4Clear = media.appendingPathComponent("fmp4-clear")

    /// A temporary folder holding a fresh key server data directory (`keyserver/`) and the output (`out/`).
    struct Workspace {
        let root: URL
        let directory: KeyServerDataDirectory
        var out: URL { root.appendingPathComponent("out") }

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-package-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            directory = try KeyServerDataDirectory.initialize(at: root.appendingPathComponent("keyserver").path)
        }

        func remove() { try? FileManager.default.removeItem(at: root) }

        func package(_ playlist: URL, asset: String, method: ContentPackager.Method, rotation: Int? = nil) async throws -> ContentPackager.Report {
            let packager = ContentPackager(
                assetID: asset,
                method: method,
                outputDirectory: out,
                rotationPeriod: rotation,
                keyServerURL: "https://keys.example/",
                registrar: KeyRegistrar(directory.register)
            )
            return try await packager.package(playlistAt: playlist)
        }

        /// The content key as the key server holds it, unsealed with the master key.
        func storedKey(asset: String, keyID: String) async throws -> SecretBytes {
            let store = try directory.openStore()
            let record = try #require(try await store.contentKeys(assetID: asset, keyIDs: [keyID]).first)
            return try ContentKeySealer(masterKey: directory.loadMasterKey()).open(record)
        }
    }

    static func bytes(_ url: URL) throws -> Data { try Data(contentsOf: url) }

    static func keyTags(_ url: URL) throws -> [EncryptionKey] {
        let parsed = try PlaylistParser.parse(Array(try bytes(url)), url: url)
        guard case .media(let playlist) = parsed.playlist else { return [] }
        return playlist.segments.flatMap(\.tags).compactMap { if case .key(let key) = $0 { key } else { nil } }
    }

    @Test func sampleAESTransportStreamPlaylistsCarrySKDKeysAndDecryptToTheClearInput() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let report = try await workspace.package(Self.tsClear.appendingPathComponent("master.m3u8"), asset: "demo-ts", method: .sampleAES)
        #expect(report.renditions.map(\.playlist) == ["video.m3u8", "audio.m3u8"])
        #expect(report.keyIDs.count == 1)
        let keyID = try #require(report.keyIDs.first)

        // (a) The multivariant playlist carries the session key and the key server; each media playlist its key.
        let master = try PlaylistParser.parse(Array(try Self.bytes(workspace.out.appendingPathComponent("master.m3u8"))))
        guard case .multivariant(let multivariant) = master.playlist else {
            Issue.record("the written master.m3u8 is not a multivariant playlist")
            return
        }
        #expect(multivariant.sessionKeys.map(\.uri) == ["skd://demo-ts/\(keyID)"])
        #expect(multivariant.sessionKeys.first?.keyFormat == ContentPackager.keyFormat)
        #expect(multivariant.sessionData.contains { $0.dataID == "com.stowage.key-server" && $0.value == "https://keys.example/" })
        let key = try await workspace.storedKey(asset: "demo-ts", keyID: keyID)
        for name in ["video", "audio"] {
            let playlist = workspace.out.appendingPathComponent("\(name).m3u8")
            let tags = try Self.keyTags(playlist)
            #expect(tags.count == 1)
            #expect(tags.first?.method == .sampleAES)
            #expect(tags.first?.uri == "skd://demo-ts/\(keyID)")
            #expect(tags.first?.keyFormat == "com.stowage.skd")
            #expect(tags.first?.keyFormatVersions == "1")
            #expect(tags.first?.ivBytes?.count == 16)

            // (b) Decrypting with the key from the key server's store gives back the clear segments.
            let clearCopy = workspace.root.appendingPathComponent("clear-\(name)")
            let decrypted = try PlaylistDecryption(key: key).decrypt(playlistAt: playlist, to: clearCopy)
            #expect(decrypted.segments == 3)
            for index in 1...3 {
                let segment = "\(name)_\(index).ts"
                let encrypted = try Self.bytes(workspace.out.appendingPathComponent(segment))
                let clear = try Self.bytes(Self.tsClear.appendingPathComponent(segment))
                #expect(encrypted != clear, "\(segment) was not encrypted")
                #expect(try Self.bytes(clearCopy.appendingPathComponent(segment)) == clear, "\(segment) differs")
            }
        }
        // (e) No key bytes anywhere in the output.
        try Self.expectNoKeyBytes(key, in: workspace.out)
    }

    @Test func aes128FragmentedMP4RoundTripsByteForByteIncludingTheInitSection() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let report = try await workspace.package(Self.fmp4Clear.appendingPathComponent("index.m3u8"), asset: "demo-fmp4", method: .aes128)
        let keyID = try #require(report.keyIDs.first)
        #expect(report.keyIDs.count == 1)
        let playlist = workspace.out.appendingPathComponent("index.m3u8")
        let text = String(decoding: try Self.bytes(playlist), as: UTF8.self)
        // The key comes before the EXT-X-MAP, so the init section is encrypted with it.
        let keyLine = try #require(text.range(of: "#EXT-X-KEY:METHOD=AES-128"))
        let mapLine = try #require(text.range(of: "#EXT-X-MAP"))
        #expect(keyLine.lowerBound < mapLine.lowerBound)
        #expect(try Self.keyTags(playlist).first?.ivBytes?.count == 16)
        #expect(
            try Self.bytes(workspace.out.appendingPathComponent("init.mp4")) != (try Self.bytes(Self.fmp4Clear.appendingPathComponent("init.mp4")))
        )

        let key = try await workspace.storedKey(asset: "demo-fmp4", keyID: keyID)
        let clearCopy = workspace.root.appendingPathComponent("clear")
        let decrypted = try PlaylistDecryption(key: key).decrypt(playlistAt: playlist, to: clearCopy)
        #expect(decrypted.initializationSections == 1)
        for name in ["init.mp4", "seg_0.m4s", "seg_1.m4s", "seg_2.m4s"] {
            #expect(
                try Self.bytes(clearCopy.appendingPathComponent(name)) == (try Self.bytes(Self.fmp4Clear.appendingPathComponent(name))),
                "\(name)"
            )
        }
        try Self.expectNoKeyBytes(key, in: workspace.out)
    }

    @Test func rotationEverySegmentRegistersOneKeyPerSegment() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let report = try await workspace.package(
            Self.tsClear.appendingPathComponent("video.m3u8"),
            asset: "demo-rotated",
            method: .sampleAES,
            rotation: 1
        )
        #expect(report.keyIDs.count == 3)
        #expect(Set(report.keyIDs).count == 3)
        let tags = try Self.keyTags(workspace.out.appendingPathComponent("video.m3u8"))
        #expect(tags.count == 3)
        #expect(tags.compactMap(\.uri) == report.keyIDs.map { "skd://demo-rotated/\($0)" })
        #expect(Set(tags.compactMap(\.iv)).count == 3)
        for keyID in report.keyIDs {
            let key = try await workspace.storedKey(asset: "demo-rotated", keyID: keyID)
            #expect(key.count == 16)
            try Self.expectNoKeyBytes(key, in: workspace.out)
        }
    }

    @Test func sampleAESFragmentedMP4RefusesRotation() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let error = await #expect(throws: ContentPackagingError.self) {
            try await workspace.package(Self.fmp4Clear.appendingPathComponent("index.m3u8"), asset: "demo-cbcs", method: .sampleAES, rotation: 1)
        }
        #expect(error?.code == "unsupported_input")
        // Nothing was registered for the refused asset.
        #expect(try await workspace.directory.openStore().asset(id: "demo-cbcs") == nil)
    }

    @Test func ffmpegPlaysAPackagedSampleAESRendition() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let report = try await workspace.package(Self.tsClear.appendingPathComponent("video.m3u8"), asset: "demo-ffmpeg", method: .sampleAES)
        let keyID = try #require(report.keyIDs.first)
        let key = try await workspace.storedKey(asset: "demo-ffmpeg", keyID: keyID)

        // A player's view of the rendition: the same segments, the key URI pointing at a local key file.
        let play = workspace.root.appendingPathComponent("play")
        try FileManager.default.createDirectory(at: play, withIntermediateDirectories: true)
        for index in 1...3 {
            try FileManager.default.copyItem(
                at: workspace.out.appendingPathComponent("video_\(index).ts"),
                to: play.appendingPathComponent("video_\(index).ts")
            )
        }
        try key.withUnsafeBytes { try Data($0).write(to: play.appendingPathComponent("key.bin")) }
        let text = String(decoding: try Self.bytes(workspace.out.appendingPathComponent("video.m3u8")), as: UTF8.self)
            .replacingOccurrences(of: "skd://demo-ffmpeg/\(keyID)", with: "key.bin")
            .replacingOccurrences(of: ",KEYFORMAT=\"com.stowage.skd\",KEYFORMATVERSIONS=\"1\"", with: "")
        try Data(text.utf8).write(to: play.appendingPathComponent("video.m3u8"))

        let clear = try await FrameHashes.of(Self.tsClear.appendingPathComponent("video.m3u8"))
        let packaged = try await FrameHashes.of(play.appendingPathComponent("video.m3u8"))
        #expect(!clear.isEmpty)
        #expect(packaged.count == clear.count)
        // ffmpeg's SAMPLE-AES reader may garble the last packet of a segment; allow one difference per segment.
        let differing = zip(clear, packaged).filter { $0 != $1 }.count
        #expect(differing <= 3, "\(differing) of \(clear.count) packets differ")
    }

    /// Scans every file under `folder` for the key's bytes, raw and as hex.
    static func expectNoKeyBytes(_ key: SecretBytes, in folder: URL) throws {
        let raw = key.withUnsafeBytes { Data($0) }
        let hex = Data(Hex.encode(raw).utf8)
        let upperHex = Data(Hex.encode(raw).uppercased().utf8)
        let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        #expect(!files.isEmpty)
        for file in files where !file.hasDirectoryPath {
            let contents = try Data(contentsOf: file)
            for needle in [raw, hex, upperHex] {
                #expect(contents.range(of: needle) == nil, "key bytes found in \(file.lastPathComponent)")
            }
        }
    }
}
