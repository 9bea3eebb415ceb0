import AssetDownload
import AsyncHTTPClient
import DownloadTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import OfflinePackage
import OriginServer
import Playback
import StowageCore
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
            ["-nostdin", "-v", "error"] + (input.hasSuffix(".ts") ? [] : ["-allowed_extensions", "ALL"])
                + ["-i", input, "-map", map, "-f", "framemd5", "-"],
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

    @Test(
        "a paused download plays what it has; a missing file is 503 while a download runs, 404 offline, and fetched once from the source when online"
    )
    func pausedDownloadPlaysWhatItHas() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let (library, last, origin, keyServer) = try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 100_000)) {
            origin,
            keyServer in
            let (library, task, renditions) = try await PlayWhileDownloadingTests.startDownload(fixture, origin: origin, keyServer: keyServer)
            let last = try #require(renditions.first { $0.kind == .video }?.segments.last?.file)

            // Running: a range of the last segment waits for the whole file (here 1 s), then 503 with Retry-After.
            let running = try await library.play(assetId: fixture.assetId, downloadWait: .seconds(1))
            let waited = try await Self.fetch(running.address.sessionURL.appendingPathComponent(last.path), range: "bytes=0-99")
            #expect(waited.status == 503 && waited.retryAfter == "2")
            await running.stop()

            task.pause()
            _ = try? await task.result()
            return (library, last, origin, keyServer)
        }

        // Paused, and the origin is gone: 404 saying what the source did.
        try await fixture.whileDown(ports: [try #require(origin.port), try #require(keyServer.port)]) {
            let unreachable = try await library.play(assetId: fixture.assetId)
            let missing = try await Self.fetch(unreachable.address.sessionURL.appendingPathComponent(last.path))
            await unreachable.stop()
            #expect(missing.status == 404)
            #expect(missing.body.contains("segment_not_downloaded") && missing.body.contains("its source could not provide it"), "\(missing.body)")
        }
        let errors = try String(contentsOf: fixture.package.errorLogURL, encoding: .utf8)
        #expect(errors.contains("segment_downloading") && errors.contains("segment_not_downloaded"))

        // The origin is back where the manifest says it is (slow: the file takes over a second to arrive).
        let log = OriginRequestLog()
        let port = try #require(origin.port)
        let store = try DownloadStore(databaseURL: fixture.clientDirectory.databaseURL)
        try await fixture.withServers(
            conditions: NetworkConditions(bandwidthBytesPerSecond: 100_000),
            log: log,
            keyServerPort: try #require(keyServer.port),
            originPort: port
        ) { origin, _ in
            // --offline: not fetched.
            let offline = try await library.play(assetId: fixture.assetId, online: false)
            let refused = try await Self.fetch(offline.address.sessionURL.appendingPathComponent(last.path))
            await offline.stop()
            #expect(refused.status == 404 && refused.body.contains("--offline"), "\(refused.body)")

            // Online: the file is fetched into the package for the player and streamed to it decrypted as it arrives
            // (its first bytes reach the player before the file is whole), and its frames are the clear twin's.
            let sourceLines = { () throws -> [Substring] in
                try String(contentsOf: fixture.package.accessLogURL, encoding: .utf8).split(separator: "\n").filter { $0.contains(last.sourceURL) }
            }
            let linesBefore = try sourceLines()
            // Two sessions of this process ask at once (a library may open several): one transfer serves both, so
            // they never write one part file together.
            let paused = try await library.play(assetId: fixture.assetId)
            let other = try await library.play(assetId: fixture.assetId)
            async let otherServed = Self.fetchBytes(other.address.sessionURL.appendingPathComponent(last.path))
            let served = try await Self.fetchBytes(paused.address.sessionURL.appendingPathComponent(last.path)) {
                (try? store.completedFile(fixture.assetId, path: last.path)) == nil
            }
            let alsoServed = try await otherServed
            await paused.stop()
            await other.stop()
            #expect(alsoServed.status == 200 && alsoServed.body == served.body)
            #expect(served.status == 200 && served.contentLength == nil)
            #expect(served.firstBytes == true, "the file was whole before the player got a byte")
            let sourcePath = String(last.sourceURL.dropFirst(origin.absoluteString.count))
            let stored = try Data(contentsOf: fixture.package.url(forRelativePath: last.path))
            #expect(stored == (try Data(contentsOf: fixture.originRoot.appendingPathComponent(sourcePath))))
            let servedFile = fixture.root.appendingPathComponent("served.ts")
            try Data(served.body).write(to: servedFile)
            let clear = DownloadFixture.demoFixture.deletingLastPathComponent()
                .appendingPathComponent(sourcePath.components(separatedBy: "/\(fixture.assetId)/").last ?? sourcePath)
            let servedFrames = try await Self.frames(servedFile.path, map: "0:v:0")
            #expect(!servedFrames.isEmpty)
            #expect(servedFrames == (try await Self.frames(clear.path, map: "0:v:0")))

            // Resuming completes the package without fetching that file again.
            let manifest = try await library.resume(assetId: fixture.assetId).result()
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            let fetched = log.entries.filter { ($0.status == 200 || $0.status == 206) && $0.path == sourcePath }
            #expect(fetched.count == 1, "\(sourcePath) fetched \(fetched.count) times")
            // The fetch is in the package's access log as the downloader writes it, and no part file is left behind.
            let added = try sourceLines().dropFirst(linesBefore.count)
            #expect(added.count == 1 && added.allSatisfy { $0.contains(" 200 ") }, "\(added)")
            let leftovers = FileManager.default.enumerator(atPath: fixture.package.url.path)?.compactMap { $0 as? String }.filter {
                $0.hasSuffix(".part")
            }
            #expect(leftovers == [], "\(leftovers ?? [])")
        }
        await library.close()
    }

    @Test("a segment the download is writing reaches the player as it arrives, decrypted, and is fetched once")
    func aSegmentInTransitIsStreamedAsItArrives() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = OriginRequestLog()
        let store = try DownloadStore(databaseURL: fixture.clientDirectory.databaseURL)
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 100_000), log: log) { origin, keyServer in
            let (library, task, renditions) = try await PlayWhileDownloadingTests.startDownload(fixture, origin: origin, keyServer: keyServer)
            let last = try #require(renditions.first { $0.kind == .video }?.segments.last?.file)
            let playback = try await library.play(assetId: fixture.assetId, online: false)
            // The player asks for the last segment: the download fetches it next, and the player gets its bytes as
            // they come (about 1.5 s for the whole file at 100 kB/s).
            let url = playback.address.sessionURL.appendingPathComponent(last.path)
            let streamed = try await Self.fetchBytes(url) { (try? store.completedFile(fixture.assetId, path: last.path)) == nil }
            #expect(streamed.status == 200 && streamed.contentLength == nil)
            #expect(streamed.firstBytes == true, "the file was whole before the player got a byte")
            let manifest = try await task.result()
            // Once landed, the same file is served with its length, and the bytes are the same.
            let whole = try await Self.fetchBytes(url)
            await playback.stop()
            #expect(whole.contentLength == String(streamed.body.count))
            #expect(whole.body == streamed.body)
            let sourcePath = String(last.sourceURL.dropFirst(origin.absoluteString.count))
            let servedFile = fixture.root.appendingPathComponent("streamed.ts")
            try Data(streamed.body).write(to: servedFile)
            let clear = DownloadFixture.demoFixture.deletingLastPathComponent()
                .appendingPathComponent(sourcePath.components(separatedBy: "/\(fixture.assetId)/").last ?? sourcePath)
            let frames = try await Self.frames(servedFile.path, map: "0:v:0")
            #expect(!frames.isEmpty)
            #expect(frames == (try await Self.frames(clear.path, map: "0:v:0")))
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            #expect(log.entries.filter { ($0.status == 200 || $0.status == 206) && $0.path == sourcePath }.count == 1)
            let access = PlaybackLogLines.of(fixture.package.accessLogURL).filter { $0.contains(" /\(last.path) ") }
            #expect(access.count == 2, "\(access)")
            await library.close()
        }
    }

    @Test("a paused download whose lease rows were deleted with sqlite3: play refuses as for any package, not keys_pending")
    func aDeletedLeaseIsNotAPendingKey() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 100_000)) { origin, keyServer in
            let (library, task, _) = try await PlayWhileDownloadingTests.startDownload(fixture, origin: origin, keyServer: keyServer)
            task.pause()
            _ = try? await task.result()
            await library.close()
            // A curious user removes the lease, as `sqlite3 stowage.sqlite "DELETE FROM key_leases"` does.
            let sqlite = try await ProcessRunner.run(
                URL(fileURLWithPath: "/usr/bin/sqlite3"),
                [fixture.clientDirectory.databaseURL.path, "DELETE FROM key_lease_payloads; DELETE FROM key_leases;"]
            )
            #expect(sqlite.status == 0)
            let reopened = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
            do {
                let playback = try await reopened.play(assetId: fixture.assetId, online: false)
                await playback.stop()
                Issue.record("played with its lease deleted")
            } catch let error as PlaybackError {
                // Files have landed, so the keys had been stored: resuming would not bring them back.
                #expect(error.code != "keys_pending", "\(error.message)")
                #expect(!error.message.contains("stowage resume"), "\(error.message)")
            }
            await reopened.close()
        }
    }

    @Test("a download that stopped before storing its keys: play says keys_pending and to resume, and starts no window")
    func playBeforeTheKeysAreStoredSaysToWait() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        // A key server that is not there (a port held bound, not listening, refuses connections).
        let nowhere = try HeldPort()
        defer { nowhere.release() }
        try await fixture.withServers { origin, _ in
            let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
            // A key server that is not there: the download plans the package, then fails at the keys.
            let task = try await library.download(
                DownloadRequest(
                    url: fixture.sourceURL(origin),
                    assetId: fixture.assetId,
                    keyServerURL: "http://127.0.0.1:\(nowhere.port)",
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

    /// GETs `url` reading the body as it arrives: the status, `Content-Length`, the body, and what `atFirstBytes`
    /// said when the first body bytes arrived (nil when there were none).
    static func fetchBytes(
        _ url: URL,
        atFirstBytes: @Sendable () -> Bool = { false }
    ) async throws -> (status: Int, contentLength: String?, body: [UInt8], firstBytes: Bool?) {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            let response = try await http.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(90))
            var body: [UInt8] = []
            var firstBytes: Bool?
            for try await chunk in response.body where chunk.readableBytes > 0 {
                if firstBytes == nil { firstBytes = atFirstBytes() }
                body += chunk.readableBytesView
            }
            try await http.shutdown()
            return (Int(response.status.code), response.headers.first(name: "Content-Length"), body, firstBytes)
        } catch {
            try await http.shutdown()
            throw error
        }
    }

    static func fetch(_ url: URL, range: String? = nil) async throws -> (status: Int, retryAfter: String?, body: String) {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            var request = HTTPClientRequest(url: url.absoluteString)
            if let range { request.headers.add(name: "Range", value: range) }
            let response = try await http.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            try await http.shutdown()
            return (Int(response.status.code), response.headers.first(name: "Retry-After"), String(buffer: body))
        } catch {
            try await http.shutdown()
            throw error
        }
    }
}

/// The non-comment lines of a package log.
enum PlaybackLogLines {
    static func of(_ url: URL) -> [String] {
        ((try? String(contentsOf: url, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
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
