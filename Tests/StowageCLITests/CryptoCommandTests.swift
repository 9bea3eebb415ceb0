import Foundation
import StowageTestSupport
import Testing

/// `stowage segment` and `stowage decrypt` as a user runs them, on the committed fixtures.
struct CryptoCommandTests {
    private static let media = TestSupport.fixtures.appendingPathComponent("media")
    // Test keys from Keys/media-fixtures.test.json.
    private static let aesKey = "618e0c850d814906461491ad97089fea"
    private static let aesIV = "a97e67e7198ca85d61edaef31146d6fc"
    private static let sampleKey = "05c98e4ecbe7450f250e4710d0c46b00"
    private static let sampleIV = "472a47951d415f983784666e5df85dca"

    @Test func segmentDecryptWholeSegmentFileToFile() async throws {
        let directory = try TestSupport.temporaryDirectory("seg")
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("clear.ts")
        let result = try await TestSupport.runStowage([
            "segment", "decrypt", "--method", "aes-128", "--key", Self.aesKey, "--iv", Self.aesIV,
            Self.media.appendingPathComponent("ts-aes128-iv/seg_1.ts").path, out.path,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(try Data(contentsOf: out) == Data(contentsOf: Self.media.appendingPathComponent("ts-clear/seg_1.ts")))
    }

    @Test func segmentDecryptSampleAESThroughPipes() async throws {
        let result = try await ProcessRunner.run(
            try TestSupport.stowageBinary,
            ["segment", "decrypt", "--method", "sample-aes", "--key", Self.sampleKey, "--iv", Self.sampleIV, "-", "-"],
            standardInput: Self.media.appendingPathComponent("shaka/ts-sample-aes-aac/video_2.ts")
        )
        #expect(result.status == 0)
        #expect(result.standardOutput == (try Data(contentsOf: Self.media.appendingPathComponent("shaka/ts-clear-aac/video_2.ts"))))
    }

    @Test func segmentEncryptThenDecryptRoundTripsAndEncryptionChangesTheBytes() async throws {
        let directory = try TestSupport.temporaryDirectory("seg-rt")
        defer { try? FileManager.default.removeItem(at: directory) }
        let clear = Self.media.appendingPathComponent("shaka/ts-clear-ac3/audio_1.ts")
        let encrypted = directory.appendingPathComponent("enc.ts")
        let back = directory.appendingPathComponent("back.ts")
        let common = ["--method", "sample-aes", "--key", Self.sampleKey, "--iv", Self.sampleIV]
        #expect(try await TestSupport.runStowage(["segment", "encrypt"] + common + [clear.path, encrypted.path]).status == 0)
        #expect(try await TestSupport.runStowage(["segment", "decrypt"] + common + [encrypted.path, back.path]).status == 0)
        #expect(try Data(contentsOf: encrypted) != Data(contentsOf: clear))
        #expect(try Data(contentsOf: back) == Data(contentsOf: clear))
    }

    @Test func segmentDecryptWithAWrongKeyFailsCleanly() async throws {
        let directory = try TestSupport.temporaryDirectory("seg-bad")
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("clear.ts")
        let result = try await TestSupport.runStowage([
            "segment", "decrypt", "--method", "aes-128", "--key", "618e0c850d814906461491ad97089fe0", "--iv", Self.aesIV,
            Self.media.appendingPathComponent("ts-aes128-iv/seg_0.ts").path, out.path,
        ])
        #expect(result.status == 1)
        #expect(result.standardError.contains("[bad_padding]"))
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }

    @Test func decryptWritesAClearPlaylistThatFFmpegPlaysLikeTheTwin() async throws {
        let directory = try TestSupport.temporaryDirectory("decrypt")
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try await TestSupport.runStowage([
            "decrypt", Self.media.appendingPathComponent("shaka/ts-sample-aes-multislice/video.m3u8").path, "--out", directory.path,
            "--json",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        let report = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
        #expect(report?["segments"] as? Int == 3)
        let playlist = try String(contentsOf: directory.appendingPathComponent("video.m3u8"), encoding: .utf8)
        #expect(!playlist.contains("EXT-X-KEY"))
        let ours = try await FrameHashes.of(directory.appendingPathComponent("video.m3u8"), map: "0:v:0")
        let twin = try await FrameHashes.of(Self.media.appendingPathComponent("shaka/ts-clear-multislice/video.m3u8"), map: "0:v:0")
        #expect(ours.count == 144)
        #expect(ours == twin)
    }
}
