import Foundation
import OfflinePackage
import StowageTestSupport
import Testing

/// Live recording against live HLS written by tools nobody here wrote, so a misreading shared by Stowage's own live
/// origin and its recorder cannot pass: ffmpeg's HLS muxer in real time (a sliding window, `delete_segments`, AES-128
/// keys rotated by `periodic_rekey`, a random IV per key) and nginx-rtmp (`hls_keys`, a key per two fragments, the IV
/// the key's number, no EXT-X-ENDLIST ever). Each source also writes a clear twin from the same packets
/// (`scripts/live-sources/`); what `stowage play` serves from the recording must be the twin's packets, as ffmpeg's
/// framemd5 lists them.
@Suite("Live sources written by ffmpeg and nginx-rtmp")
struct LiveSourceTests {
    /// A running source: the script's process (its own process group), its playlist URL and its folder.
    struct Source {
        let process: RunningProcess
        let url: URL
        let directory: URL
    }

    /// Runs `body` with the source `script` (in scripts/live-sources/) started in a fresh folder, then stops it and
    /// everything it started, whatever `body` did.
    static func withSource<T>(
        _ script: String,
        environment extra: [String: String],
        _ body: (Source) async throws -> T
    ) async throws -> T {
        let directory = try TestSupport.temporaryDirectory("live-source")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = TestSupport.repositoryRoot.appendingPathComponent("scripts/live-sources/\(script)").path
        let process = try ProcessRunner.start(
            URL(fileURLWithPath: "/bin/bash"),
            [path, directory.path],
            environment: ProcessInfo.processInfo.environment.merging(extra) { $1 }
        )
        defer { process.killProcessGroup() }
        var url: URL?
        // The source prints its playlist URL once the playlist exists (nginx and an encoder start in a few seconds).
        for _ in 0..<600 where process.isRunning && url == nil {
            let output = String(decoding: try process.standardOutput(), as: UTF8.self)
            url = output.split(separator: "\n").first { $0.hasPrefix("http://127.0.0.1:") }.flatMap { URL(string: String($0)) }
            if url == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        guard let url else {
            let errors = String(decoding: try process.standardError(), as: UTF8.self)
            throw FrameHashes.Failure(description: "\(script) did not start (scripts/test.sh installs what it needs): \(errors)")
        }
        let result = try await body(Source(process: process, url: url, directory: directory))
        // SIGINT: the script stops its encoder and servers and exits; the process group's SIGKILL follows anyway.
        process.interrupt()
        _ = try await process.waitForExit(timeout: .seconds(20))
        return result
    }

    /// The recording of `assetId` is complete, without gaps, holds `minimumKeys` keys or more, and `stowage play` serves
    /// exactly the packets of the clear twin's files of the segments it recorded (named as the source named them).
    static func expectClearTwin(home: URL, assetId: String, twin: URL, minimumKeys: Int) async throws {
        let package = try PackageDirectory(assetId: assetId, in: DataDirectory.fromEnvironment(["STOWAGE_HOME": home.path]))
        let manifest = try package.readManifest()
        #expect(manifest.isComplete)
        #expect(manifest.recording?.gaps.isEmpty == true, "\(String(describing: manifest.recording?.gaps))")
        #expect(manifest.keys.count >= minimumKeys, "the recording holds \(manifest.keys.count) keys")
        let video = try #require(manifest.renditions.first)
        let segments = video.segments.compactMap { segment in segment.file.map { (segment.duration, $0.sourceURL) } }
        #expect(segments.count >= 4, "\(segments.count) segments recorded")
        // The clear twin as one playlist: the same files, in the recording's order.
        var lines = [
            "#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:\(video.segments.map(\.duration).max().map { Int($0.rounded(.up)) } ?? 2)",
        ]
        for (duration, source) in segments {
            let name = try #require(URL(string: source)?.lastPathComponent)
            try #require(FileManager.default.fileExists(atPath: twin.appendingPathComponent(name).path), "no clear twin of \(name)")
            lines += ["#EXTINF:\(duration),", name]
        }
        lines.append("#EXT-X-ENDLIST")
        let twinPlaylist = twin.appendingPathComponent("recorded.m3u8")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: twinPlaylist)
        let expected = try await FrameHashes.of(twinPlaylist)

        // ffmpeg as the player: the packets of the whole recording.
        let served = try await Self.whilePlaying(assetId, home: home) { url in try await FrameHashes.of(url) }
        #expect(expected.count > 100)
        #expect(served == expected, "served \(served.count) packets, the clear twin has \(expected.count)")
        // curl as the player: every segment byte for byte (a wrong IV garbles only a segment's first 16 bytes, its PAT,
        // which no packet hash sees).
        try await Self.whilePlaying(assetId, home: home) { url in
            let master = String(decoding: try await Self.get(url), as: UTF8.self)
            let variant = try #require(master.split(separator: "\n").first { $0.hasPrefix("/") }, "\(master)")
            let session = try #require(variant.split(separator: "/").first)
            var compared = 0
            for segment in video.segments {
                guard let file = segment.file else { continue }
                let name = try #require(URL(string: file.sourceURL)?.lastPathComponent)
                let bytes = try await Self.get(try #require(URL(string: "/\(session)/\(file.path)", relativeTo: url)?.absoluteURL))
                #expect(bytes == (try Data(contentsOf: twin.appendingPathComponent(name))), "\(file.path) differs from the clear \(name)")
                compared += 1
            }
            #expect(compared == segments.count)
        }
    }

    /// Runs `body` with the URL `stowage play ASSET --player none --offline` prints, then stops the session.
    @discardableResult
    static func whilePlaying<T>(_ assetId: String, home: URL, _ body: (URL) async throws -> T) async throws -> T {
        let play = try ProcessRunner.start(
            try TestSupport.stowageBinary,
            ["play", assetId, "--player", "none", "--offline"],
            environment: ServiceCommandTests.environment(home: home)
        )
        defer { play.kill() }
        var url: URL?
        for _ in 0..<200 where play.isRunning && url == nil {
            let line = String(decoding: try play.standardOutput(), as: UTF8.self).split(separator: "\n")
                .first { $0.hasPrefix("playing http://127.0.0.1:") }
            url = line.flatMap { URL(string: String($0.dropFirst("playing ".count))) }
            if url == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let errors = String(decoding: try play.standardError(), as: UTF8.self)
        let result = try await body(try #require(url, "play: \(errors)"))
        play.interrupt()
        _ = try await play.waitForExit(timeout: .seconds(20))
        return result
    }

    /// The body of a GET with curl, an HTTP client nobody here wrote.
    static func get(_ url: URL) async throws -> Data {
        let result = try await ProcessRunner.run(program: "curl", ["-sSf", "--max-time", "20", url.absoluteString])
        try #require(result.status == 0, "curl \(url): \(String(decoding: result.standardError, as: UTF8.self))")
        return result.standardOutput
    }

    /// ffmpeg ends its stream after 14 s with EXT-X-ENDLIST; the recording follows it to the end.
    @Test("ffmpeg's live HLS muxer: sliding window, deleted segments, a key rotated every 4 s")
    func ffmpegMuxer() async throws {
        let home = try TestSupport.temporaryDirectory("live-ffmpeg")
        defer { try? FileManager.default.removeItem(at: home) }
        try await Self.withSource("ffmpeg-live.sh", environment: ["DURATION": "14", "REKEY_SECONDS": "4", "LINGER_SECONDS": "120"]) { source in
            let recorded = try await ServiceCommandTests.stowage(
                ["download", source.url.absoluteString, "--asset-id", "ffmpeg-live"],
                home: home,
                timeout: .seconds(120)
            )
            try #require(recorded.status == 0, "download: \(String(decoding: recorded.standardError, as: UTF8.self))")
            try await Self.expectClearTwin(
                home: home,
                assetId: "ffmpeg-live",
                twin: source.directory.appendingPathComponent("clear"),
                minimumKeys: 3
            )
        }
    }

    /// nginx-rtmp never ends a playlist; the recording stops after 12 s of media (`--duration`).
    @Test("nginx-rtmp's live HLS: a key per two fragments, IVs by key number, no end list")
    func nginxRTMP() async throws {
        let home = try TestSupport.temporaryDirectory("live-nginx")
        defer { try? FileManager.default.removeItem(at: home) }
        try await Self.withSource("nginx-live.sh", environment: ["DURATION": "120", "FRAGMENTS_PER_KEY": "2"]) { source in
            let recorded = try await ServiceCommandTests.stowage(
                ["download", source.url.absoluteString, "--asset-id", "nginx-live", "--duration", "12s"],
                home: home,
                timeout: .seconds(120)
            )
            try #require(recorded.status == 0, "download: \(String(decoding: recorded.standardError, as: UTF8.self))")
            try await Self.expectClearTwin(
                home: home,
                assetId: "nginx-live",
                twin: source.directory.appendingPathComponent("clear"),
                minimumKeys: 3
            )
        }
    }
}
