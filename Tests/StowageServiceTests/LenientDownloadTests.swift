import AssetDownload
import DownloadTestSupport
import Foundation
import HLS
import OfflinePackage
import Playback
import StowageCrypto
import StowageLibrary
import StowageTestSupport
import Testing

/// A source whose playlists break RFC 8216bis as real packagers do (a byte order mark, CRLF and a blank line before
/// `#EXTM3U`, EXT-X-KEY in the multivariant playlist, `BANDWIDTH=800000.0`, a backslash in a URI, no
/// EXT-X-TARGETDURATION, a negative media sequence, METHOD=NONE with a URI, an IV without `0x`, an IPTV-style
/// EXTINF) over ffmpeg's AES-128 segments: downloaded, verified and played like any other, each deviation reported
/// in the download's events and the manifest.
@Suite("Lenient playlists downloaded", .timeLimit(.minutes(5)))
struct LenientDownloadTests {
    static let media = DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/media")

    static func makeSource(in directory: URL) throws {
        let folder = directory.appendingPathComponent("media")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for name in ["seg_0.ts", "seg_1.ts", "seg_2.ts", "aes128.test.key"] {
            try FileManager.default.copyItem(at: media.appendingPathComponent("ts-aes128-iv/\(name)"), to: folder.appendingPathComponent(name))
        }
        let master =
            "\u{FEFF}\r\n#EXTM3U\r\n#EXT-X-KEY:METHOD=AES-128,URI=\"media/aes128.test.key\"\r\n"
            + "#EXT-X-STREAM-INF:BANDWIDTH=800000.0,RESOLUTION=320x240\r\nmedia\\index.m3u8\r\n"
        try Data(master.utf8).write(to: directory.appendingPathComponent("master.m3u8"))
        let playlist = [
            "#EXTM3U", "#EXT-X-MEDIA-SEQUENCE:-1", "#EXT-X-KEY:METHOD=NONE,URI=\"none.key\"",
            "#EXT-X-KEY:METHOD=AES-128,URI=\"aes128.test.key\",IV=a97e67e7198ca85d61edaef31146d6fc",
            "#EXTINF:2.000000 tvg-id=\"first\",first", "seg_0.ts", "#EXTINF:2.000000,", "seg_1.ts", "#EXTINF:2.000000,", "seg_2.ts",
            "#EXT-X-ENDLIST",
        ]
        try Data((playlist.joined(separator: "\n") + "\n").utf8).write(to: folder.appendingPathComponent("index.m3u8"))
    }

    @Test("downloaded, verified and played: segments equal the clear twin; every deviation in the events and the manifest")
    func download() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try Self.makeSource(in: fixture.originRoot.appendingPathComponent("quirky"))
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let (manifest, events) = try await fixture.withServers { origin, _ in
            let masterURL = origin.appendingPathComponent("quirky/master.m3u8")
            // A validator refuses the playlist; a player (and Stowage by default) reads it.
            await #expect(throws: PlaylistLoadError.self) { try await OfflineLibrary.inspect(masterURL.absoluteString, strict: true) }
            let inspection = try await OfflineLibrary.inspect(masterURL.absoluteString, deep: true)
            #expect(inspection.warnings.map(\.line) == [1, 2, 3, 4, 5])
            #expect(inspection.mediaPlaylists?.first?.warnings.count == 5)

            let task = try await library.download(DownloadRequest(url: masterURL.absoluteString, assetId: "quirky"))
            var events: [DownloadEvent] = []
            for await event in task.events { events.append(event) }
            return (try await task.result(), events)
        }
        #expect(manifest.isComplete)
        let warnings = try #require(manifest.playlistWarnings)
        #expect(Set(warnings.map { URL(string: $0.playlist)?.lastPathComponent }) == ["master.m3u8", "index.m3u8"])
        #expect(warnings.count == 10, "\(warnings)")
        #expect(warnings.contains { $0.message.contains("EXT-X-KEY belongs in media playlists") })
        #expect(warnings.contains { $0.message.contains("no EXT-X-TARGETDURATION") && $0.line == 0 })
        let reported = events.compactMap { if case .playlistWarnings(let list) = $0 { list } else { nil } }
        #expect(reported == [warnings])
        // The package's own playlists are valid: the master names no key, the media playlist has a target duration.
        let package = try PackageDirectory(assetId: "quirky", in: fixture.clientDirectory)
        let localMaster = try String(contentsOf: package.url.appendingPathComponent("master.m3u8"), encoding: .utf8)
        #expect(!localMaster.contains("EXT-X-KEY"))
        #expect(try String(contentsOf: package.url.appendingPathComponent("video/index.m3u8"), encoding: .utf8).contains("#EXT-X-TARGETDURATION:2"))

