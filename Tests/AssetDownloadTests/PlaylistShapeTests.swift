import DownloadTestSupport
import Foundation
import OfflinePackage
import OriginServer
import StowageCore
import StowageTestSupport
import Testing

@testable import AssetDownload

/// Playlists of other shapes, and hostile ones, served next to the packaged demo asset.
@Suite("Byte ranges, gaps, live and hostile playlists")
struct PlaylistShapeTests {
    static let fmp4Clear = DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/media/fmp4-clear")

    /// Writes `files` (path → bytes) under the origin root.
    static func serve(_ files: [String: Data], in fixture: DownloadFixture) throws {
        for (path, data) in files {
            let url = fixture.originRoot.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: url)
        }
    }

    /// Every regular file under `root`, relative.
    static func files(under root: URL) -> Set<String> {
        guard let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
        var found: Set<String> = []
        for case let url as URL in enumerator where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            found.insert(String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count)))
        }
        return found
    }

    /// The clear fMP4 fixture as one file (`all.mp4`: the init section, then three segments) and the start of a playlist
    /// naming its ranges; every range after the first gives its offset only when `offsetsAfterTheFirst`.
    static func singleFile(offsetsAfterTheFirst: Bool) throws -> (Data, [String]) {
        var single = try Data(contentsOf: fmp4Clear.appendingPathComponent("init.mp4"))
        var lines = [
            "#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD",
            "#EXT-X-MAP:URI=\"all.mp4\",BYTERANGE=\"\(single.count)@0\"",
        ]
        for n in 0..<3 {
            let segment = try Data(contentsOf: fmp4Clear.appendingPathComponent("seg_\(n).m4s"))
            let offset = n == 0 || offsetsAfterTheFirst ? "@\(single.count)" : ""
            lines += ["#EXTINF:2.0,", "#EXT-X-BYTERANGE:\(segment.count)\(offset)", "all.mp4"]
            single.append(segment)
        }
        return (single, lines)
    }

    @Test("a single-file fMP4 with EXT-X-BYTERANGE and a MAP range: ranges requested as ranges, each stored whole")
    func byteRanges() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        var (single, lines) = try Self.singleFile(offsetsAfterTheFirst: false)
        let initLength = try Data(contentsOf: Self.fmp4Clear.appendingPathComponent("init.mp4")).count
        lines += ["#EXT-X-GAP", "#EXTINF:2.0,", "missing.m4s", "#EXT-X-ENDLIST", ""]
        try Self.serve(["ranges/all.mp4": single, "ranges/index.m3u8": Data(lines.joined(separator: "\n").utf8)], in: fixture)
        let whole = single
        let log = OriginRequestLog()
        try await fixture.withServers(log: log) { origin, _ in
            let session = try fixture.session()
            let request = DownloadRequest(url: origin.appendingPathComponent("ranges/index.m3u8").absoluteString, assetId: "ranges")
            let manifest = try await DownloadFixture.run(try session.start(request)).result.get()
            try await session.shutdown()
            let package = try PackageDirectory(assetId: "ranges", in: fixture.clientDirectory)
            #expect(manifest.isComplete)
            #expect(manifest.files.count == 4)
            for file in manifest.files {
                let range = try #require(file.byteRange)
                let local = try Data(contentsOf: package.url(forRelativePath: file.path))
                #expect(local == whole.subdata(in: Int(range.offset)..<Int(range.offset + range.length)))
            }
            let ranges = log.entries.filter { $0.path == "/ranges/all.mp4" }.compactMap(\.range)
            #expect(ranges.count == 4)
            #expect(ranges.contains("bytes=0-\(initLength - 1)"))
            // The GAP segment is not fetched and stays a GAP in the local playlist; no byte ranges remain there.
            #expect(log.count(path: "/ranges/missing.m4s") == 0)
            let local = try String(contentsOf: package.url(forRelativePath: "video/index.m3u8"), encoding: .utf8)
            #expect(local.contains("#EXT-X-GAP"))
            #expect(!local.contains("BYTERANGE"))
            #expect(local.contains("#EXT-X-MAP:URI=\"init-0.mp4\""))
        }
    }

    /// The same single-file layout read from the disk (a local playlist): each range copied from its own offset.
    @Test("a local single-file fMP4 with byte ranges: each range copied from its offset, stored whole")
    func localByteRanges() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        var (single, lines) = try Self.singleFile(offsetsAfterTheFirst: true)
        lines += ["#EXT-X-ENDLIST", ""]
        let folder = fixture.originRoot.appendingPathComponent("local-ranges")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try single.write(to: folder.appendingPathComponent("all.mp4"))
        try Data(lines.joined(separator: "\n").utf8).write(to: folder.appendingPathComponent("index.m3u8"))
        let session = try fixture.session()
        let request = DownloadRequest(url: folder.appendingPathComponent("index.m3u8").path, assetId: "local-ranges")
        let manifest = try await DownloadFixture.run(try session.start(request)).result.get()
        try await session.shutdown()
        let package = try PackageDirectory(assetId: "local-ranges", in: fixture.clientDirectory)
        #expect(manifest.isComplete && manifest.files.count == 4)
        for file in manifest.files {
            let range = try #require(file.byteRange)
            let local = try Data(contentsOf: package.url(forRelativePath: file.path))
            #expect(local == single.subdata(in: Int(range.offset)..<Int(range.offset + range.length)), "\(file.path)")
        }
    }

    @Test("a live playlist is recorded until stopped; stopping keeps what was recorded as a complete VOD package")
    func livePlaylist() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        // The key is written into the playlist (a data: URI): it must never reach the disk in the clear, not even in
        // the recorded playlists kept while recording.
        let key = "000102030405060708090a0b0c0d0e0f"
        let inline = "data:text/plain;base64,\(Data((0..<16).map { UInt8($0) }).base64EncodedString())"
        let live = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:40\n#EXT-X-KEY:METHOD=AES-128,URI=\"\(inline)\"\n#EXTINF:2.0,\na.ts\n"
        try Self.serve(["live/index.m3u8": Data(live.utf8), "live/a.ts": Data(count: 188)], in: fixture)
        try await fixture.withServers { origin, _ in
            let session = try fixture.session()
            let url = origin.appendingPathComponent("live/index.m3u8").absoluteString
            let task = try session.start(DownloadRequest(url: url, assetId: "live"))
            let bound = Self.pausing(task, after: .seconds(60))
            defer { bound.cancel() }
            var stopped = false
            var events: [DownloadEvent] = []
            for await event in task.events {
                events.append(event)
                // Once the segment is in place, the recording is stopped as Ctrl-C stops it.
                if !stopped, case .progress(let progress) = event, progress.renditions.contains(where: { $0.filesDone > 0 }) {
                    let package = try PackageDirectory(assetId: "live", in: fixture.clientDirectory).url
                    let recorded = try String(contentsOf: package.appendingPathComponent(".recording/video.m3u8"), encoding: .utf8)
                    #expect(recorded.contains("stowage-inline-key:") && !recorded.contains("data:") && !recorded.contains(key))
                    #expect(try filesContaining(key, under: package).isEmpty)
                    #expect(task.stopRecording())
                    stopped = true
                }
            }
            let manifest = try await task.result()
            try await session.shutdown()
            #expect(!task.stopRecording(), "a recording is stopped once")
            #expect(manifest.isComplete)
            #expect(manifest.recording?.endReason == .stopped && manifest.recording?.gaps.isEmpty == true)
            #expect(manifest.renditions.first?.segments.map(\.mediaSequence) == [40])
            #expect(events.contains { if case .recordingEnded = $0 { true } else { false } })
            let local = try String(
                contentsOf: PackageDirectory(assetId: "live", in: fixture.clientDirectory).url.appendingPathComponent("video/index.m3u8"),
                encoding: .utf8
            )
            #expect(local.contains("#EXT-X-ENDLIST") && local.contains("#EXT-X-MEDIA-SEQUENCE:40"))
            #expect(try session.store.task("live")?.state == .completed)
            #expect(manifest.keys.first?.uri.hasPrefix("stowage-inline-key:") == true)
            let package = try PackageDirectory(assetId: "live", in: fixture.clientDirectory).url
            #expect(!FileManager.default.fileExists(atPath: package.appendingPathComponent(".recording").path))
            #expect(try filesContaining(key, under: package).isEmpty)
        }
    }

    /// A recording stopped, then paused before its last file landed: the resume fetches what is left with nothing
    /// left to record, and completes (it once waited forever for a recorder that no longer ran).
    @Test("an ended recording paused before its last file completes when resumed")
    func endedRecordingResumed() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let live = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:7\n#EXTINF:2.0,\na.ts\n#EXTINF:2.0,\nb.ts\n"
        let big = Data(repeating: 0x47, count: 400_000)
        try Self.serve(["ended/index.m3u8": Data(live.utf8), "ended/a.ts": Data(count: 188), "ended/b.ts": big], in: fixture)
        try await fixture.withServers { origin, _ in
            // b.ts takes about 4 s at this rate, time enough to pause after the recording ends.
            let slow = try fixture.session { $0.bandwidth = TokenBucket(bytesPerSecond: 100_000, capacity: 16_384) }
            let task = try slow.start(DownloadRequest(url: origin.appendingPathComponent("ended/index.m3u8").absoluteString, assetId: "ended"))
            let bound = Self.pausing(task, after: .seconds(60))
            defer { bound.cancel() }
            var stopped = false
            for await event in task.events {
                if !stopped { stopped = task.stopRecording() }
                if case .recordingEnded = event { task.pause() }
            }
            await #expect(throws: CancellationError.self) { try await task.result() }
            try await slow.shutdown()
            let package = try PackageDirectory(assetId: "ended", in: fixture.clientDirectory)
            let paused = try package.readManifest()
            #expect(paused.recording?.hasEnded == true && !paused.isComplete)
            #expect(FileManager.default.fileExists(atPath: package.url.appendingPathComponent(".recording").path))

            let session = try fixture.session()
            let outcome = try await Self.outcome(of: try session.resume(assetId: "ended"), within: .seconds(30))
            try await session.shutdown()
            let manifest = try outcome.get()
            #expect(manifest.isComplete)
            #expect(try Data(contentsOf: package.url(forRelativePath: try #require(manifest.files.last).path)) == big)
        }
    }

    @Test("a live segment the server no longer has (404) becomes a marked gap, and the recording completes around it")
    func liveSegmentGone() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let live = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:7\n#EXTINF:2.0,\na.ts\n#EXTINF:2.0,\ngone.ts\n#EXTINF:2.0,\nc.ts\n"
        try Self.serve(["live/index.m3u8": Data(live.utf8), "live/a.ts": Data(count: 188), "live/c.ts": Data(count: 376)], in: fixture)
        try await fixture.withServers { origin, _ in
            let session = try fixture.session()
            let url = origin.appendingPathComponent("live/index.m3u8").absoluteString
            let task = try session.start(DownloadRequest(url: url, assetId: "live"))
            let bound = Self.pausing(task, after: .seconds(60))
            defer { bound.cancel() }
            var gaps: [PackageRecordingGap] = []
            var filesDone = 0
            var stopped = false
            // The gap and the second file are told in either order (the file after the gap may land before the gap's
            // retries give up); the recording is stopped once both are known.
            for await event in task.events {
                if case .recordingGap(let gap) = event { gaps.append(gap) }
                if case .progress(let progress) = event { filesDone = max(filesDone, progress.renditions.map(\.filesDone).max() ?? 0) }
                if !stopped, !gaps.isEmpty, filesDone >= 2 {
                    task.stopRecording()
                    stopped = true
                }
            }
            let manifest = try await task.result()
            try await session.shutdown()
            #expect(manifest.isComplete)
            #expect(gaps.map(\.firstMediaSequence) == [8])
            #expect(manifest.recording?.gaps.map(\.firstMediaSequence) == [8])
            let video = try #require(manifest.renditions.first)
            #expect(video.segments.map(\.isGap) == [false, true, false])
            #expect(video.files.count == 2)
            let local = try String(
                contentsOf: PackageDirectory(assetId: "live", in: fixture.clientDirectory).url.appendingPathComponent("video/index.m3u8"),
                encoding: .utf8
            )
            #expect(local.components(separatedBy: "#EXT-X-GAP").count == 2)
        }
    }

    /// Starts recording a live playlist of one segment that never ends, waits until the segment is in place, then
    /// stops the servers and returns the task and the origin's port (which refuses connections from then on).
    static func recordUntilServersStop(_ fixture: DownloadFixture, session: DownloadSession) async throws -> (DownloadTask, Int) {
        let live = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:3\n#EXTINF:1.0,\na.ts\n"
        try serve(["live/index.m3u8": Data(live.utf8), "live/a.ts": Data(count: 188)], in: fixture)
        let video = try PackageDirectory(assetId: "live", in: fixture.clientDirectory).url.appendingPathComponent("video")
        return try await fixture.withServers { origin, _ in
            let task = try session.start(DownloadRequest(url: origin.appendingPathComponent("live/index.m3u8").absoluteString, assetId: "live"))
            for _ in 0..<500 {
                if ((try? FileManager.default.contentsOfDirectory(atPath: video.path)) ?? []).contains(where: { $0.hasSuffix(".ts") }) {
                    return (task, origin.port ?? 0)
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            task.pause()
            throw FixtureFailure(description: "the live segment was not recorded within 10 s")
        }
    }

    struct FixtureFailure: Error, CustomStringConvertible { let description: String }

    /// Pauses `task` once `limit` has passed: a recording a test fails to stop still ends, and the test fails on its
    /// outcome instead of waiting for ever. Cancel the returned task when the recording has ended.
    static func pausing(_ task: DownloadTask, after limit: Duration) -> Task<Void, Never> {
        Task {
            guard (try? await Task.sleep(for: limit)) != nil else { return }
            Issue.record("the recording was still running \(limit) after it started; paused")
            task.pause()
        }
    }

    /// The task's outcome, or a failure if it has not ended within `limit` (the task is then paused).
    static func outcome(of task: DownloadTask, within limit: Duration) async throws -> Result<PackageManifest, any Error> {
        try await withThrowingTaskGroup(of: Result<PackageManifest, any Error>?.self) { group in
            group.addTask {
                do { return .success(try await task.result()) } catch { return .failure(error) }
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let outcome = first else {
                task.pause()
                _ = try? await task.result()
                throw FixtureFailure(description: "the task had not ended \(limit) after its servers went away")
            }
            return outcome
        }
    }

    @Test("a recording whose servers go away fails after the network-down grace, says how to go on, and keeps its files")
    func liveServerGone() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let session = try fixture.session { $0.retry.networkDownGrace = 2 }
        let (task, port) = try await Self.recordUntilServersStop(fixture, session: session)
        // The port stays refused (held, not listening) so no other test's server answers on it.
        let outcome = try await fixture.whileDown(ports: [port]) { try await Self.outcome(of: task, within: .seconds(60)) }
        try await session.shutdown()
        guard case .failure(let error) = outcome else {
            Issue.record("a recording with no server completed")
            return
        }
        let failure = try #require(error as? DownloadError)
        #expect(failure.code == "playlist_network_error", "\(failure)")
        #expect(failure.message.contains("stowage resume live"), "\(failure.message)")
        #expect(try session.store.task("live")?.state == .failed)
        let video = try PackageDirectory(assetId: "live", in: fixture.clientDirectory).url.appendingPathComponent("video")
        #expect(try FileManager.default.contentsOfDirectory(atPath: video.path).contains { $0.hasSuffix(".ts") })
    }

    @Test("stopping a recording while its server is down ends it at once (not after the grace) and keeps it")
    func liveStopWhileServerDown() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let session = try fixture.session { $0.retry.networkDownGrace = 120 }
        let (task, port) = try await Self.recordUntilServersStop(fixture, session: session)
        let outcome = try await fixture.whileDown(ports: [port]) {
            // Past the next reload (every 0.5 s for an unchanged playlist of 1 s segments): it is failing and being
            // retried now.
            try await Task.sleep(for: .milliseconds(1500))
            #expect(task.stopRecording())
            return try await Self.outcome(of: task, within: .seconds(20))
        }
        try await session.shutdown()
        let manifest = try outcome.get()
        #expect(manifest.isComplete)
        #expect(manifest.recording?.endReason == .stopped)
        #expect(manifest.renditions.first?.segments.map(\.mediaSequence) == [3])
        #expect(try session.store.task("live")?.state == .completed)
    }

    @Test("hostile segment URIs (../, absolute paths, encoded dots) never write outside the package")
    func hostileURIs() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let playlist = [
            "#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD",
            "#EXTINF:2.0,", "../../../../../../escape.ts",
            "#EXTINF:2.0,", "/hostile/..%2F..%2Fsecret.ts",
            "#EXTINF:2.0,", "sub/../../hostile/ok.ts",
            "#EXT-X-ENDLIST", "",
        ].joined(separator: "\n")
        try Self.serve(
            [
                "hostile/index.m3u8": Data(playlist.utf8), "escape.ts": Data(repeating: 1, count: 376),
                "hostile/..%2F..%2Fsecret.ts": Data(repeating: 2, count: 188), "hostile/ok.ts": Data(repeating: 3, count: 188),
            ],
            in: fixture
        )
        let outside = fixture.root.deletingLastPathComponent()
        let before = Self.files(under: fixture.clientDirectory.url)
        try await fixture.withServers { origin, _ in
            let session = try fixture.session()
            let run = await DownloadFixture.run(
                try session.start(
                    DownloadRequest(url: origin.appendingPathComponent("hostile/index.m3u8").absoluteString, assetId: "hostile", concurrency: 1)
                )
            )
            try await session.shutdown()
            // Whatever the origin answered, every file written is inside the package (or the database, or the asset's
            // own lock file).
            let written = Self.files(under: fixture.clientDirectory.url).subtracting(before)
            for path in written {
                #expect(
                    path.hasPrefix("/packages/hostile/") || path.hasPrefix("/stowage.sqlite") || path.hasPrefix("/packages/.removing")
                        || path == "/locks/hostile.lock",
                    "\(path)"
                )
            }
            #expect(!FileManager.default.fileExists(atPath: outside.appendingPathComponent("escape.ts").path))
            // `../` past the root resolves to the origin's /escape.ts, stored under Stowage's own name; the encoded
            // slash is refused by the origin (400), which fails the task naming that segment, not skipping it.
            let error = try #require(run.result.failureValue as? DownloadError)
            #expect(error.code == "segment_http_status")
            #expect(error.description.contains("video/00001.ts") && error.description.contains("HTTP 400"))
            let package = try PackageDirectory(assetId: "hostile", in: fixture.clientDirectory)
            let manifest = try package.readManifest()
            #expect(manifest.files.map(\.path) == ["video/00000.ts", "video/00001.ts", "video/00002.ts"])
            #expect(manifest.files.first?.sourceURL == origin.appendingPathComponent("escape.ts").absoluteString)
            #expect(try Data(contentsOf: package.url(forRelativePath: "video/00000.ts")) == Data(repeating: 1, count: 376))
        }
    }

    /// Downloads a one-segment playlist whose segment is at `segment`, with the session's `maximumFileBytes`.
    private static func downloadHostileSegment(
        _ fixture: DownloadFixture,
        segment: URL,
        maximumFileBytes: Int64? = nil
    ) async throws -> DownloadError {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:4,\n\(segment.absoluteString)\n#EXT-X-ENDLIST\n"
        try Self.serve(["hostile/index.m3u8": Data(text.utf8)], in: fixture)
        return try await fixture.withServers { origin, _ in
            let session = try fixture.session { $0.maximumFileBytes = maximumFileBytes }
            let run = await DownloadFixture.run(
                try session.start(DownloadRequest(url: origin.appendingPathComponent("hostile/index.m3u8").absoluteString, assetId: "hostile"))
            )
            try await session.shutdown()
            return try #require(run.result.failureValue as? DownloadError)
        }
    }

    @Test(
        "a segment server announcing a Content-Length of 2^63 - 1, or 2^63, is refused before a byte is written, once",
        arguments: ["9223372036854775807", "9223372036854775808"]
    )
    func absurdContentLength(_ length: String) async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let server = try RawHTTPResponder(head: "HTTP/1.1 200 OK\r\nContent-Type: video/mp2t\r\nContent-Length: \(length)")
        defer { server.stop() }
        // The default bound: 16 times the rendition's average segment, at least 256 MiB, at most 4 GiB.
        let error = try await Self.downloadHostileSegment(fixture, segment: URL(string: "http://127.0.0.1:\(server.port)/huge.ts")!)
        #expect(error.code == "segment_too_large", "\(error)")
        #expect(error.message.contains("00000.ts") && error.message.contains("268.4 MB"), "\(error.message)")
        // Not a failure that passes by itself: a service does not try it again and again.
        #expect(!error.isTransient)
        #expect(server.requests == 1)
        let package = try PackageDirectory(assetId: "hostile", in: fixture.clientDirectory)
        #expect(Self.files(under: package.url).allSatisfy { !$0.hasSuffix(".part") && !$0.hasSuffix(".ts") })
    }

    @Test("a segment server that sends bytes without end is cut off at the bound, and nothing of it is kept")
    func endlessSegment() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        // No Content-Length: the body ends when the connection does, which this server never closes first.
        let server = try RawHTTPResponder(head: "HTTP/1.1 200 OK\r\nContent-Type: video/mp2t\r\nConnection: close", budget: 256 << 20)
        defer { server.stop() }
        let error = try await Self.downloadHostileSegment(
            fixture,
            segment: URL(string: "http://127.0.0.1:\(server.port)/endless.ts")!,
            maximumFileBytes: 1 << 20
        )
        #expect(error.code == "segment_too_large", "\(error)")
        #expect(error.message.contains("00000.ts") && error.message.contains("1.0 MB"), "\(error.message)")
        #expect(server.requests == 1)
        // What the socket buffers took beyond the bound, not the 256 MiB the server had to send.
        #expect(server.bytesSent < 64 << 20, "\(server.bytesSent)")
        let package = try PackageDirectory(assetId: "hostile", in: fixture.clientDirectory)
        #expect(Self.files(under: package.url).allSatisfy { !$0.hasSuffix(".part") && !$0.hasSuffix(".ts") })
    }

    @Test("the bound on one file: 16 times the rendition's average, at least 256 MiB, at most 4 GiB")
    func fileBound() {
        #expect(FileFetcher.maximumBytes(estimate: 0) == 256 << 20)
        #expect(FileFetcher.maximumBytes(estimate: 100 << 20) == 1_600 << 20)
        #expect(FileFetcher.maximumBytes(estimate: 1 << 30) == 4 << 30)
        #expect(FileFetcher.maximumBytes(estimate: .max) == 4 << 30)
        #expect(FileFetcher.maximumBytes(estimate: -1) == 256 << 20)
    }

    @Test("absurd segment counts are refused before anything is fetched")
    func absurdCounts() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        text.reserveCapacity(4_000_000)
        for _ in 0...200_000 { text += "#EXTINF:1,\ns.ts\n" }
        text += "#EXT-X-ENDLIST\n"
        try Self.serve(["absurd/index.m3u8": Data(text.utf8)], in: fixture)
        let log = OriginRequestLog()
        try await fixture.withServers(log: log) { origin, _ in
            let session = try fixture.session()
            let run = await DownloadFixture.run(
                try session.start(DownloadRequest(url: origin.appendingPathComponent("absurd/index.m3u8").absoluteString, assetId: "absurd"))
            )
            try await session.shutdown()
            let error = try #require(run.result.failureValue as? DownloadError)
            #expect(error.code == "too_many_segments")
            #expect(log.count(path: "/absurd/s.ts") == 0)
        }
    }
}

/// The files under `directory` whose bytes contain `hex` (lowercase), as text or as raw bytes.
func filesContaining(_ hex: String, under directory: URL) throws -> [String] {
    let raw = Data(stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! })
    let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
    var found: [String] = []
    while let file = enumerator?.nextObject() as? URL {
        guard let bytes = try? Data(contentsOf: file) else { continue }
        if bytes.range(of: Data(hex.utf8)) != nil || bytes.range(of: raw) != nil { found.append(file.lastPathComponent) }
    }
    return found
}
