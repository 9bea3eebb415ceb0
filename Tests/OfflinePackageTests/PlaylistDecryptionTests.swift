import Foundation
import HLS
import MediaCrypto
import OfflinePackage
import StowageCore
import StowageCrypto
import StowageTestSupport
import Testing

/// `PlaylistDecryption` against media encrypted by ffmpeg, openssl enc and Shaka Packager, checked byte for byte
/// against the clear twins those tools made from the same input.
struct PlaylistDecryptionTests {
    static let media = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/media")

    private static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-pd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private static func bytes(_ url: URL) throws -> [UInt8] { Array(try Data(contentsOf: url)) }

    @Test(arguments: [
        ("ts-aes128-iv", ["seg_0.ts": "seg_0.ts", "seg_1.ts": "seg_1.ts", "seg_2.ts": "seg_2.ts"]),
        // IV from the media sequence number (7, 8, 9), no IV attribute.
        ("ts-aes128-msn", ["seg_7.ts": "seg_0.ts", "seg_8.ts": "seg_1.ts", "seg_9.ts": "seg_2.ts"]),
    ])
    func wholeSegmentTransportStreamsMatchTheClearTwinByteForByte(fixture: String, twins: [String: String]) throws {
        let out = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: out) }
        let report = try PlaylistDecryption().decrypt(
            playlistAt: Self.media.appendingPathComponent("\(fixture)/index.m3u8"),
            to: out
        )
        #expect(report.segments == 3)
        for (name, twin) in twins {
            #expect(try Self.bytes(out.appendingPathComponent(name)) == Self.bytes(Self.media.appendingPathComponent("ts-clear/\(twin)")))
        }
        let written = try PlaylistParser.parse(Self.bytes(report.playlist))
        guard case .media(let playlist) = written.playlist else {
            Issue.record("expected a media playlist")
            return
        }
        #expect(playlist.segments.map(\.uri) == twins.keys.sorted())
        #expect(playlist.distinctKeys.isEmpty)
        #expect(try !FileManager.default.contentsOfDirectory(atPath: out.path).contains { $0.hasPrefix(".") && $0.hasSuffix(".tmp") })
    }

    /// ffmpeg's AES-128 segments with the key written into the playlist as a data: URI, base64 and percent-encoded.
    @Test(arguments: [
        "data:text/plain;base64,YY4MhQ2BSQZGFJGtlwif6g==", "data:;base64,YY4MhQ2BSQZGFJGtlwif6g",
        "data:application/octet-stream,%61%8e%0c%85%0d%81%49%06%46%14%91%ad%97%08%9f%ea",
    ])
    func inlineKeys(uri: String) throws {
        let source = try Self.temporaryDirectory()
        let out = try Self.temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: source)
            try? FileManager.default.removeItem(at: out)
        }
        let fixture = Self.media.appendingPathComponent("ts-aes128-iv")
        for name in ["seg_0.ts", "seg_1.ts", "seg_2.ts"] {
            try FileManager.default.copyItem(at: fixture.appendingPathComponent(name), to: source.appendingPathComponent(name))
        }
        let playlist = try String(contentsOf: fixture.appendingPathComponent("index.m3u8"), encoding: .utf8)
            .replacingOccurrences(of: "URI=\"aes128.test.key\"", with: "URI=\"\(uri)\"")
        #expect(playlist.contains(uri))
        try Data(playlist.utf8).write(to: source.appendingPathComponent("index.m3u8"))
        let report = try PlaylistDecryption().decrypt(playlistAt: source.appendingPathComponent("index.m3u8"), to: out)
        #expect(report.segments == 3)
        for name in ["seg_0.ts", "seg_1.ts", "seg_2.ts"] {
            #expect(try Self.bytes(out.appendingPathComponent(name)) == Self.bytes(Self.media.appendingPathComponent("ts-clear/\(name)")))
        }
    }

    @Test func anInlineKeyOfTheWrongLengthIsRefusedWithoutShowingIt() throws {
        let source = try Self.temporaryDirectory()
        let out = try Self.temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: source)
            try? FileManager.default.removeItem(at: out)
        }
        try FileManager.default.copyItem(
            at: Self.media.appendingPathComponent("ts-aes128-iv/seg_0.ts"),
            to: source.appendingPathComponent("seg_0.ts")
        )
        let uri = "data:;base64,YY4MhQ2BSQZGFJGtlwif6g=="
        try Data(
            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-256,URI=\"\(uri)\"\n#EXTINF:2,\nseg_0.ts\n#EXT-X-ENDLIST\n".utf8
        ).write(to: source.appendingPathComponent("index.m3u8"))
        let error = #expect(throws: PlaylistDecryptionError.self) {
            try PlaylistDecryption().decrypt(playlistAt: source.appendingPathComponent("index.m3u8"), to: out)
        }
        #expect(error?.code == "invalid_inline_key")
        #expect(error?.description.contains("holds 16 bytes; this key's method takes 32 bytes") == true)
        #expect(error?.description.contains("YY4M") == false)
    }

    @Test func encryptedInitSectionAndKeyRotationInFragmentedMP4() throws {
        let out = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: out) }
        let report = try PlaylistDecryption().decrypt(
            playlistAt: Self.media.appendingPathComponent("fmp4-aes128-openssl/index.m3u8"),
            to: out
        )
        #expect(report.segments == 3)
        #expect(report.initializationSections == 1)
        for name in ["init.mp4", "seg_0.m4s", "seg_1.m4s", "seg_2.m4s"] {
            #expect(
                try Self.bytes(out.appendingPathComponent(name)) == Self.bytes(Self.media.appendingPathComponent("fmp4-clear/\(name)")),
                "\(name)"
            )
        }
    }

    /// Segments decrypted on several threads at once: every output equals ffmpeg's clear twin; when segments fail, the
    /// error names the first failing one in playlist order, whichever thread met it first, and no file is left
    /// half-written.
    @Test(arguments: [1, 4])
    func manySegmentsOnSeveralThreads(workers: Int) throws {
        let source = try Self.temporaryDirectory()
        let out = try Self.temporaryDirectory()
        let failed = try Self.temporaryDirectory()
        defer {
            for directory in [source, out, failed] { try? FileManager.default.removeItem(at: directory) }
        }
        let fixture = Self.media.appendingPathComponent("ts-aes128-iv")
        var playlist = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128,URI=\"aes128.test.key\",IV=0xa97e67e7198ca85d61edaef31146d6fc\n"
        for index in 0..<24 {
            try FileManager.default.copyItem(
                at: fixture.appendingPathComponent("seg_\(index % 3).ts"),
                to: source.appendingPathComponent("seg_\(index).ts")
            )
            playlist += "#EXTINF:2,\nseg_\(index).ts\n"
        }
        try FileManager.default.copyItem(at: fixture.appendingPathComponent("aes128.test.key"), to: source.appendingPathComponent("aes128.test.key"))
        try Data((playlist + "#EXT-X-ENDLIST\n").utf8).write(to: source.appendingPathComponent("index.m3u8"))

        let report = try PlaylistDecryption(workers: workers).decrypt(playlistAt: source.appendingPathComponent("index.m3u8"), to: out)
        #expect(report.segments == 24)
        for index in 0..<24 {
            #expect(
                try Self.bytes(out.appendingPathComponent("seg_\(index).ts"))
                    == Self.bytes(Self.media.appendingPathComponent("ts-clear/seg_\(index % 3).ts")),
                "seg_\(index).ts"
            )
        }

        // Two damaged segments: a cut-off one (7) and one whose last block is changed (19).
        let cut = source.appendingPathComponent("seg_7.ts")
        try Data(try Self.bytes(cut).prefix(1000)).write(to: cut)
        let changed = source.appendingPathComponent("seg_19.ts")
        var bytes = try Self.bytes(changed)
        bytes[bytes.count - 1] ^= 0xff
        try Data(bytes).write(to: changed)
        let error = #expect(throws: PlaylistDecryptionError.self) {
            try PlaylistDecryption(workers: workers).decrypt(playlistAt: source.appendingPathComponent("index.m3u8"), to: failed)
        }
        #expect(error?.code == "truncated_segment")
        #expect(error?.description.contains("seg_7.ts") == true)
        let written = try FileManager.default.contentsOfDirectory(atPath: failed.path)
        #expect(!written.contains { $0.hasPrefix(".") && $0.hasSuffix(".tmp") } && !written.contains("seg_7.ts") && !written.contains("index.m3u8"))
        for name in written {
            let index = try #require(Int(name.dropFirst(4).dropLast(3)))
            #expect(
                try Self.bytes(failed.appendingPathComponent(name)) == Self.bytes(Self.media.appendingPathComponent("ts-clear/seg_\(index % 3).ts"))
            )
        }
    }

    @Test func anExplicitKeyOverridesTheKeyURIs() throws {
        let out = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: out) }
        let key = try #require(Hex.decode("618e0c850d814906461491ad97089fea"))
        _ = try PlaylistDecryption(key: SecretBytes(key)).decrypt(
            playlistAt: Self.media.appendingPathComponent("ts-aes128-iv/index.m3u8"),
            to: out
        )
        #expect(try Self.bytes(out.appendingPathComponent("seg_1.ts")) == Self.bytes(Self.media.appendingPathComponent("ts-clear/seg_1.ts")))
    }

    @Test func aWrongKeyIsATypedErrorNamingTheSegmentAndLeavesNoPartialFile() throws {
        let out = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: out) }
        // The real key with its last byte changed: the padding check fails on the first segment.
        let key = try #require(Hex.decode("618e0c850d814906461491ad97089fe0"))
        do {
            _ = try PlaylistDecryption(key: SecretBytes(key)).decrypt(
                playlistAt: Self.media.appendingPathComponent("ts-aes128-iv/index.m3u8"),
                to: out
            )
            Issue.record("decryption with a wrong key succeeded")
        } catch {
            #expect(error.code == "bad_padding")
            #expect(error.description.contains("seg_0.ts"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).isEmpty)
    }

    @Test func aMissingKeyFileIsATypedError() throws {
        let source = try Self.temporaryDirectory()
        let out = try Self.temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: source)
            try? FileManager.default.removeItem(at: out)
        }
        for name in ["index.m3u8", "seg_0.ts", "seg_1.ts", "seg_2.ts"] {
            try FileManager.default.copyItem(
                at: Self.media.appendingPathComponent("ts-aes128-iv/\(name)"),
                to: source.appendingPathComponent(name)
            )
        }
        do {
            _ = try PlaylistDecryption().decrypt(playlistAt: source.appendingPathComponent("index.m3u8"), to: out)
            Issue.record("decryption without the key file succeeded")
        } catch {
            #expect(error.code == "missing_key")
            #expect(error.description.contains("aes128.test.key"))
        }
    }

    @Test func aMultivariantPlaylistIsRefused() throws {
        let out = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: out) }
        let error = #expect(throws: PlaylistDecryptionError.self) {
            try PlaylistDecryption().decrypt(
                playlistAt: Self.media.appendingPathComponent("shaka/ts-sample-aes-aac/master.m3u8"),
                to: out
            )
        }
        #expect(error?.code == "not_a_media_playlist")
    }
}

