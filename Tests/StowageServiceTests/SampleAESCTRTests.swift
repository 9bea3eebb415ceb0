import AssetDownload
import DownloadTestSupport
import Foundation
import OfflinePackage
import Playback
import StowageLibrary
import StowageTestSupport
import Testing

/// SAMPLE-AES-CTR (ISO/IEC 23001-7 `cenc` on fMP4, RFC 8216bis 4.4.4.4), as Widevine- and PlayReady-packaged HLS
/// carries it: Shaka Packager's cenc output (per-sample 8-byte IVs in `senc`, video subsamples, whole audio samples)
/// downloaded, verified deeply and played; ffmpeg's decoded frames equal those of Shaka's clear twin and those ffmpeg
/// itself decrypts from the encrypted files with the key.
@Suite("SAMPLE-AES-CTR (cenc) packages", .timeLimit(.minutes(5)))
struct SampleAESCTRTests {
    static let shaka = DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/media/shaka")
    static let key = "a1b2c3d4e5f60718293a4b5c6d7e8f90"

    /// Decoded frames (`framemd5` checksums) of the first stream of `stream` (`v` or `a`) of `input`.
    /// `extra` goes before the input (a local MP4 takes `-decryption_key`; a playlist gets `-allowed_extensions ALL`).
    static func frames(
        _ input: String,
        stream: String,
        extra: [String] = ["-allowed_extensions", "ALL"],
        standardInput: URL? = nil
    ) async throws -> [String] {
        let arguments = extra + ["-i", input, "-map", "0:\(stream):0", "-f", "framemd5", "-"]
        let result =
            if let standardInput {
                try await ProcessRunner.run(
                    program: "sh",
                    ["-c", "exec ffmpeg -v error \"$@\" < \"$0\"", standardInput.path] + arguments,
                    timeout: .seconds(120)
                )
            } else {
                try await ProcessRunner.run(program: "ffmpeg", ["-nostdin", "-v", "error"] + arguments, timeout: .seconds(120))
            }
        #expect(result.status == 0, "ffmpeg \(input): \(String(decoding: result.standardError, as: UTF8.self))")
        return String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map {
            String($0.split(separator: ",").last ?? "").trimmingCharacters(in: .whitespaces)
        }
    }

    /// The init section and segments of one of Shaka's media playlists joined into one file.
    static func joined(_ directory: String, _ stream: String, into url: URL) throws {
        var bytes = try Data(contentsOf: shaka.appendingPathComponent("\(directory)/\(stream)_init.mp4"))
        for index in 1...3 { bytes.append(try Data(contentsOf: shaka.appendingPathComponent("\(directory)/\(stream)_\(index).m4s"))) }
        try bytes.write(to: url)
    }

    @Test("downloaded, verified and played: video and audio frames equal the clear twin's and ffmpeg's own decryption")
    func downloadVerifyPlay() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try FileManager.default.copyItem(at: Self.shaka.appendingPathComponent("fmp4-cenc"), to: fixture.originRoot.appendingPathComponent("cenc"))
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let manifest = try await fixture.withServers { origin, _ in
            let request = DownloadRequest(url: origin.appendingPathComponent("cenc/master.m3u8").absoluteString, assetId: "cenc")
            return try await library.download(request).result()
        }
        #expect(manifest.isComplete)
        #expect(manifest.renditions.count == 2)
        #expect(manifest.files.compactMap(\.key?.method).allSatisfy { $0 == "SAMPLE-AES-CTR" })
        let report = try await library.verify(assetId: "cenc", options: .init(deep: true))
        #expect(report.isPlayable, "\(report)")

        for (stream, name) in [("v", "video"), ("a", "audio")] {
            let clear = try await Self.frames(Self.shaka.appendingPathComponent("fmp4-clear/master.m3u8").path, stream: stream)
            #expect(clear.count > 40)
            let encrypted = fixture.root.appendingPathComponent("\(name)-cenc.mp4")
            try Self.joined("fmp4-cenc", name, into: encrypted)
            // Read as a stream: ffmpeg's mov demuxer seeks through the segments' sidx boxes when it can, and then
            // misplaces the senc of later fragments; as a pipe it reads fragment after fragment, as a player does.
            #expect(try await Self.frames("pipe:0", stream: stream, extra: ["-decryption_key", Self.key], standardInput: encrypted) == clear)
        }
        let playback = try await library.play(assetId: "cenc", online: false)
        do {
            for stream in ["v", "a"] {
                let clear = try await Self.frames(Self.shaka.appendingPathComponent("fmp4-clear/master.m3u8").path, stream: stream)
                #expect(try await Self.frames(playback.address.sessionMultivariantURL.absoluteString, stream: stream) == clear)
            }
        } catch {
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()
    }

