import AssetDownload
import AsyncHTTPClient
import DownloadTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import OfflinePackage
import OriginServer
import Playback
import StowageLibrary
import StowageTestSupport
import Testing

/// `stowage play` on an asset that is still downloading, as AVPlayer plays a download task's asset: the package's
/// complete VOD playlists are served, files are served as they land, a player that runs ahead waits for them.
@Suite("Play while downloading", .timeLimit(.minutes(5)))
struct PlayWhileDownloadingTests {
    /// The decoded frames of `input` (`ffmpeg -f framemd5`), timestamps dropped.
    static func frames(_ input: String, map: String) async throws -> [String] {
        let result = try await ProcessRunner.run(
            program: "ffmpeg",
            ["-nostdin", "-v", "error", "-allowed_extensions", "ALL", "-i", input, "-map", map, "-f", "framemd5", "-"],
            timeout: .seconds(180)
        )
        guard result.status == 0 else {
            throw FrameHashes.Failure(description: "ffmpeg \(input): \(String(decoding: result.standardError, as: UTF8.self))")
        }
        return String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map {
            String($0.split(separator: ",").last ?? "").trimmingCharacters(in: .whitespaces)
        }
    }

    /// Starts downloading the fixture (one file at a time, no subtitles) and returns once the keys are stored and a
    /// first file has landed: the moment a player may start. Also returns the renditions selected.
    static func startDownload(
        _ fixture: DownloadFixture,
        origin: URL,
        keyServer: URL
    ) async throws -> (OfflineLibrary, DownloadTask, [PackageRendition]) {
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let task = try await library.download(
            DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                selection: MediaSelectionOptions(subtitles: .none),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token(),
                concurrency: 1
            )
        )
        var renditions: [PackageRendition] = []
        for await event in task.events {
            if case .resolvedMediaSelections(let selected) = event { renditions = selected }
            if case .progress(let progress) = event, progress.renditions.contains(where: { $0.filesDone > 0 }) { break }
        }
        return (library, task, renditions)
    }

    /// The clear fixture playlist a package rendition was made from (`demo-1/video/360p/index.m3u8` ->
    /// `Fixtures/demo/video/360p/index.m3u8`).
    static func clearTwin(of rendition: PackageRendition, assetId: String) -> String {
        let path = rendition.sourceURL.components(separatedBy: "/\(assetId)/").last ?? ""
        return DownloadFixture.demoFixture.deletingLastPathComponent().appendingPathComponent(path).path
    }

    @Test("a throttled download played from its first segment: frames equal the clear twin's, no file fetched twice")
    func playsWhileTheDownloadRuns() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = OriginRequestLog()
        // About 150 kB/s: the package takes several seconds, the player runs ahead and waits for files.
        let conditions = NetworkConditions(bandwidthBytesPerSecond: 150_000)
        try await fixture.withServers(conditions: conditions, log: log) { origin, keyServer in
            let (library, task, renditions) = try await PlayWhileDownloadingTests.startDownload(fixture, origin: origin, keyServer: keyServer)
            let video = try #require(renditions.first { $0.kind == .video })
            let audio = try #require(renditions.first { $0.kind == .audio })
            let playback = try await library.play(assetId: fixture.assetId)
            #expect(try !fixture.package.readManifest().isComplete, "the download finished before playback started; the test proves nothing")
            let played = try await Self.frames(playback.url.absoluteString, map: "0:v:0")
            let session = playback.address.sessionURL.appendingPathComponent("master.m3u8").absoluteString
            let playedAudio = try await Self.frames(session, map: "0:a:0")
            await playback.stop()
            let manifest = try await task.result()

            #expect(played == (try await Self.frames(Self.clearTwin(of: video, assetId: fixture.assetId), map: "0:v:0")))
            #expect(playedAudio == (try await Self.frames(Self.clearTwin(of: audio, assetId: fixture.assetId), map: "0:a:0")))
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            // The download fetched each file once (the player was served from the package, not from the origin).
            // The package's files only: the session also offers (and ffmpeg probes) the renditions not downloaded.
            let packageFiles = Set(manifest.files.compactMap { URL(string: $0.sourceURL)?.path })
            let fetched = log.entries.filter { ($0.status == 200 || $0.status == 206) && packageFiles.contains($0.path) }.map(\.path)
            #expect(Set(fetched).count == fetched.count, "fetched twice: \(fetched.filter { path in fetched.filter { $0 == path }.count > 1 })")
            // The player asked for files before they landed: some of its requests (paths inside the session, where the
            // downloader's lines name the origin's URL) waited for the download (`time-taken`, the 7th field; a landed
            // file is served in a few ms, an awaited one takes at least its transfer, 18 kB at 150 kB/s for audio).
            let access = try String(contentsOf: fixture.package.accessLogURL, encoding: .utf8).split(separator: "\n")
            let waits = access.map { $0.split(separator: " ") }.filter { $0.count > 6 && $0[3].hasPrefix("/") }.compactMap { Double($0[6]) }
            #expect(waits.contains { $0 > 0.05 }, "no playback request waited: \(waits)")
            await library.close()
        }
    }

    @Test("a paused download plays what it has; a missing file is 404 with segment_not_downloaded, and a wait ends in 503")
    func pausedDownloadPlaysWhatItHas() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 100_000)) { origin, keyServer in
            let (library, task, renditions) = try await PlayWhileDownloadingTests.startDownload(fixture, origin: origin, keyServer: keyServer)
            let last = try #require(renditions.first { $0.kind == .video }?.segments.last?.file?.path)

            // Running: a request for the last segment waits (here 1 s), then 503 with Retry-After.
            let running = try await library.play(assetId: fixture.assetId, downloadWait: .seconds(1))
            let waited = try await Self.fetch(running.address.sessionURL.appendingPathComponent(last))
            #expect(waited.status == 503 && waited.retryAfter == "2")
            await running.stop()

            task.pause()
            _ = try? await task.result()
            let paused = try await library.play(assetId: fixture.assetId)
            let missing = try await Self.fetch(paused.address.sessionURL.appendingPathComponent(last))
            #expect(missing.status == 404)
            #expect(missing.body.contains("segment_not_downloaded"))
            await paused.stop()
            let errors = try String(contentsOf: fixture.package.errorLogURL, encoding: .utf8)
            #expect(errors.contains("segment_downloading") && errors.contains("segment_not_downloaded"))
            await library.close()
        }
    }

    @Test("a download that stopped before storing its keys: play says keys_pending and to resume, and starts no window")
    func playBeforeTheKeysAreStoredSaysToWait() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, _ in
            let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
            // A key server that is not there: the download plans the package, then fails at the keys.
            let task = try await library.download(
                DownloadRequest(
                    url: fixture.sourceURL(origin),
                    assetId: fixture.assetId,
                    keyServerURL: "http://127.0.0.1:9",
                    token: try await fixture.token()
                )
            )
            _ = try? await task.result()
            #expect(FileManager.default.fileExists(atPath: fixture.package.manifestURL.path))
            do {
                let playback = try await library.play(assetId: fixture.assetId, online: false)
                await playback.stop()
                Issue.record("played without keys")
            } catch let error as PlaybackError {
                #expect(error.code == "keys_pending")
                #expect(error.message.contains("stowage resume \(fixture.assetId)"))
            }
            await library.close()
        }
    }

    static func fetch(_ url: URL) async throws -> (status: Int, retryAfter: String?, body: String) {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            let response = try await http.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            try await http.shutdown()
            return (Int(response.status.code), response.headers.first(name: "Retry-After"), String(buffer: body))
        } catch {
            try await http.shutdown()
            throw error
        }
    }
}

