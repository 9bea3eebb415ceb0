import Foundation
import Glibc
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
            "segment", "decrypt", "--method", "aes-128", "--key-file", try TestSupport.keyFile(Self.aesKey), "--iv", Self.aesIV,
            Self.media.appendingPathComponent("ts-aes128-iv/seg_1.ts").path, out.path,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(try Data(contentsOf: out) == Data(contentsOf: Self.media.appendingPathComponent("ts-clear/seg_1.ts")))
    }

    @Test func segmentDecryptSampleAESThroughPipes() async throws {
        let result = try await ProcessRunner.run(
            try TestSupport.stowageBinary,
            ["segment", "decrypt", "--method", "sample-aes", "--key-file", try TestSupport.keyFile(Self.sampleKey), "--iv", Self.sampleIV, "-", "-"],
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
        let common = ["--method", "sample-aes", "--key-file", try TestSupport.keyFile(Self.sampleKey), "--iv", Self.sampleIV]
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
            "segment", "decrypt", "--method", "aes-128", "--key-file", try TestSupport.keyFile("618e0c850d814906461491ad97089fe0"), "--iv",
            Self.aesIV,
            Self.media.appendingPathComponent("ts-aes128-iv/seg_0.ts").path, out.path,
        ])
        #expect(result.status == 1)
        #expect(result.standardError.contains("[bad_padding]"))
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }

    /// A failure leaves what was at the output path as it was: an existing file (here the input itself, decrypted in
    /// place with a wrong key) unchanged, a FIFO (standing in for `/dev/null`, which an earlier version unlinked when
    /// run as root) still there, and no temporary file beside either.
    @Test func aFailedSegmentLeavesTheOutputPathAsItWas() async throws {
        let directory = try TestSupport.temporaryDirectory("seg-keep")
        defer { try? FileManager.default.removeItem(at: directory) }
        let segment = directory.appendingPathComponent("seg_0.ts")
        let original = try Data(contentsOf: Self.media.appendingPathComponent("ts-aes128-iv/seg_0.ts"))
        try original.write(to: segment)
        let wrongKey = [
            "segment", "decrypt", "--method", "aes-128", "--key-file", try TestSupport.keyFile("618e0c850d814906461491ad97089fe0"), "--iv",
            Self.aesIV,
        ]
        let inPlace = try await TestSupport.runStowage(wrongKey + [segment.path, segment.path])
        #expect(inPlace.status == 1 && inPlace.standardError.contains("[bad_padding]"), "\(inPlace.standardError)")
        #expect(try Data(contentsOf: segment) == original)

        let fifo = directory.appendingPathComponent("sink")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let reader = try ProcessRunner.start(URL(fileURLWithPath: "/bin/cat"), [fifo.path])
        let toFIFO = try await TestSupport.runStowage(wrongKey + [segment.path, fifo.path])
        _ = try await reader.waitForExit(timeout: .seconds(10))
        #expect(toFIFO.status == 1 && toFIFO.standardError.contains("[bad_padding]"), "\(toFIFO.standardError)")
        #expect(FileKinds.isFIFO(fifo.path), "the FIFO was removed or replaced")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["seg_0.ts", "sink"])

        // In place with the right key, the segment becomes its clear twin.
        let right = try await TestSupport.runStowage([
            "segment", "decrypt", "--method", "aes-128", "--key-file", try TestSupport.keyFile(Self.aesKey), "--iv", Self.aesIV, segment.path,
            segment.path,
        ])
        #expect(right.status == 0, "\(right.standardError)")
        #expect(try Data(contentsOf: segment) == Data(contentsOf: Self.media.appendingPathComponent("ts-clear/seg_0.ts")))
    }

    /// What a user gets wrong with `stowage segment`, each in the one error shape with its own code.
    @Test func segmentMistakes() async throws {
        let directory = try TestSupport.temporaryDirectory("seg-mistakes")
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = directory.appendingPathComponent("home")
        let out = directory.appendingPathComponent("out.ts").path
        let aes = ["segment", "decrypt", "--method", "aes-128", "--key-file", try TestSupport.keyFile(Self.aesKey)]
        let encrypted = Self.media.appendingPathComponent("ts-aes128-iv/seg_0.ts").path
        let cases: [(arguments: [String], code: String)] = [
            (aes + [encrypted, out], "missing_iv"),
            (
                [
                    "segment", "decrypt", "--method", "sample-aes", "--key-file", try TestSupport.keyFile(Self.sampleKey),
                    Self.media.appendingPathComponent("fmp4-clear/seg_0.m4s").path, out,
                ],
                "missing_init_section"
            ),
            (arguments: aes + ["--iv", Self.aesIV, directory.appendingPathComponent("absent.ts").path, out], code: "unreadable"),
            (aes + ["--iv", Self.aesIV, encrypted, directory.appendingPathComponent("no/such/dir/out.ts").path], "output_failed"),
            (aes + ["--iv", Self.aesIV, directory.path, out], "segment_io_failed"),
        ]
        for (arguments, code) in cases {
            try await ErrorShapeTests.expectPlainFailure(arguments, code: code, home: home)
        }
        #expect(!FileManager.default.fileExists(atPath: out))
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
