import AssetDownload
import DownloadTestSupport
import Foundation
import KeyDelivery
import OfflinePackage
import OriginServer
import StowageCore
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Failures, resume, pause, cancel, disk space")
struct DownloadRecoveryTests {
    @Test("a 404 segment fails the task naming it; once it is back, resume completes without fetching completed files again")
    func missingSegmentThenResume() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let missing = fixture.originRoot.appendingPathComponent("demo-1/video/360p/seg_2.ts")
        let aside = missing.appendingPathExtension("away")
        try FileManager.default.moveItem(at: missing, to: aside)
        let log = OriginRequestLog()
        try await fixture.withServers(log: log) { origin, keyServer in
            let session = try fixture.session()
            let request = DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                selection: MediaSelectionOptions(subtitles: .none),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token(),
                concurrency: 1
            )
            let first = await DownloadFixture.run(try session.start(request))
            let error = try #require(first.result.failureValue as? DownloadError)
            #expect(error.code == "segment_http_status")
            #expect(error.description.contains("video/00002.ts"))
            #expect(error.description.contains("seg_2.ts"))
            guard case .failed = first.events.last else {
                Issue.record("expected a failed event, got \(String(describing: first.events.last))")
                return
            }
            let record = try #require(try session.store.task(fixture.assetId))
            #expect(record.state == .failed)
            #expect(record.failureCode == "segment_http_status")
            // Nothing presented as complete.
            #expect(try fixture.package.readManifest().isComplete == false)
            let before = log.entries.count

