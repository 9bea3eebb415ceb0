import AssetDownload
import AsyncHTTPClient
import DownloadTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import OfflinePackage
import Playback
import StowageCore
import StowageCrypto
import StowageLibrary
import StowageTestSupport
import Testing

/// AES-256 identity keys and keys written into the playlist as `data:` URIs (RFC 2397), as other packagers make them:
/// segments encrypted by `openssl enc` from the committed clear TS fixture, downloaded from the origin, verified deeply
/// and played, every served segment equal to the clear twin byte for byte. No copy of the key, in any encoding, is
/// left in the data directory.
@Suite("AES-256 and inline (data:) keys", .timeLimit(.minutes(5)))
struct KeyMethodTests {
    enum Variant: String, CaseIterable, Sendable {
        /// METHOD=AES-256 with a 32-byte key file.
        case aes256File = "aes256-file"
        /// METHOD=AES-256 with the key inline, base64.
        case aes256Inline = "aes256-inline"
        /// METHOD=AES-128 with the key inline, percent-encoded (no `;base64`).
        case aes128InlinePercent = "aes128-inline-percent"

        var keyLength: Int { self == .aes128InlinePercent ? 16 : 32 }
        var method: String { keyLength == 32 ? "AES-256" : "AES-128" }
    }

    static let clear = DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/media/ts-clear")
    static let iv = "a97e67e7198ca85d61edaef31146d6fc"