/// SAMPLE-AES playlists made by Shaka Packager: decrypted by `PlaylistDecryption`, compared with the clear twins.
struct SampleAESPlaylistDecryptionTests {
    private static let shaka = PlaylistDecryptionTests.media.appendingPathComponent("shaka")

    @Test(arguments: ["aac", "ac3", "eac3", "multislice"], ["video", "audio"])
    func transportStreamsDecryptToTheClearTwinByteForByte(codec: String, stream: String) throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-sa-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let report = try PlaylistDecryption().decrypt(
            playlistAt: Self.shaka.appendingPathComponent("ts-sample-aes-\(codec)/\(stream).m3u8"),
            to: out
        )
        #expect(report.segments == 3)
        for index in 1...3 {
            let name = "\(stream)_\(index).ts"
            let ours = try Data(contentsOf: out.appendingPathComponent(name))
            let twin = try Data(contentsOf: Self.shaka.appendingPathComponent("ts-clear-\(codec)/\(name)"))
            #expect(ours == twin, "\(codec) \(name)")
        }
    }

    /// The four Common Encryption schemes as Shaka Packager writes them: cbcs (SAMPLE-AES), cenc (SAMPLE-AES-CTR),
    /// and cbc1 and cens (video only; packager writes no HLS for them).
    @Test(arguments: [
        ("fmp4-cbcs", "video"), ("fmp4-cbcs", "audio"), ("fmp4-cenc", "video"), ("fmp4-cenc", "audio"), ("fmp4-cbc1", "video"),
        ("fmp4-cens", "video"),
    ])
    func fragmentedMP4PlaysLikeTheClearTwinInFFmpeg(fixture: String, stream: String) async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-cbcs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let report = try PlaylistDecryption().decrypt(
            playlistAt: Self.shaka.appendingPathComponent("\(fixture)/\(stream).m3u8"),
            to: out
        )
        #expect(report.segments == 3)
        #expect(report.initializationSections == 1)
        // The clear init section is the twin's, byte for byte.
        #expect(
            try Data(contentsOf: out.appendingPathComponent("\(stream)_init.mp4"))
                == Data(contentsOf: Self.shaka.appendingPathComponent("fmp4-clear/\(stream)_init.mp4"))
        )
        let ours = try await FrameHashes.of(out.appendingPathComponent("\(stream).m3u8"))
        let twin = try await FrameHashes.of(Self.shaka.appendingPathComponent("fmp4-clear/\(stream).m3u8"))
        #expect(ours.count > 50)
        #expect(ours == twin)
    }

    /// SAMPLE-AES-CTR from packagers other than Shaka (Fixtures/media/others): ffmpeg 9's 8-byte IVs counting
    /// samples, and Bento4's 16-byte IVs whose block counter runs on across samples and segments. Keys come from
    /// the key files the playlists name.
    @Test(arguments: [
        ("ffmpeg9-cenc", "ffmpeg9-clear", "video"), ("ffmpeg9-cenc", "ffmpeg9-clear", "audio"),
        ("bento4-cenc", "bento4-clear", "video"), ("bento4-cenc", "bento4-clear", "audio"),
    ])
    func otherPackagersCENCPlaysLikeTheClearTwinInFFmpeg(fixture: String, twin: String, stream: String) async throws {
        let others = PlaylistDecryptionTests.media.appendingPathComponent("others")
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-cenc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let report = try PlaylistDecryption().decrypt(
            playlistAt: others.appendingPathComponent("\(fixture)/\(stream)/index.m3u8"),
            to: out
        )
        #expect(report.segments == 3)
        #expect(report.initializationSections == 1)
        let ours = try await FrameHashes.of(out.appendingPathComponent("index.m3u8"))
        let clear = try await FrameHashes.of(others.appendingPathComponent("\(twin)/\(stream)/index.m3u8"))
        #expect(ours.count == (stream == "video" ? 144 : 278))
        #expect(ours == clear)
    }

    /// Bento4's mp42hls SAMPLE-AES (Apple's sample encryption, IV = media sequence number): H.264 and AAC in one
    /// MPEG-TS, and packed audio. ffmpeg n9's own decryption differs from the twin here (the last two video frames
    /// of each TS segment, the whole first packed segment), so make-others.sh checks these fixtures with openssl and
    /// the twin is the reference.
    @Test(arguments: [("bento4-ts-sample-aes", "bento4-ts-clear", 421), ("bento4-packed-sample-aes", "bento4-packed-clear", 278)])
    func bento4SampleAESPlaysLikeTheClearTwinInFFmpeg(fixture: String, twin: String, packets: Int) async throws {
        let others = PlaylistDecryptionTests.media.appendingPathComponent("others")
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-sample-aes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let report = try PlaylistDecryption().decrypt(playlistAt: others.appendingPathComponent("\(fixture)/index.m3u8"), to: out)
        #expect(report.segments == 3)
        let ours = try await FrameHashes.of(out.appendingPathComponent("index.m3u8"))
        let clear = try await FrameHashes.of(others.appendingPathComponent("\(twin)/index.m3u8"))
        #expect(ours.count == packets)
        #expect(ours == clear)
    }
}

