import AssetDownload
import DownloadTestSupport
import Foundation
import OfflinePackage
import Playback
import StowageLibrary
import StowageTestSupport
import Testing

/// HLS from packagers and segmenters nobody on this team wrote (Fixtures/media/others, made by
/// `make-others.sh`): VLC's livehttp cutting segments anywhere (PES packets span segment boundaries) with AES-128 and
/// with key rotation and explicit IVs carried over a segment, GStreamer's hlssink2 with per-segment AES-128, and
/// SAMPLE-AES-CTR (cenc) fMP4 as separate video and audio renditions from ffmpeg 9 (8-byte IVs counting samples) and
/// from Bento4's mp4encrypt (16-byte IVs whose block counter runs on across samples and segments, video
/// subsamples with long clear runs), and Bento4's mp42hls SAMPLE-AES: H.264 + AAC in MPEG-TS, and Apple packed
/// audio (ID3 + ADTS with the audioDescription PRIV). Each is downloaded, verified deeply and played; ffmpeg's
/// packets of the played package (size and MD5 of each, per stream type) equal those of the clear twin each tool
/// made.
@Suite("Other packagers: VLC, GStreamer, ffmpeg 9 cenc, Bento4 cenc and SAMPLE-AES", .timeLimit(.minutes(5)))
struct OtherPackagerTests {
    static let others = DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/media/others")

    /// Size and MD5 of each packet of the first stream of type `stream` (`v`, `a`) of `input`, as ffmpeg copies them.
    static func packets(_ input: String, stream: String) async throws -> [String] {
        let result = try await ProcessRunner.run(
            program: "ffmpeg",
            ["-nostdin", "-v", "error", "-allowed_extensions", "ALL", "-i", input, "-map", "0:\(stream):0", "-c", "copy", "-f", "framemd5", "-"],
            timeout: .seconds(120)
        )
        #expect(result.status == 0, "ffmpeg \(input): \(String(decoding: result.standardError, as: UTF8.self))")
        return String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map {
            $0.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ",")
        }
    }

    @Test(
        "downloaded, verified deeply and played: packets equal the clear twin's",
        arguments: [
            ("vlc/span-aes128", "vlc/span-clear", "index.m3u8", 140, 271),
            ("vlc/keyrot", "vlc/keyrot-clear", "index.m3u8", 140, 271),
            ("gst/hlssink2-aes128", "gst/hlssink2-clear", "index.m3u8", 144, 276),
            ("ffmpeg9-cenc", "ffmpeg9-clear", "master.m3u8", 144, 278),
            ("bento4-cenc", "bento4-clear", "master.m3u8", 144, 278),
            ("bento4-ts-sample-aes", "bento4-ts-clear", "index.m3u8", 143, 278),
            ("bento4-packed-sample-aes", "bento4-packed-clear", "index.m3u8", 0, 278),
        ]
    )
    func downloadVerifyPlay(_ encrypted: String, _ twin: String, _ playlist: String, _ videoPackets: Int, _ audioPackets: Int) async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try FileManager.default.copyItem(at: Self.others.appendingPathComponent(encrypted), to: fixture.originRoot.appendingPathComponent("source"))
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let manifest = try await fixture.withServers { origin, _ in
            let request = DownloadRequest(url: origin.appendingPathComponent("source/\(playlist)").absoluteString, assetId: "other")
            return try await library.download(request).result()
        }
        #expect(manifest.isComplete)
        #expect(!manifest.files.compactMap(\.key).isEmpty, "the package keeps its segments encrypted")
        let report = try await library.verify(assetId: "other", options: .init(deep: true))
        #expect(report.isPlayable, "\(encrypted): \(report.problems)")

        let playback = try await library.play(assetId: "other", online: false)
        do {
            // The fMP4 masters (ffmpeg 9's lists its audio as a variant too): the twin's video and audio playlists
            // are the reference.
            let twinRoot = Self.others.appendingPathComponent(twin)
            let twinVideo =
                playlist == "master.m3u8" ? twinRoot.appendingPathComponent("video/index.m3u8") : twinRoot.appendingPathComponent(playlist)
            let twinAudio =
                playlist == "master.m3u8" ? twinRoot.appendingPathComponent("audio/index.m3u8") : twinRoot.appendingPathComponent(playlist)
            for (stream, reference, count) in [("v", twinVideo, videoPackets), ("a", twinAudio, audioPackets)] where count > 0 {
                let clear = try await Self.packets(reference.path, stream: stream)
                #expect(clear.count == count, "\(twin) \(stream)")
                let played = try await Self.packets(playback.address.sessionMultivariantURL.absoluteString, stream: stream)
                #expect(played == clear, "\(encrypted) \(stream): \(played.count) packets against the twin's \(clear.count)")
            }
        } catch {
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()
    }
}