            try FileManager.default.moveItem(at: aside, to: missing)
            let second = await DownloadFixture.run(try session.resume(assetId: fixture.assetId))
            let manifest = try second.result.get()
            #expect(manifest.isComplete)
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            // The resumed run asked only for files it did not have.
            let resumed = log.entries.dropFirst(before).map(\.path)
            let completedFirst = Set(log.entries.prefix(before).filter { $0.status == 200 }.map(\.path))
            #expect(Set(resumed).isDisjoint(with: completedFirst))
            #expect(resumed.contains("/demo-1/video/360p/seg_2.ts"))
            // The resumed run vouches for what it hashed and placed (play need not hash it again), and for nothing it
            // did not: the first run's files, placed by a run that failed, are hashed at play as before.
            let records = try fixture.assertVerifiedRecords(manifest, coveringAll: false)
            #expect(records.files["video/00002.ts"] != nil)
            try await session.shutdown()
        }
    }

    @Test("not enough space refuses before any segment; running out mid-way pauses and resumes when space is back")
    func diskSpace() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            let token = try await fixture.token()
            let tiny = try fixture.session { $0.freeSpace = { _ in 1_000 } }
            let request = DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                keyServerURL: keyServer.absoluteString,
                token: token,
                concurrency: 1
            )
            let refused = await DownloadFixture.run(try tiny.start(request))
            #expect((refused.result.failureValue as? DownloadError)?.code == "insufficient_storage")
            #expect(try tiny.store.task(fixture.assetId)?.state == .paused)
            #expect(!FileManager.default.fileExists(atPath: fixture.package.manifestURL.path))
            try await tiny.shutdown()

            // Space runs out after a few files, then comes back.
            let probe = SpaceProbe()
            let session = try fixture.session {
                $0.freeSpace = { _ in probe.next() }
                $0.storageWaitSeconds = 20
                $0.storageMargin = 0
            }
            let run = await DownloadFixture.run(try session.resume(assetId: fixture.assetId))
            let manifest = try run.result.get()
            #expect(manifest.isComplete)
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            let paused = run.events.contains { if case .paused(let reason?) = $0 { reason.code == "insufficient_storage" } else { false } }
            #expect(paused)
            #expect(run.events.contains { if case .resumed = $0 { true } else { false } })
            try await session.shutdown()
        }
    }

    /// Starts the fixture's download, one file at a time over a 400 kB/s origin (slow enough to act on while it runs),
    /// and runs `body` with its session and task.
    static func withSlowDownload(_ fixture: DownloadFixture, _ body: @Sendable (DownloadSession, DownloadTask) async throws -> Void) async throws {
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 400_000)) { origin, keyServer in
            let session = try fixture.session()
            let request = DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token(),
                concurrency: 1
            )
            try await body(session, try session.start(request))
        }
    }

    @Test("while a task runs, delete, cancel and a second run are refused (asset_busy); pause keeps the files; cancel removes them")
    func pauseAndCancel() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await Self.withSlowDownload(fixture) { session, task in
            var sawProgress = false
            for await event in task.events {
                if case .progress(let progress) = event, progress.bytes > 0, !sawProgress {
                    sawProgress = true
                    // The running task holds the asset: a deletion (another process's `stowage delete`), a cancel and a
                    // second runner are refused before they touch anything.
                    let keyStore = try KeyStore(dataDirectory: fixture.clientDirectory.url, clock: SystemClock())
                    for attempt in [
                        { _ = try PackageDeletion(dataDirectory: fixture.clientDirectory, store: keyStore).delete(assetId: fixture.assetId, at: 0) },
                        { try session.cancel(assetId: fixture.assetId) },
                        { _ = try session.resume(assetId: fixture.assetId) },
                    ] as [() throws -> Void] {
                        #expect(performing: attempt, throws: { ($0 as? PackageError).map { $0.code == "asset_busy" } ?? false })
                    }
                    #expect(FileManager.default.fileExists(atPath: fixture.package.manifestURL.path))
                    #expect(try session.store.task(fixture.assetId)?.state == .downloading)
                    task.pause()
                }
            }
            await #expect(throws: CancellationError.self) { try await task.result() }
            #expect(sawProgress)
            #expect(try session.store.task(fixture.assetId)?.state == .paused)
            #expect(FileManager.default.fileExists(atPath: fixture.package.manifestURL.path))

            try session.cancel(assetId: fixture.assetId)
            #expect(try session.store.task(fixture.assetId) == nil)
            #expect(!FileManager.default.fileExists(atPath: fixture.package.url.path))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: fixture.clientDirectory.packagesURL.path)
            #expect(leftovers.isEmpty)
            #expect(throws: DownloadError.notFound(assetId: fixture.assetId)) { try session.cancel(assetId: fixture.assetId) }
            try await session.shutdown()
        }
    }

    @Test("a paused download whose manifest was damaged is refused on resume (invalid_manifest), and its files are kept")
    func damagedManifestRefusesResume() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await Self.withSlowDownload(fixture) { session, task in
            for await event in task.events {
                if case .progress(let progress) = event, progress.bytes > 0 { task.pause() }
            }
            #expect(try session.store.task(fixture.assetId)?.state == .paused)
            let before = try FileManager.default.subpathsOfDirectory(atPath: fixture.package.url.path).sorted()
            // Cut short, as a hand edit or a failing disk might leave it (Stowage writes it whole, then renames).
            let manifest = try Data(contentsOf: fixture.package.manifestURL)
            try manifest.prefix(manifest.count / 2).write(to: fixture.package.manifestURL)

            let resumed = try session.resume(assetId: fixture.assetId)
            let error: DownloadError
            do {
                let manifest = try await resumed.result()
                Issue.record("a resume over a damaged manifest went on: \(manifest.assetId) complete \(manifest.isComplete)")
                return
            } catch let failure as DownloadError {
                error = failure
            }
            #expect(error.code == "invalid_manifest", "\(error)")
            #expect(error.message.contains("nothing was changed") && error.message.contains("stowage delete"), "\(error.message)")
            // Nothing was planned afresh over it: the files and the damaged manifest are as they were.
            #expect(try FileManager.default.subpathsOfDirectory(atPath: fixture.package.url.path).sorted() == before)
            #expect(try Data(contentsOf: fixture.package.manifestURL) == manifest.prefix(manifest.count / 2))
            try await session.shutdown()
        }
    }

    /// Downloads the fixture's asset with its default audio only (video and English), as the add-media tests start.
    static func downloadVideoAndEnglish(_ fixture: DownloadFixture, session: DownloadSession, origin: URL, keyServer: URL) async throws {
        let request = DownloadRequest(
            url: fixture.sourceURL(origin),
            assetId: fixture.assetId,
            selection: MediaSelectionOptions(audio: .defaults, subtitles: .none),
            keyServerURL: keyServer.absoluteString,
            token: try await fixture.token()
        )
        let first = try await DownloadFixture.run(try session.start(request)).result.get()
        #expect(first.renditions.map(\.id) == ["video", "audio-en"])
    }

    @Test("add-media adds a language to a completed package")
    func addMedia() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            let session = try fixture.session()
            try await Self.downloadVideoAndEnglish(fixture, session: session, origin: origin, keyServer: keyServer)
            let added = try await DownloadFixture.run(
                try session.addMedia(
                    assetId: fixture.assetId,
                    selection: MediaSelectionOptions(audio: .languages(["de"]), subtitles: .languages(["fr"]))
                )
            ).result.get()
            #expect(added.renditions.map(\.id) == ["video", "audio-en", "audio-de", "subtitles-fr"])
            #expect(added.isComplete)
            try fixture.assertPackageMatchesSource(added, origin: origin)
            // Both runs completed: every file is vouched for, the first run's records kept beside the second's.
            _ = try fixture.assertVerifiedRecords(added, coveringAll: true)
            let master = try String(contentsOf: fixture.package.url(forRelativePath: "master.m3u8"), encoding: .utf8)
            #expect(master.contains("audio-de/index.m3u8") && master.contains("subtitles-fr/index.m3u8") && master.contains("audio-en/index.m3u8"))
            try await session.shutdown()
        }
    }

    @Test("add-media of a rendition whose source playlist has since gone live: live_playlist, and the package is as it was")
    func addMediaOfALiveRendition() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            let session = try fixture.session()
            try await Self.downloadVideoAndEnglish(fixture, session: session, origin: origin, keyServer: keyServer)
            // The German audio's playlist loses its EXT-X-ENDLIST and its VOD type at the origin: it is live now.
            let german = fixture.originRoot.appendingPathComponent("\(fixture.assetId)/audio/de/index.m3u8")
            let playlist = try String(contentsOf: german, encoding: .utf8)
            #expect(playlist.contains("#EXT-X-ENDLIST"))
            try playlist.replacingOccurrences(of: "#EXT-X-ENDLIST", with: "").replacingOccurrences(of: "#EXT-X-PLAYLIST-TYPE:VOD", with: "")
                .write(to: german, atomically: true, encoding: .utf8)
            let added = try session.addMedia(assetId: fixture.assetId, selection: MediaSelectionOptions(audio: .languages(["de"]), subtitles: .none))
            let result = await DownloadFixture.run(added).result
            let error = try #require(result.failureValue as? DownloadError, "\(result)")
            #expect(error.code == "live_playlist")
            #expect(error.description.contains("audio/de/index.m3u8") && error.description.contains("--asset-id NEW_ID"), "\(error)")
            // The package keeps what it had, complete, and still matches its source.
            let manifest = try fixture.package.readManifest()
            #expect(manifest.renditions.map(\.id) == ["video", "audio-en"])
            #expect(manifest.isComplete)
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            try await session.shutdown()
        }
    }
}