        #expect(try await library.verify(assetId: "quirky", options: .init(deep: true)).isPlayable)
        let playback = try await library.play(assetId: "quirky", online: false)
        do {
            for (index, segment) in try #require(manifest.renditions.first).segments.enumerated() {
                let served = try await KeyMethodTests.get(playback.address.sessionURL.appendingPathComponent(try #require(segment.file).path))
                #expect(served.status == 200)
                #expect(served.body == Array(try Data(contentsOf: Self.media.appendingPathComponent("ts-clear/seg_\(index).ts"))))
            }
        } catch {
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()
    }
    /// ffmpeg's h264+AAC stream cut into three segments at packet boundaries inside PES packets (as byte-count
    /// segmenters cut), each encrypted with `openssl enc` AES-128.
    static func makeSpanningSource(in directory: URL) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let bytes = Array(try Data(contentsOf: media.appendingPathComponent("src/h264_aac.ts")))
        let packetCount = bytes.count / 188
        func continues(_ index: Int) -> Bool {
            let pid = (Int(bytes[index * 188 + 1]) & 0x1F) << 8 | Int(bytes[index * 188 + 2])
            return bytes[index * 188 + 1] & 0x40 == 0 && pid > 0x20 && pid != 0x1FFF
        }
        let cuts = [packetCount / 3, 2 * packetCount / 3].compactMap { from in (from..<packetCount).first(where: continues) }
        #expect(cuts.count == 2)
        let key = "000102030405060708090a0b0c0d0e0f"
        let iv = "0f0e0d0c0b0a09080706050403020100"
        try Data(Hex.decode(key)!).write(to: directory.appendingPathComponent("k.key"))
        var playlist = "#EXTM3U\n#EXT-X-TARGETDURATION:3\n#EXT-X-KEY:METHOD=AES-128,URI=\"k.key\",IV=0x\(iv)\n"
        for (index, range) in zip([0] + cuts, cuts + [packetCount]).enumerated() {
            let clear = directory.appendingPathComponent("clear\(index).ts")
            try Data(bytes[(range.0 * 188)..<(range.1 * 188)]).write(to: clear)
            let result = try await ProcessRunner.run(
                program: "openssl",
                ["enc", "-aes-128-cbc", "-K", key, "-iv", iv, "-in", clear.path, "-out", directory.appendingPathComponent("s\(index).ts").path],
                timeout: .seconds(30)
            )
            #expect(result.status == 0)
            try FileManager.default.removeItem(at: clear)
            playlist += "#EXTINF:2,\ns\(index).ts\n"
        }
        try Data((playlist + "#EXT-X-ENDLIST\n").utf8).write(to: directory.appendingPathComponent("index.m3u8"))
    }

    @Test("segments that split PES packets: verify --deep finds them sound and ffmpeg decodes the source's frames from play")
    func pesSpanningSegments() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await Self.makeSpanningSource(in: fixture.originRoot.appendingPathComponent("spanning"))
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let manifest = try await fixture.withServers { origin, _ in
            let request = DownloadRequest(url: origin.appendingPathComponent("spanning/index.m3u8").absoluteString, assetId: "spanning")
            return try await library.download(request).result()
        }
        #expect(manifest.isComplete)
        let report = try await library.verify(assetId: "spanning", options: .init(deep: true))
        #expect(report.isPlayable, "\(report)")
        let expected = try await ByteRangePlaybackTests.frames(Self.media.appendingPathComponent("src/h264_aac.ts").path, hls: false)
        #expect(expected.count == 144)
        let playback = try await library.play(assetId: "spanning", online: false)
        let played: [String]
        do {
            played = try await ByteRangePlaybackTests.frames(playback.address.sessionMultivariantURL.absoluteString)
        } catch {
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()
        #expect(played == expected)
    }
}
