import AssetDownload
import AsyncHTTPClient
import DownloadTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import OfflinePackage
import OriginServer
import Playback
import StowageLibrary
import StowageTestSupport
import Testing

/// SAMPLE-AES MPEG-TS whose PES packets are split between segments, as byte-count segmenters cut them: Shaka
/// Packager's encryption cut again inside PES packets (`Fixtures/media/shaka/ts-sample-aes-*-split`, made by
/// `recut-ts.py`); and one whose NAL units and audio frames span PES packets (`ts-sample-aes-multislice-repacked`,
/// `repack-pes.py`). Downloaded, verified deeply, played and decrypted by `stowage decrypt`'s engine; ffmpeg's packets of
/// the played package equal those of Shaka's clear twin, and the decrypted files joined equal the twin's joined files.
@Suite("SAMPLE-AES TS cut inside PES packets: download, verify, play, decrypt", .timeLimit(.minutes(5)))
struct SplitPESSampleAESTests {
    static let shaka = DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/media/shaka")

    @Test(
        "downloaded, verified deeply and played: packets (decoded frames for repacked PES packets) equal the clear twin's",
        arguments: [
            ("ts-sample-aes-multislice-split", "multislice", 144, 278), ("ts-sample-aes-ac3-split", "ac3", 144, 185),
            ("ts-sample-aes-multislice-repacked", "multislice", 144, 278),
        ]
    )
    func downloadVerifyPlay(_ directory: String, _ name: String, _ videoPackets: Int, _ audioPackets: Int) async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try FileManager.default.copyItem(at: Self.shaka.appendingPathComponent(directory), to: fixture.originRoot.appendingPathComponent("source"))
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let manifest = try await fixture.withServers { origin, _ in
            let request = DownloadRequest(url: origin.appendingPathComponent("source/master.m3u8").absoluteString, assetId: "split")
            return try await library.download(request).result()
        }
        #expect(manifest.isComplete)
        #expect(manifest.files.allSatisfy { $0.key?.method == "SAMPLE-AES" }, "the package keeps its segments encrypted")
        let report = try await library.verify(assetId: "split", options: .init(deep: true))
        #expect(report.isPlayable, "\(name): \(report.problems)")

        let playback = try await library.play(assetId: "split", online: false)
        do {
            let twin = Self.shaka.appendingPathComponent("ts-clear-\(name)")
            for (stream, reference, count) in [("v", "video.m3u8", videoPackets), ("a", "audio.m3u8", audioPackets)] {
                let source = playback.address.sessionMultivariantURL.absoluteString
                if directory.hasSuffix("-repacked") {
                    // Frames moved between PES packets change how ffmpeg cuts ADTS into packets (not what it decodes):
                    // the decoded frames are the reference.
                    let clear = try await PlayWhileDownloadingTests.frames(twin.appendingPathComponent(reference).path, map: "0:\(stream):0")
                    #expect(clear.count >= count, "ts-clear-\(name) \(stream)")
                    let played = try await PlayWhileDownloadingTests.frames(source, map: "0:\(stream):0")
                    #expect(played == clear, "\(directory) \(stream): \(played.count) decoded frames against the twin's \(clear.count)")
                    continue
                }
                let clear = try await OtherPackagerTests.packets(twin.appendingPathComponent(reference).path, stream: stream)
                #expect(clear.count == count, "ts-clear-\(name) \(stream)")
                let played = try await OtherPackagerTests.packets(source, stream: stream)
                #expect(played == clear, "\(directory) \(stream): \(played.count) packets against the twin's \(clear.count)")
            }
        } catch {
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()
    }

    /// How the player first asks for an audio segment not downloaded yet.
    enum FirstRequest: String, CaseIterable, Sendable {
        /// A plain GET of the second segment: streamed as it arrives (its previous segment not there either).
        case arriving
        /// A Range request of the first segment: answered once it has landed (a range is never streamed as it
        /// arrives), and only once the second, which its last PES packet goes on in, has landed too.
        case ranged
    }