/// Free space that is plenty for the plan, then runs out for a while, then comes back.
final class SpaceProbe: @unchecked Sendable {
    private let lock = NSLock()
    private var calls = 0

    func next() -> Int64? {
        lock.lock()
        defer { lock.unlock() }
        calls += 1
        return (4...12).contains(calls) ? 10 : 1 << 40
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

@Suite("Network down")
struct NetworkDownTests {
    @Test("while the origin refuses connections the task waits, and continues when it comes back")
    func waitsForTheNetwork() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { _, keyServer in
            // A port held bound but not listening refuses connections; 1.5 s later the origin listens on it beside the
            // reservation, which is kept until the end, so the port is never free for another test to take.
            let held = try HeldPort()
            defer { held.release() }
            let port = held.port
            let session = try fixture.session {
                $0.retry.networkDownGrace = 30
                $0.retry.firstContactGrace = 30  // the origin is down from the first request on
            }
            let request = DownloadRequest(
                url: "http://127.0.0.1:\(port)/\(fixture.assetId)/master.m3u8",
                assetId: fixture.assetId,
                selection: MediaSelectionOptions(subtitles: .none),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token()
            )
            let task = try session.start(request)
            try await Task.sleep(for: .milliseconds(1500))
            let origin = Origin(configuration: .init(root: fixture.originRoot.path, port: port))
            let server = Task { try await origin.run { _ in } }
            let run = await DownloadFixture.run(task)
            server.cancel()
            _ = try? await server.value
            try await session.shutdown()
            let manifest = try run.result.get()
            #expect(manifest.isComplete)
            try fixture.assertPackageMatchesSource(manifest, origin: URL(string: "http://127.0.0.1:\(port)")!)
        }
    }
}