    @Test("the method and the init section's scheme must agree: SAMPLE-AES over cenc is refused, naming both")
    func methodAndSchemeMustAgree() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let source = fixture.originRoot.appendingPathComponent("mislabelled")
        try FileManager.default.copyItem(at: Self.shaka.appendingPathComponent("fmp4-cenc"), to: source)
        for playlist in ["video.m3u8", "audio.m3u8"] {
            let url = source.appendingPathComponent(playlist)
            let text = try String(contentsOf: url, encoding: .utf8).replacingOccurrences(of: "METHOD=SAMPLE-AES-CTR", with: "METHOD=SAMPLE-AES")
            try Data(text.utf8).write(to: url)
        }
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        _ = try await fixture.withServers { origin, _ in
            let request = DownloadRequest(url: origin.appendingPathComponent("mislabelled/master.m3u8").absoluteString, assetId: "mislabelled")
            return try await library.download(request).result()
        }
        let report = try await library.verify(assetId: "mislabelled", options: .init(deep: true))
        #expect(!report.isPlayable)
        #expect(
            report.problems.contains { $0.message.contains("METHOD=SAMPLE-AES, which is 'cbcs', but the init section's tracks use 'cenc'") },
            "\(report.problems)"
        )
        await library.close()
    }
}

/// SAMPLE-AES packed audio (raw AAC in ADTS after an ID3 timestamp tag), as Apple's tools write audio-only
/// renditions: Shaka Packager's output downloaded, verified deeply and played; every served segment's frames equal
/// the clear twin's byte for byte, and ffmpeg decodes the clear twin's audio frames from play.
@Suite("SAMPLE-AES packed audio", .timeLimit(.minutes(5)))
struct PackedAudioTests {
    static let shaka = SampleAESCTRTests.shaka

    /// A packed audio segment without its ID3 tags (the encrypted segment's tag also names the audio setup).
    static func frames(of bytes: [UInt8]) -> [UInt8] {
        var rest = bytes[...]
        while rest.count >= 10, rest.starts(with: [0x49, 0x44, 0x33]) {
            let header = Array(rest.prefix(10))
            let size = header[6..<10].reduce(0) { $0 << 7 | Int($1 & 0x7F) }
            rest = rest.dropFirst(10 + size + (header[5] & 0x10 != 0 ? 10 : 0))
        }
        return Array(rest)
    }

    @Test("downloaded, verified and played: every frame equals the clear twin's")
    func downloadVerifyPlay() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try FileManager.default.copyItem(
            at: Self.shaka.appendingPathComponent("packed-aac-sample-aes"),
            to: fixture.originRoot.appendingPathComponent("packed")
        )
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let manifest = try await fixture.withServers { origin, _ in
            let request = DownloadRequest(url: origin.appendingPathComponent("packed/master.m3u8").absoluteString, assetId: "packed")
            return try await library.download(request).result()
        }
        #expect(manifest.isComplete)
        #expect(manifest.files.count == 3)
        let report = try await library.verify(assetId: "packed", options: .init(deep: true))
        #expect(report.isPlayable, "\(report)")

        let playback = try await library.play(assetId: "packed", online: false)
        do {
            for file in manifest.files {
                let served = try await KeyMethodTests.get(playback.address.sessionURL.appendingPathComponent(file.path))
                #expect(served.status == 200)
                let name = try #require(URL(string: file.sourceURL)?.lastPathComponent)
                let clear = Array(try Data(contentsOf: Self.shaka.appendingPathComponent("packed-aac-clear/\(name)")))
                let encrypted = Array(try Data(contentsOf: Self.shaka.appendingPathComponent("packed-aac-sample-aes/\(name)")))
                #expect(Self.frames(of: served.body) == Self.frames(of: clear), "\(name)")
                #expect(Self.frames(of: encrypted) != Self.frames(of: clear))
                #expect(served.body.count == encrypted.count)
            }
            let clear = try await SampleAESCTRTests.frames(Self.shaka.appendingPathComponent("packed-aac-clear/master.m3u8").path, stream: "a")
            #expect(clear.count > 40)
            #expect(try await SampleAESCTRTests.frames(playback.address.sessionMultivariantURL.absoluteString, stream: "a") == clear)
        } catch {
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()
    }
}