    /// Writes `directory/index.m3u8` and its segments: the clear fixture's segments encrypted by `openssl enc` with
    /// `key`, the playlist naming the key as `keyURI` (nil: `key.bin`, written beside them).
    static func encrypt(_ key: [UInt8], method: String, keyURI: String?, into directory: URL) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var playlist = ""
        for line in try String(contentsOf: clear.appendingPathComponent("index.m3u8"), encoding: .utf8).split(separator: "\n") {
            if line.hasPrefix("#EXTINF"), !playlist.contains("EXT-X-KEY") {
                playlist += "#EXT-X-KEY:METHOD=\(method),URI=\"\(keyURI ?? "key.bin")\",IV=0x\(iv)\n"
            }
            if !line.hasPrefix("#") {
                let cipher = key.count == 32 ? "-aes-256-cbc" : "-aes-128-cbc"
                let result = try await ProcessRunner.run(
                    program: "openssl",
                    [
                        "enc", cipher, "-K", Hex.encode(key), "-iv", iv, "-in", clear.appendingPathComponent(String(line)).path, "-out",
                        directory.appendingPathComponent(String(line)).path,
                    ],
                    timeout: .seconds(30)
                )
                #expect(result.status == 0, "openssl: \(String(decoding: result.standardError, as: UTF8.self))")
            }
            playlist += line + "\n"
        }
        if keyURI == nil { try Data(key).write(to: directory.appendingPathComponent("key.bin")) }
        try Data(playlist.utf8).write(to: directory.appendingPathComponent("index.m3u8"))
    }

    static func keyURI(_ variant: Variant, key: [UInt8]) -> String? {
        switch variant {
        case .aes256File: nil
        case .aes256Inline: "data:text/plain;base64,\(Data(key).base64EncodedString())"
        case .aes128InlinePercent: "data:application/octet-stream," + key.map { String(format: "%%%02X", $0) }.joined()
        }
    }

    static func get(_ url: URL) async throws -> (status: Int, body: [UInt8]) {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = http.shutdown() }
        let response = try await http.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(30))
        return (Int(response.status.code), Array(buffer: try await response.body.collect(upTo: 1 << 22)))
    }

    /// Every regular file under `directory`, read whole.
    static func allFiles(under directory: URL) -> [(path: String, bytes: Data)] {
        let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
        var files: [(String, Data)] = []
        while let url = enumerator?.nextObject() as? URL {
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true, let bytes = try? Data(contentsOf: url) else {
                continue
            }
            files.append((url.path, bytes))
        }
        return files
    }

    @Test("downloaded, verified deeply and played: every segment equals the clear twin, the key is nowhere in the clear", arguments: Variant.allCases)
    func downloadVerifyPlay(_ variant: Variant) async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let key = (0..<variant.keyLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        try await Self.encrypt(
            key,
            method: variant.method,
            keyURI: Self.keyURI(variant, key: key),
            into: fixture.originRoot.appendingPathComponent(variant.rawValue)
        )
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let manifest = try await fixture.withServers { origin, _ in
            let request = DownloadRequest(url: origin.appendingPathComponent("\(variant.rawValue)/index.m3u8").absoluteString, assetId: "keys")
            return try await library.download(request).result()
        }
        #expect(manifest.isComplete)
        #expect(manifest.keys.count == 1)
        #expect(manifest.keys.first?.keyLength == (variant.keyLength == 32 ? 32 : nil))
        let report = try await library.verify(assetId: "keys", options: .init(deep: true))
        #expect(report.isPlayable, "\(report)")

        let playback = try await library.play(assetId: "keys", online: false)
        do {
            let video = try #require(manifest.renditions.first)
            for segment in video.segments {
                let file = try #require(segment.file)
                let served = try await Self.get(playback.address.sessionURL.appendingPathComponent(file.path))
                let name = try #require(URL(string: file.sourceURL)?.lastPathComponent)
                #expect(served.status == 200)
                #expect(served.body == Array(try Data(contentsOf: Self.clear.appendingPathComponent(name))), "\(name)")
            }
        } catch {
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()

        // The key, raw, in hex and in base64, appears in no file of the data directory.
        let needles = [
            Data(key), Data(Hex.encode(key).utf8), Data(Hex.encode(key).uppercased().utf8), Data(Data(key).base64EncodedString().utf8),
            Data(key.map { String(format: "%%%02X", $0) }.joined().utf8),
        ]
        for (path, bytes) in Self.allFiles(under: fixture.clientDirectory.url) {
            for needle in needles {
                #expect(bytes.range(of: needle) == nil, "\(path) holds the key")
            }
        }
    }

    @Test("a key of the wrong length for its METHOD is refused before any segment, inline or fetched")
    func wrongLengths() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let short = [UInt8](repeating: 7, count: 16)
        let long = [UInt8](repeating: 9, count: 32)
        // AES-128 whose key URI answers 32 bytes; AES-256 whose inline key has 16; an inline key that is not base64.
        try await Self.encrypt(short, method: "AES-128", keyURI: nil, into: fixture.originRoot.appendingPathComponent("long"))
        try Data(long).write(to: fixture.originRoot.appendingPathComponent("long/key.bin"))
        try await Self.encrypt(
            long,
            method: "AES-256",
            keyURI: Self.keyURI(.aes256Inline, key: short),
            into: fixture.originRoot.appendingPathComponent("short")
        )
        try await Self.encrypt(short, method: "AES-128", keyURI: "data:;base64,@@@@", into: fixture.originRoot.appendingPathComponent("garbled"))
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        try await fixture.withServers { origin, _ in
            for (path, code, phrase) in [
                ("long", "invalid_identity_key", "answered 32 bytes; a key is 16 bytes"),
                ("short", "invalid_inline_key", "holds 16 bytes; this key's method takes 32 bytes"),
                ("garbled", "invalid_inline_key", "base64 data does not decode"),
            ] {
                let request = DownloadRequest(url: origin.appendingPathComponent("\(path)/index.m3u8").absoluteString, assetId: path)
                let error = await #expect(throws: DownloadError.self) { try await library.download(request).result() }
                #expect(error?.code == code, "\(path): \(String(describing: error))")
                #expect(error?.message.contains(phrase) == true, "\(path): \(String(describing: error))")
                #expect(error?.message.contains("data:") == (path != "long"), "\(path): the message names the inline key as such")
                #expect(error?.message.contains("@@@@") == false)
                let record = try library.downloadRecord(assetId: path)
                #expect(record?.state != .completed)
            }
        }
        await library.close()
    }
    @Test("an online variant whose key is inline (data:) streams from the source beside the stored one, equal to the clear twin")
    func onlineVariantWithInlineKey() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let root = fixture.originRoot.appendingPathComponent("inline")
        let stored = (0..<16).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 3) }
        let online = (0..<16).map { UInt8(truncatingIfNeeded: $0 &* 53 &+ 7) }
        try await Self.encrypt(
            stored,
            method: "AES-128",
            keyURI: Self.keyURI(.aes128InlinePercent, key: stored),
            into: root.appendingPathComponent("hi")
        )
        try await Self.encrypt(
            online,
            method: "AES-128",
            keyURI: Self.keyURI(.aes128InlinePercent, key: online),
            into: root.appendingPathComponent("lo")
        )
        let master = """
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=900000,RESOLUTION=192x108,CODECS="avc1.4d400b,mp4a.40.2"
            hi/index.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=192x108,CODECS="avc1.4d400b,mp4a.40.2"
            lo/index.m3u8

            """
        try Data(master.utf8).write(to: root.appendingPathComponent("master.m3u8"))
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        try await fixture.withServers { origin, _ in
            let request = DownloadRequest(url: origin.appendingPathComponent("inline/master.m3u8").absoluteString, assetId: "inline")
            let manifest = try await library.download(request).result()
            #expect(manifest.renditions.map(\.bandwidth) == [900_000], "the higher variant is stored")
            let playback = try await library.play(assetId: "inline")
            do {
                #expect(playback.onlineRenditions.count == 1, "\(playback.onlineRenditions)")
                let served = try await Self.get(playback.address.sessionMultivariantURL)
                let text = String(decoding: served.body, as: UTF8.self)
                let onlinePath = try #require(text.split(separator: "\n").first { $0.contains("/online-") && $0.hasSuffix(".m3u8") })
                let playlistURL = try #require(URL(string: String(onlinePath), relativeTo: playback.address.sessionMultivariantURL)?.absoluteURL)
                let playlist = String(decoding: try await Self.get(playlistURL).body, as: UTF8.self)
                #expect(!playlist.contains("EXT-X-KEY") && !playlist.contains("data:"), "the served playlist names no key")
                let segments = playlist.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
                #expect(segments.count == 3)
                for (index, segment) in segments.enumerated() {
                    let body = try await Self.get(try #require(URL(string: String(segment), relativeTo: playlistURL)?.absoluteURL))
                    #expect(body.status == 200)
                    #expect(body.body == Array(try Data(contentsOf: Self.clear.appendingPathComponent("seg_\(index).ts"))), "online segment \(index)")
                }
            } catch {
                await playback.stop()
                throw error
            }
            await playback.stop()
        }
        await library.close()
    }
}
