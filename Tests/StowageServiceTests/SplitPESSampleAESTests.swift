import AssetDownload
import DownloadTestSupport
import Foundation
import OfflinePackage
import Playback
import StowageLibrary
import StowageTestSupport
import Testing

/// SAMPLE-AES MPEG-TS whose PES packets are split between segments, as byte-count segmenters cut them: Shaka
/// Packager's encryption cut again inside PES packets (`Fixtures/media/shaka/ts-sample-aes-*-split`, made by
/// `recut-ts.py`). Downloaded, verified deeply, played and decrypted by `stowage decrypt`'s engine; ffmpeg's packets of
/// the played package equal those of Shaka's clear twin, and the decrypted files joined equal the twin's joined files.
@Suite("SAMPLE-AES TS cut inside PES packets: download, verify, play, decrypt", .timeLimit(.minutes(5)))
struct SplitPESSampleAESTests {
    static let shaka = DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/media/shaka")

    @Test(
        "downloaded, verified deeply and played: packets equal the clear twin's",
        arguments: [("multislice", 144, 278), ("ac3", 144, 185)]
    )
    func downloadVerifyPlay(_ name: String, _ videoPackets: Int, _ audioPackets: Int) async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try FileManager.default.copyItem(
            at: Self.shaka.appendingPathComponent("ts-sample-aes-\(name)-split"),
            to: fixture.originRoot.appendingPathComponent("source")
        )
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
                let clear = try await OtherPackagerTests.packets(twin.appendingPathComponent(reference).path, stream: stream)
                #expect(clear.count == count, "ts-clear-\(name) \(stream)")
                let played = try await OtherPackagerTests.packets(playback.address.sessionMultivariantURL.absoluteString, stream: stream)
                #expect(played == clear, "\(name) \(stream): \(played.count) packets against the twin's \(clear.count)")
            }
        } catch {
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()
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
