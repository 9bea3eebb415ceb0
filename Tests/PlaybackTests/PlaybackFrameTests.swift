import Foundation
import KeyServer
import OfflinePackage
import PackageTestSupport
import Packaging
import Playback
import Testing

/// ffmpeg plays the session URL; every decoded frame must equal the clear source's.
@Suite(.timeLimit(.minutes(5)))
struct PlaybackFrameTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var fixture: String
        var method: ContentPackager.Method
        /// Bytes read per step; small ones make every segment take many steps through the decryptor.
        var chunkSize = 256 * 1024
        var testDescription: String { "\(fixture) \(method.rawValue) chunk \(chunkSize)" }
    }

    static let cases: [Case] = [
        Case(fixture: "ts-clear/index.m3u8", method: .sampleAES),
        Case(fixture: "ts-clear/index.m3u8", method: .aes128),
        Case(fixture: "fmp4-clear/index.m3u8", method: .sampleAES),
        Case(fixture: "fmp4-clear/index.m3u8", method: .aes128),
        Case(fixture: "ts-clear/index.m3u8", method: .sampleAES, chunkSize: 4096),
        Case(fixture: "fmp4-clear/index.m3u8", method: .sampleAES, chunkSize: 4096),
        Case(fixture: "fmp4-clear/index.m3u8", method: .aes128, chunkSize: 4096),
    ]

    @Test(arguments: cases)
    func decodedFramesEqualTheClearSource(_ testCase: Case) async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let clear = TestPackages.mediaFixture(testCase.fixture)
        let package = try await TestPackages.make(clearPlaylist: clear, method: testCase.method, assetId: "movie", in: root)
        let expectedVideo = try await DecodedFrames.of(clear, map: "0:v:0")
        let expectedAudio = try await DecodedFrames.of(clear, map: "0:a:0")
        #expect(expectedVideo.count == 144)
        #expect(!expectedAudio.isEmpty)
        // Every media file of the package is encrypted, with a key the manifest lists.
        let segments = package.manifest.renditions.flatMap(\.segments).compactMap(\.file)
        #expect(!package.manifest.keys.isEmpty && segments.allSatisfy { $0.key != nil })

        let configuration = PlaybackServer.Configuration(chunkSize: testCase.chunkSize)
        let ((video, audio), end) = try await PlaybackHarness.withSession(package, configuration: configuration) { address in
            (
                // The player's one-time URL first, then the session's own for the second rendition.
                try await DecodedFrames.of(address.multivariantURL, map: "0:v:0"),
                try await DecodedFrames.of(address.sessionMultivariantURL, map: "0:a:0")
            )
        }
        #expect(video == expectedVideo)
        #expect(audio == expectedAudio)
        #expect(end.reason == .stopped)

        // Every request was logged, without the session path (ffmpeg asks for `bytes=0-`, so 206 is a success too).
        let access = PlaybackHarness.logLines(package.package.accessLogURL)
        #expect(access.contains { $0.contains("/master.m3u8") && ($0.contains(" 200 ") || $0.contains(" 206 ")) })
        #expect(access.contains { $0.contains("/video/00002.") && ($0.contains(" 200 ") || $0.contains(" 206 ")) })
        #expect(PlaybackHarness.logLines(package.package.errorLogURL).isEmpty)
    }

    @Test func identityKeysPlayWithoutALease() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let clear = TestPackages.mediaFixture("fmp4-clear/index.m3u8")
        let package = try await TestPackages.make(clearPlaylist: clear, method: .aes128, assetId: "movie", keys: .identity(expiresAt: nil), in: root)
        #expect(package.manifest.keys.allSatisfy { $0.kind == .identity })
        let expected = try await DecodedFrames.of(clear, map: "0:v:0")
        let (video, _) = try await PlaybackHarness.withSession(package) { address in
            try await DecodedFrames.of(address.multivariantURL, map: "0:v:0")
        }
        #expect(video == expected)
    }

    @Test(arguments: [(ContentPackager.Method.sampleAES, true), (.aes128, true), (.sampleAES, false)])
    func alternateAudioRenditionsPlay(_ method: ContentPackager.Method, demo: Bool) async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let fixture = try TestPackages.alternateAudioFixture(in: root, preferDemo: demo)
        let package = try await TestPackages.make(clearPlaylist: fixture.master, method: method, assetId: "demo", in: root)
        #expect(package.manifest.renditions.filter { $0.kind == .audio }.count == fixture.audio.count)
        #expect(package.manifest.renditions.contains { $0.kind == .subtitles })

        // The clear multivariant playlist is the reference: ffmpeg times a rendition played through a multivariant
        // playlist differently from the same media playlist opened alone.
        var expected: [String: [String]] = [:]
        for language in fixture.audio.keys {
            expected[language] = try await DecodedFrames.of(fixture.master, map: "0:a:m:language:\(language)")
        }
        let expectedVideo = try await DecodedFrames.of(fixture.master, map: "0:v:0")
        let played = try await PlaybackHarness.withSession(package) { address in
            var frames: [String: [String]] = ["video": try await DecodedFrames.of(address.multivariantURL, map: "0:v:0")]
            for language in fixture.audio.keys {
                frames[language] = try await DecodedFrames.of(address.sessionMultivariantURL, map: "0:a:m:language:\(language)")
            }
            // Subtitles are served as they were packaged (clear).
            let subtitles = package.manifest.renditions.first { $0.kind == .subtitles }!
            let file = subtitles.segments[0].file!
            let (status, body) = try await PlaybackHarness.get(address.sessionURL.appendingPathComponent(file.path))
            return (frames, status, body)
        }.0
        #expect(played.0["video"] == expectedVideo)
        for (language, frames) in expected {
            #expect(!frames.isEmpty)
            // The language's audio, decoded frame for frame; stream indexes differ between the playlists, so compare
            // timestamps, sizes and hashes.
            #expect(played.0[language]?.map(Self.withoutStreamIndex) == frames.map(Self.withoutStreamIndex), "audio \(language)")
        }
        #expect(played.1 == 200)
        let subtitleFile = package.manifest.renditions.first { $0.kind == .subtitles }!.segments[0].file!
        #expect(played.2 == Array(try Data(contentsOf: package.url(of: subtitleFile.path))))
    }

    private static func withoutStreamIndex(_ line: String) -> String {
        line.split(separator: ",", maxSplits: 1).last.map { String($0) } ?? line
    }
}
