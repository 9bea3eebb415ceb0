import AssetDownload
import Foundation
import HLS
import StowageTestSupport
import Testing

/// The `stowage` executable as a user runs it.
struct CommandLineTests {
    private static let master = TestSupport.fixtures.appendingPathComponent("playlists/master.m3u8").path

    @Test func inspectSummarizesAFileDeeply() async throws {
        let result = try await TestSupport.runStowage(["inspect", Self.master, "--deep"])
        #expect(result.status == 0, "\(result.standardError)")
        let text = result.standardOutput
        #expect(text.contains("Multivariant playlist \(Self.master)"))
        #expect(text.contains("Variants (2):"))
        #expect(text.contains("640x360"))
        #expect(text.contains("[aud] Français (fr, autoselect, 2 ch)  audio_fr.m3u8"))
        #expect(text.contains("SAMPLE-AES  keyformat com.stowage.skd  skd://demo-movie/000102030405060708090a0b0c0d0e0f"))
        #expect(text.contains("encryption: SAMPLE-AES on 4 of 4 segments"))
        #expect(text.contains("segments: 4, duration 14.000 s (0:00:14)"))
        #expect(text.contains("Media playlists (6):"))
    }

    @Test func inspectJSONIsTheFullModel() async throws {
        let path = TestSupport.fixtures.appendingPathComponent("playlists/aes128_fmp4.m3u8").path
        let result = try await TestSupport.runStowage(["inspect", path, "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let inspection = try JSONDecoder().decode(PlaylistInspection.self, from: Data(result.standardOutput.utf8))
        let segments = try #require(inspection.resolvedSegments)
        #expect(segments.map(\.mediaSequence) == [10, 11, 12])
        #expect(segments[0].keys.first?.iv == EncryptionKey.iv(forMediaSequence: 1))
        #expect(segments[1].keys.first?.iv == EncryptionKey.iv(forMediaSequence: 11))
        #expect(segments[1].keys.first?.url?.path.hasSuffix("/playlists/keys/k2.key") == true)
        #expect(segments[2].keys.isEmpty)
        #expect(segments[2].initializationSection?.byteRange == ResolvedByteRange(offset: 0, length: 720))
        #expect(segments[2].discontinuitySequence == 1)
        #expect(result.standardOutput.contains("\"iv\" : \"0000000000000000000000000000000b\""))
        guard case .media(let playlist) = inspection.playlist else {
            Issue.record("expected a media playlist")
            return
        }
        #expect(playlist.segments.count == 3)
    }

    @Test func inspectReportsAnInvalidPlaylistWithItsLineAndExitsOne() async throws {
        let directory = try TestSupport.temporaryDirectory("cli-bad")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("bad.m3u8")
        try "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=abc\nv.m3u8\n".write(to: path, atomically: true, encoding: .utf8)
        let result = try await TestSupport.runStowage(["inspect", path.path])
        #expect(result.status == 1)
        // One line in the shared shape: the message with the line, then the code.
        #expect(result.standardError.hasPrefix("error: ") && result.standardError.contains("line 2: attribute BANDWIDTH"))
        #expect(result.standardError.hasSuffix("[invalid_attribute_value]\n"))
        let json = try await TestSupport.runStowage(["inspect", path.path, "--json"])
        #expect(json.status == 1)
        let object = try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: [String: String]]
        #expect(object?["error"]?["code"] == "invalid_attribute_value")

        let missing = try await TestSupport.runStowage(["inspect", directory.appendingPathComponent("none.m3u8").path])
        #expect(missing.status == 1)
        #expect(missing.standardError.contains("playlist_unreadable"))
    }

    @Test func originCommandServesAndInspectFetchesOverLoopback() async throws {
        let origin = try ProcessRunner.start(
            try TestSupport.stowageBinary,
            ["origin", TestSupport.fixtures.appendingPathComponent("playlists").path, "--port", "0"]
        )
        defer { origin.kill() }
        // The first line is the address; poll the output file for it without blocking a thread.
        var output = Data()
        let deadline = ContinuousClock.now + .seconds(60)
        while origin.isRunning, !output.contains(UInt8(ascii: "\n")), output.count < 200, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            output = try origin.standardOutput()
        }
        let line = String(decoding: output.prefix { $0 != UInt8(ascii: "\n") }.prefix(200), as: UTF8.self)
        #expect(line.hasPrefix("listening on http://127.0.0.1:"))
        let base = String(line.dropFirst("listening on ".count))

        let result = try await TestSupport.runStowage(["inspect", base + "/master.m3u8", "--deep"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("Multivariant playlist \(base)/master.m3u8"))
        #expect(!result.standardOutput.contains("error:"))

        origin.interrupt()
        let exit = try await origin.waitForExit(timeout: .seconds(60))
        #expect(!exit.timedOut)
        #expect(exit.status == 0)
    }
}
