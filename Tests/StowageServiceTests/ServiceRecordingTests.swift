import AssetDownload
import DownloadTestSupport
import Foundation
import OfflinePackage
import StowageCore
import StowageLibrary
import StowageService
import Testing

/// Live recordings run by the download service: ended through its socket (`stowage stop`), running or not, and
/// recorded on after the service stops and starts again. The stream is a live playlist (no EXT-X-ENDLIST) the test
/// grows by hand, served by the fixture's origin.
@Suite("The download service records live streams: stop, pause, restart", .timeLimit(.minutes(2)))
struct ServiceRecordingTests {
    /// Writes the live playlist with segments `3..<3+count` (1 s each, never ended) and their files.
    static func publish(_ count: Int, in fixture: DownloadFixture) throws {
        let folder = fixture.originRoot.appendingPathComponent("live", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var lines = ["#EXTM3U", "#EXT-X-TARGETDURATION:1", "#EXT-X-MEDIA-SEQUENCE:3"]
        for n in 0..<count {
            lines += ["#EXTINF:1.0,", "s\(n).ts"]
            try Data(repeating: UInt8(n), count: 188 * (n + 1)).write(to: folder.appendingPathComponent("s\(n).ts"))
        }
        try (lines.joined(separator: "\n") + "\n").write(to: folder.appendingPathComponent("index.m3u8"), atomically: true, encoding: .utf8)
    }

    /// The recording's package.
    static func live(_ fixture: DownloadFixture) throws -> PackageDirectory {
        try PackageDirectory(assetId: "live", in: fixture.clientDirectory)
    }

    /// Segment files recorded so far.
    static func recorded(_ fixture: DownloadFixture) -> Int {
        guard let video = try? live(fixture).url.appendingPathComponent("video") else { return 0 }
        return ((try? FileManager.default.contentsOfDirectory(atPath: video.path)) ?? []).filter { $0.hasSuffix(".ts") }.count
    }

    /// Waits (10 s at most) until `count` segments are recorded.
    static func waitForSegments(_ count: Int, _ fixture: DownloadFixture) async throws {
        for _ in 0..<500 where recorded(fixture) < count { try await Task.sleep(for: .milliseconds(20)) }
        #expect(recorded(fixture) >= count, "\(recorded(fixture)) of \(count) segments recorded within 10 s")
    }

    static func request(_ origin: URL) -> DownloadRequest {
        DownloadRequest(url: origin.appendingPathComponent("live/index.m3u8").absoluteString, assetId: "live")
    }

    @Test("stop-recording ends a running recording, which completes with what it recorded; a second stop says not_recording")
    func stopRunning() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try Self.publish(1, in: fixture)
        try await fixture.withServers { origin, _ in
            let service = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: ServiceTests.configuration())
            try await withService(service) { client in
                _ = try await client.submit(Self.request(origin))
                try await Self.waitForSegments(1, fixture)
                #expect(try await client.download(assetId: "live").running)
                _ = try await client.stopRecording(assetId: "live")
                #expect(try await attach(client, "live").last?.event == .finished)
                do {
                    _ = try await client.stopRecording(assetId: "live")
                    Issue.record("a complete package was stopped again")
                } catch let error as ReportedError {
                    #expect(error.code == "not_recording")
                    #expect(error.message.contains("stowage pause live"))
                }
            }
        }
        let manifest = try Self.live(fixture).readManifest()
        #expect(manifest.isComplete)
        #expect(manifest.recording?.endReason == .stopped)
        #expect(manifest.renditions.first?.segments.map(\.mediaSequence) == [3])
    }

    @Test("a recording stopped with the service records on when it starts again; paused by the user, stop-recording ends it")
    func restartPauseStop() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try Self.publish(1, in: fixture)
        try await fixture.withServers { origin, _ in
            let first = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: ServiceTests.configuration())
            try await withService(first) { client in
                _ = try await client.submit(Self.request(origin))
                try await Self.waitForSegments(1, fixture)
            }
            let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
            let stopped = try #require(try library.downloadRecord(assetId: "live"))
            #expect(stopped.state == .paused && stopped.failureCode == "service_stopped")
            #expect(try library.isRecordingLive(assetId: "live"))
            await library.close()

            // The stream went on meanwhile; the next start records on from it.
            try Self.publish(2, in: fixture)
            let second = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: ServiceTests.configuration())
            try await withService(second) { client in
                try await Self.waitForSegments(2, fixture)
                let paused = try await client.pause(assetId: "live")
                #expect(paused.state == "paused" && !paused.running)
                // Not running: the stop puts it back in the queue to end as it starts, without reloading.
                try Self.publish(3, in: fixture)
                _ = try await client.stopRecording(assetId: "live")
                #expect(try await attach(client, "live").last?.event == .finished)
            }
        }
        let manifest = try Self.live(fixture).readManifest()
        #expect(manifest.isComplete)
        #expect(manifest.recording?.endReason == .stopped)
        #expect(manifest.recording?.gaps.isEmpty == true)
        #expect(manifest.renditions.first?.segments.map(\.mediaSequence) == [3, 4])
        for (n, segment) in (manifest.renditions.first?.segments ?? []).enumerated() {
            let local = try Data(contentsOf: try Self.live(fixture).url(forRelativePath: try #require(segment.file?.path)))
            #expect(local == Data(repeating: UInt8(n), count: 188 * (n + 1)))
        }
    }
}