/// Shaka Player's AES-256 and AES-256-CTR test stream (Fixtures/golden/shaka-player-hls-aes-256).
struct AES256PlaylistDecryptionTests {
    private static let golden = PlaylistDecryptionTests.media.deletingLastPathComponent()
        .appendingPathComponent("golden/shaka-player-hls-aes-256")

    @Test func decryptsCBCAndCTRSegmentsAndTheEncryptedInitSection() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-aes256-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let report = try PlaylistDecryption().decrypt(playlistAt: Self.golden.appendingPathComponent("media.m3u8"), to: out)
        #expect(report.segments == 5)
        #expect(report.initializationSections == 1)
        let initSection = Array(try Data(contentsOf: out.appendingPathComponent("init.mp4")))
        #expect(Array(initSection[4..<8]) == Array("ftyp".utf8))
        let parsedInit = try CBCSInitSection.parse(initSection, segment: "init.mp4")
        for index in 0..<5 {
            let name = "segment_\(index).m4s"
            let bytes = Array(try Data(contentsOf: out.appendingPathComponent(name)))
            // A segment type box may come first; then moof + mdat.
            #expect(["styp", "moof"].contains(String(decoding: bytes[4..<8], as: UTF8.self)), "\(name)")
            let summary = try FragmentedMP4Validator.validate(bytes, initSection: parsedInit, segment: name)
            #expect(summary.fragmentCount >= 1)
            #expect(summary.topLevelBoxes["mdat"] == summary.fragmentCount)
            #expect(summary.sampleCount > 0)
            #expect(summary.sampleBytes == summary.mediaDataBytes)
        }
        // And ffmpeg plays the clear copy from start to end.
        let frames = try await FrameHashes.of(out.appendingPathComponent("media.m3u8"))
        #expect(frames.count > 100)
    }
}