    @Test(
        "played while a throttled download runs: a segment waits for the neighbours its PES packets begin in and go on in",
        arguments: FirstRequest.allCases
    )
    func playWhileDownloading(_ first: FirstRequest) async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let split = Self.shaka.appendingPathComponent("ts-sample-aes-ac3-split")
        try FileManager.default.copyItem(at: split, to: fixture.originRoot.appendingPathComponent("source"))
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        // About 25 kB/s over one connection: the 270 kB package takes about ten seconds, and the player runs ahead.
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 25_000)) { origin, _ in
            let task = try await library.download(
                DownloadRequest(url: origin.appendingPathComponent("source/master.m3u8").absoluteString, assetId: "split", concurrency: 1)
            )
            for await event in task.events {
                if case .progress(let progress) = event, progress.renditions.contains(where: { $0.filesDone > 0 }) { break }
            }
            // The wait for a segment still downloading is longer than the default 20 s: under the whole suite the
            // throttled download can take that long, and a 503 then is the timing of the machine, not of the rule.
            let playback = try await library.play(assetId: "split", downloadWait: .seconds(60))
            let directory = try PackageDirectory(assetId: "split", in: fixture.clientDirectory)
            #expect(try !directory.readManifest().isComplete, "the download finished before playback started; the test proves nothing")
            let twin = Self.shaka.appendingPathComponent("ts-clear-ac3")
            do {
                // The segment's clear bytes are the twin's at the same place: the split segments keep their sizes, so
                // the joined twin is cut at the same offsets.
                let audio = try #require(try directory.readManifest().renditions.first { $0.kind == .audio })
                let index = first == .arriving ? 1 : 0
                let file = try #require(audio.segments[index].file)
                let sizes = try (1...3).map { try Data(contentsOf: split.appendingPathComponent("split_audio_\($0).ts")).count }
                let joinedTwin = try (1...3).flatMap { try Data(contentsOf: twin.appendingPathComponent("audio_\($0).ts")) }
                let offset = sizes.prefix(index).reduce(0, +)
                let expected = Array(joinedTwin[offset..<(offset + sizes[index])])
                let url = playback.address.sessionURL.appendingPathComponent(file.path)
                switch first {
                case .arriving:
                    let got = try await PlayWhileDownloadingTests.fetchBytes(url)
                    #expect(got.status == 200)
                    #expect(got.body == expected, "the arriving segment's clear bytes")
                case .ranged:
                    let got = try await Self.fetchRange(url, "bytes=0-")
                    #expect(got.status == 206)
                    #expect(got.body == expected, "the ranged segment's clear bytes")
                }
                for (stream, reference) in [("v", "video.m3u8"), ("a", "audio.m3u8")] {
                    let clear = try await OtherPackagerTests.packets(twin.appendingPathComponent(reference).path, stream: stream)
                    let played = try await OtherPackagerTests.packets(playback.address.sessionMultivariantURL.absoluteString, stream: stream)
                    #expect(played == clear, "\(stream): \(played.count) packets against the twin's \(clear.count)")
                }
            } catch {
                await playback.stop()
                throw error
            }
            await playback.stop()
            #expect(try await task.result().isComplete)
            // No response was cut short for want of the next segment (ffmpeg would have asked again and hidden it).
            let errors = (try? String(contentsOf: directory.errorLogURL, encoding: .utf8)) ?? ""
            #expect(!errors.contains("decryption_failed") && !errors.contains("segment_downloading"), "\(errors)")
        }
        await library.close()
    }

    /// A GET with a Range header: the status and the whole body.
    static func fetchRange(_ url: URL, _ range: String) async throws -> (status: Int, body: [UInt8]) {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            var request = HTTPClientRequest(url: url.absoluteString)
            request.headers.add(name: "Range", value: range)
            let response = try await http.execute(request, timeout: .seconds(90))
            let body = Array(buffer: try await response.body.collect(upTo: 1 << 22))
            try await http.shutdown()
            return (Int(response.status.code), body)
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    @Test("stowage decrypt's engine: the decrypted segments joined equal the clear twin's joined, byte for byte", arguments: ["multislice", "ac3"])
    func playlistDecryption(_ name: String) throws {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("split-pes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let source = Self.shaka.appendingPathComponent("ts-sample-aes-\(name)-split")
        let twin = Self.shaka.appendingPathComponent("ts-clear-\(name)")
        for kind in ["video", "audio"] {
            let report = try PlaylistDecryption().decrypt(playlistAt: source.appendingPathComponent("\(kind).m3u8"), to: output)
            #expect(report.segments == 3)
            let joined = try (1...3).flatMap { try Data(contentsOf: output.appendingPathComponent("split_\(kind)_\($0).ts")) }
            let expected = try (1...3).flatMap { try Data(contentsOf: twin.appendingPathComponent("\(kind)_\($0).ts")) }
            #expect(joined == expected, "\(name) \(kind)")
        }
    }
}
