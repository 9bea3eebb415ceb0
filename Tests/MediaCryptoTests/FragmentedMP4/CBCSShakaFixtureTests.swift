import Foundation
import MediaCrypto
import StowageCrypto
import Testing

/// Shaka Packager's cbcs output (Fixtures/media/shaka/fmp4-cbcs) against its clear twin (fmp4-clear), packaged from the
/// same source: after our decryption, ffmpeg must demux the very same packets from both.
struct CBCSShakaFixtureTests {
    static let encryptedDirectory = "Fixtures/media/shaka/fmp4-cbcs"
    static let clearDirectory = "Fixtures/media/shaka/fmp4-clear"
    static let segments = ["video_1.m4s", "video_2.m4s", "video_3.m4s", "audio_1.m4s", "audio_2.m4s", "audio_3.m4s"]

    static func initName(_ segment: String) -> String {
        segment.hasPrefix("video") ? "video_init.mp4" : "audio_init.mp4"
    }

    static func decrypted(_ segment: String, chunkSize: Int = 4096) throws -> [UInt8] {
        let keys = try FMP4TestSupport.shakaKeys()
        let initSection = try CBCSInitSection.parse(
            try FMP4TestSupport.fixture("\(encryptedDirectory)/\(initName(segment))"),
            segment: initName(segment)
        )
        let decryptor = try CBCSFragmentDecryptor(initSection: initSection, key: SecretBytes(keys.key), segment: segment)
        let fragment = try FMP4TestSupport.fixture("\(encryptedDirectory)/\(segment)")
        return try initSection.clearInitSection() + FMP4TestSupport.run(decryptor, fragment, chunkSize: chunkSize)
    }

    static func clearTwin(_ segment: String) throws -> [UInt8] {
        try FMP4TestSupport.fixture("\(clearDirectory)/\(initName(segment))") + FMP4TestSupport.fixture("\(clearDirectory)/\(segment)")
    }

    @Test(arguments: segments)
    func ffmpegDemuxesTheClearTwinsPackets(segment: String) async throws {
        let ours = try await FMP4FFmpeg.frameHashes(of: try Self.decrypted(segment))
        let twin = try await FMP4FFmpeg.frameHashes(of: try Self.clearTwin(segment))
        #expect(twin.count > 20)
        #expect(ours == twin)
    }

    @Test(arguments: segments)
    func samplesEqualTheClearTwin(segment: String) throws {
        let ours = FMP4SampleReader.samples(try Self.decrypted(segment, chunkSize: 7))
        let twin = FMP4SampleReader.samples(try Self.clearTwin(segment))
        #expect(!twin.isEmpty)
        #expect(ours == twin)
    }

    @Test func initSectionDescribesTheProtection() throws {
        let keys = try FMP4TestSupport.shakaKeys()
        let video = try CBCSInitSection.parse(try FMP4TestSupport.fixture("\(Self.encryptedDirectory)/video_init.mp4"), segment: "video_init.mp4")
        let audio = try CBCSInitSection.parse(try FMP4TestSupport.fixture("\(Self.encryptedDirectory)/audio_init.mp4"), segment: "audio_init.mp4")
        let videoTrack = try #require(video.tracks.first)
        #expect(videoTrack.handler == "vide")
        #expect(videoTrack.originalFormat == "avc1")
        #expect(videoTrack.scheme == "cbcs")
        #expect(videoTrack.defaultKID == Hex.encode(keys.keyID))
        #expect(videoTrack.isProtected)
        #expect(videoTrack.perSampleIVSize == 0)
        #expect(videoTrack.constantIV == keys.iv)
        #expect(videoTrack.cryptByteBlock == 1 && videoTrack.skipByteBlock == 9)
        let audioTrack = try #require(audio.tracks.first)
        #expect(audioTrack.handler == "soun")
        #expect(audioTrack.originalFormat == "mp4a")
        #expect(audioTrack.cryptByteBlock == 0 && audioTrack.skipByteBlock == 0)
        #expect(audioTrack.constantIV == keys.iv)
    }

    /// The clear init we make has the clear twin's structure: sample entries and their children, no sinf, no pssh.
    @Test(arguments: ["video_init.mp4", "audio_init.mp4"])
    func clearInitSectionMatchesTheTwinsSampleEntry(name: String) throws {
        let initSection = try CBCSInitSection.parse(try FMP4TestSupport.fixture("\(Self.encryptedDirectory)/\(name)"), segment: name)
        let clear = try initSection.clearInitSection()
        let reparsed = try CBCSInitSection.parse(clear, segment: name)
        #expect(reparsed.tracks.allSatisfy { $0.scheme == nil })
        #expect(reparsed.tracks.map(\.originalFormat) == initSection.tracks.map(\.originalFormat))
        let text = String(decoding: clear, as: UTF8.self)
        #expect(!text.contains("sinf") && !text.contains("pssh") && !text.contains("encv") && !text.contains("enca"))
        let topLevel = FMP4SampleReader.boxes(clear, 0..<clear.count)
        #expect(topLevel.last?.end == clear.count)
    }
}
