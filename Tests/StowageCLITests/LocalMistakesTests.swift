import Foundation
import StowageTestSupport
import Testing

/// Mistakes a user can make with local files alone (no server): each command fails in the one error shape, with the
/// code that names the mistake (issue 15: every declared code triggered by a test).
@Suite("Mistakes with local playlists: decrypt, inspect, download, export and keys, each with its own code")
struct LocalMistakesTests {
    private static let media = TestSupport.fixtures.appendingPathComponent("media")
    // Test keys from Keys/media-fixtures.test.json.
    private static let aesKey = "618e0c850d814906461491ad97089fea"
    private static let aesIV = "0xa97e67e7198ca85d61edaef31146d6fc"

    static func write(_ text: String, to url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    static func copySegment(_ name: String, to folder: URL) throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: media.appendingPathComponent("ts-aes128-iv/\(name)"),
            to: folder.appendingPathComponent(name)
        )
    }

    @Test("stowage decrypt: a key of the wrong length, a segment that is not a local file, a METHOD it does not decrypt")
    func decryptMistakes() async throws {
        let root = try TestSupport.temporaryDirectory("decrypt-mistakes")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = root.appendingPathComponent("home")

        let wrongLength = try await ErrorShapeTests.expectFailure(
            [
                "decrypt", Self.media.appendingPathComponent("ts-aes128-iv/index.m3u8").path, "--out", root.appendingPathComponent("a").path,
                "--key-file", try TestSupport.keyFile(Self.aesKey + Self.aesKey),
            ],
            code: "wrong_key_length",
            home: home
        )
        #expect(wrongLength?.line.contains("32 bytes") == true, "\(wrongLength?.line ?? "")")

        let remote = root.appendingPathComponent("remote/index.m3u8")
        try Self.write(
            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128,URI=\"k.key\",IV=\(Self.aesIV)\n#EXTINF:2,\n"
                + "http://127.0.0.1:9/seg_0.ts\n#EXT-X-ENDLIST\n",
            to: remote
        )
        try await ErrorShapeTests.expectFailure(
            ["decrypt", remote.path, "--out", root.appendingPathComponent("b").path, "--key-file", try TestSupport.keyFile(Self.aesKey)],
            code: "not_local",
            home: home
        )

        let unknown = root.appendingPathComponent("unknown/index.m3u8")
        try Self.copySegment("seg_0.ts", to: unknown.deletingLastPathComponent())
        try Self.write(
            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=SAMPLE-AES-CENC,URI=\"k.key\"\n#EXTINF:2,\nseg_0.ts\n#EXT-X-ENDLIST\n",
            to: unknown
        )
        try await ErrorShapeTests.expectFailure(
            ["decrypt", unknown.path, "--out", root.appendingPathComponent("c").path, "--key-file", try TestSupport.keyFile(Self.aesKey)],
            code: "unsupported_method",
            home: home
        )
        for folder in ["a", "b", "c"] {
            let written = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(folder).path)) ?? []
            #expect(written.filter { !$0.hasPrefix(".") }.isEmpty, "\(folder): \(written)")
        }
    }

    @Test("a playlist larger than 64 MiB, a multivariant playlist with no variant, a key server URL that is not http(s)")
    func inputMistakes() async throws {
        let root = try TestSupport.temporaryDirectory("input-mistakes")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = root.appendingPathComponent("home")

        // Sparse: the size is checked before anything is read.
        let big = root.appendingPathComponent("big.m3u8")
        try Data("#EXTM3U\n".utf8).write(to: big)
        let handle = try FileHandle(forWritingTo: big)
        try handle.truncate(atOffset: 65 << 20)
        try handle.close()
        try await ErrorShapeTests.expectFailure(["inspect", big.path], code: "playlist_too_large", home: home)

        let master = root.appendingPathComponent("novariant/master.m3u8")
        try Self.write("#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",URI=\"a.m3u8\"\n", to: master)
        try await ErrorShapeTests.expectFailure(["download", master.path, "--asset-id", "nv"], code: "no_variant", home: home)

        try await ErrorShapeTests.expectFailure(["keys", "unpin", "ftp://keys.example"], code: "invalid_arguments", home: home)
    }

    /// For commands that report progress on standard error before they fail (download, resume): a non-zero status, the
    /// error as the last line in the one shape, and with `--json` the same code in the last line on standard output.
    @discardableResult
    static func expectFailureAfterProgress(
        _ arguments: [String],
        code: String,
        home: URL,
        json: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> String {
        let plain = try await ServiceCommandTests.stowage(arguments, home: home)
        let stderr = String(decoding: plain.standardError, as: UTF8.self)
        let last = stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(plain.status != 0 && !plain.timedOut, "stowage \(arguments): status \(plain.status)", sourceLocation: sourceLocation)
        #expect(last.hasPrefix("error: ") && last.hasSuffix("[\(code)]"), "stowage \(arguments): \(stderr)", sourceLocation: sourceLocation)
        for raw in ErrorShapeTests.rawDescriptions where last.contains(raw) {
            Issue.record("stowage \(arguments) shows a raw description (\(raw)): \(last)", sourceLocation: sourceLocation)
        }
        if json {
            let output = try await ServiceCommandTests.stowage(arguments + ["--json"], home: home)
            let line = String(decoding: output.standardOutput, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
            #expect(line.contains(#""code":"\#(code)""#), "stowage \(arguments) --json: \(line)", sourceLocation: sourceLocation)
        }
        return last
    }

    /// A key server or origin answers a failed download with a message holding line feeds (red team, round 5): the
    /// message is stored as it came, and `stowage list` shows it on its one line, so it cannot print a forged row of
    /// its own ("movie-2 complete ... lease: valid").
    @Test("a failure message with line feeds stays on one line of list: it cannot forge a row")
    func aFailureMessageCannotForgeARowOfList() async throws {
        let root = try TestSupport.temporaryDirectory("forged-row")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = root.appendingPathComponent("home")
        let source = root.appendingPathComponent("source")
        try Self.copySegment("seg_0.ts", to: source)
        try Self.write(
            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg_0.ts\n#EXTINF:2,\nmissing.ts\n#EXT-X-ENDLIST\n",
            to: source.appendingPathComponent("index.m3u8")
        )
        let download = ["download", source.appendingPathComponent("index.m3u8").path, "--asset-id", "evil-1"]
        try await Self.expectFailureAfterProgress(download, code: "segment_http_status", home: home, json: false)
        let forged = "denied\nmovie-2  complete  512.0 MB  renditions 3/3 offline  lease: valid, 29 days left\n  movie-3: complete"
        #expect(
            try await LibraryCommandTests.sqlite(
                "UPDATE download_tasks SET failure_message = '\(forged)' WHERE asset_id = 'evil-1'",
                home: home
            ) == 0
        )
        let list = try await ServiceCommandTests.stowage(["list"], home: home)
        let lines = String(decoding: list.standardOutput, as: UTF8.self).split(separator: "\n")
        #expect(list.status == 0)
        #expect(!lines.contains { $0.hasPrefix("movie-2") || $0.contains("movie-3: complete") && !$0.contains("\\u000a") }, "\(lines)")
        #expect(lines.contains { $0.contains("denied\\u000amovie-2") }, "\(lines)")
    }

    /// A download of a local playlist whose second segment is shorter than its byte range says: the download fails
    /// with its files kept, and what a user then tries is refused by name.
    @Test("a local download that fails mid-way: segment_failed, then download_exists, export_incomplete, inline_key_missing, download_state_error")
    func aFailedLocalDownload() async throws {
        let root = try TestSupport.temporaryDirectory("local-download")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = root.appendingPathComponent("home")
        let source = root.appendingPathComponent("source")
        try Self.copySegment("seg_0.ts", to: source)
        try Self.copySegment("seg_1.ts", to: source)
        let key = Data((0..<16).map { UInt8(Self.aesKey.dropFirst($0 * 2).prefix(2), radix: 16)! }).base64EncodedString()
        try Self.write(
            """
            #EXTM3U
            #EXT-X-VERSION:4
            #EXT-X-TARGETDURATION:2
            #EXT-X-KEY:METHOD=AES-128,URI="data:text/plain;base64,\(key)",IV=\(Self.aesIV)
            #EXTINF:2,
            seg_0.ts
            #EXTINF:2,
            #EXT-X-BYTERANGE:10000000@0
            seg_1.ts
            #EXT-X-ENDLIST

            """,
            to: source.appendingPathComponent("index.m3u8")
        )
        let download = ["download", source.appendingPathComponent("index.m3u8").path, "--asset-id", "il"]
        // The first run fails; with --json, the second is told the download exists.
        let failed = try await Self.expectFailureAfterProgress(download, code: "segment_failed", home: home, json: false)
        #expect(failed.contains("video/00001.ts") && failed.contains("source/seg_1.ts") && !failed.contains(".part"), "\(failed)")
        try await ErrorShapeTests.expectFailure(download, code: "download_exists", home: home)
        try await ErrorShapeTests.expectFailure(
            ["export", "il", "--out", root.appendingPathComponent("il.mp4").path],
            code: "export_incomplete",
            home: home
        )
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("il.mp4").path))

        // The inline key erased from the key store by hand: resuming cannot get it back from the package.
        #expect(
            try await LibraryCommandTests.sqlite(
                "DELETE FROM key_identity_keys; UPDATE download_tasks SET keys_acquired = 0 WHERE asset_id = 'il'",
                home: home
            ) == 0
        )
        try await Self.expectFailureAfterProgress(["resume", "il"], code: "inline_key_missing", home: home)

        // The stored request overwritten by hand: its URL and headers are lost, and resume says so.
        #expect(try await LibraryCommandTests.sqlite("UPDATE download_tasks SET request = 'x' WHERE asset_id = 'il'", home: home) == 0)
        let damaged = try await ErrorShapeTests.expectFailure(["resume", "il"], code: "download_state_error", home: home)
        #expect(damaged?.line.contains("stowage cancel il") == true, "\(damaged?.line ?? "")")
    }
}