@Suite("Seeking ahead of a download", .timeLimit(.minutes(5)))
struct SeekAheadTests {
    @Test("a player asking for the last segment makes the download fetch it next; every file still once")
    func theDownloadFetchesWhatThePlayerWaitsForNext() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = OriginRequestLog()
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 150_000), log: log) { origin, keyServer in
            let (library, task, renditions) = try await PlayWhileDownloadingTests.startDownload(fixture, origin: origin, keyServer: keyServer)
            let audio = try #require(renditions.first { $0.kind == .audio })
            let last = try #require(audio.segments.last?.file)
            let playback = try await library.play(assetId: fixture.assetId)
            // The download does the video first, then the audio; the player jumps to the audio's last segment.
            let seek = try await PlayWhileDownloadingTests.fetch(playback.address.sessionURL.appendingPathComponent(last.path))
            await playback.stop()
            let manifest = try await task.result()
            #expect(seek.status == 200)
            try fixture.assertPackageMatchesSource(manifest, origin: origin)

            // The package's files only: the session also offers (and ffmpeg probes) the renditions not downloaded.
            let packageFiles = Set(manifest.files.compactMap { URL(string: $0.sourceURL)?.path })
            let fetched = log.entries.filter { ($0.status == 200 || $0.status == 206) && packageFiles.contains($0.path) }.map(\.path)
            #expect(Set(fetched).count == fetched.count)
            let sourcePath = { (file: PackageFile) in URL(string: file.sourceURL)?.path ?? file.sourceURL }
            let lastIndex = try #require(fetched.firstIndex(of: sourcePath(last)), "\(fetched)")
            let firstAudio = try #require(audio.segments.first?.file)
            let firstAudioIndex = try #require(fetched.firstIndex(of: sourcePath(firstAudio)), "\(fetched)")
            #expect(lastIndex < firstAudioIndex, "the last audio segment was not fetched ahead: \(fetched)")
            await library.close()
        }
    }
}
