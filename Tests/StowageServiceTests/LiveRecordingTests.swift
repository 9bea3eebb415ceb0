import DownloadTestSupport
import Foundation
import KeyDelivery
import OfflinePackage
import Playback
import StowageCore
import StowageLibrary
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Live recording end to end, through the command line: a clear source made by ffmpeg, packaged with
/// `stowage package --rotate-every 2` (SAMPLE-AES, a new skd key every two segments, and, as a live packager would,
/// no EXT-X-SESSION-KEY announcing keys ahead), served by `stowage origin --live`, recorded by `stowage download`.
/// Every recorded file must equal the origin's, and ffmpeg's packets of the played package must equal those of the
/// clear segments the recording covers.
@Suite("Live recording: origin --live, key rotation, gaps after a kill, EVENT, --duration", .serialized, .timeLimit(.minutes(5)))
struct LiveRecordingTests {
    /// A fixture's key server with `live-1` packaged from an ffmpeg source of `seconds` (2 s segments, a video variant
    /// and an audio rendition).
    struct Live: Sendable {
        let fixture: DownloadFixture
        let clear: URL
        let origin: URL
        var home: URL { fixture.clientDirectory.url }
        var package: URL { home.appendingPathComponent("packages/live-1") }

        static func make(seconds: Int, rotateEvery: Int = 2) async throws -> Live {
            let fixture = try await DownloadFixture.make()
            let clear = fixture.root.appendingPathComponent("clear", isDirectory: true)
            try FileManager.default.createDirectory(at: clear, withIntermediateDirectories: true)
            let ffmpeg = try await ProcessRunner.run(
                program: "ffmpeg",
                [
                    "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=192x108:rate=25", "-f", "lavfi", "-i",
                    "sine=frequency=440:sample_rate=48000", "-t", String(seconds), "-map", "0:v", "-map", "1:a", "-c:v", "libx264",
                    "-profile:v", "baseline", "-pix_fmt", "yuv420p", "-g", "50", "-keyint_min", "50", "-sc_threshold", "0", "-c:a", "aac",
                    "-b:a", "64k", "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_segment_filename",
                    clear.path + "/stream_%v/seg_%d.ts", "-master_pl_name", "master.m3u8", "-var_stream_map",
                    "v:0,agroup:aud a:0,agroup:aud,default:yes", clear.path + "/stream_%v/index.m3u8",
                ]
            )
            #expect(ffmpeg.status == 0, "\(String(decoding: ffmpeg.standardError, as: UTF8.self))")
            let origin = fixture.root.appendingPathComponent("live-origin", isDirectory: true)
            let packaged = try await run(
                [
                    "package", clear.appendingPathComponent("master.m3u8").path, "--asset-id", "live-1", "--method", "sample-aes",
                    "--out", origin.appendingPathComponent("live-1").path, "--keyserver-data-dir",
                    fixture.root.appendingPathComponent("keyserver").path, "--rotate-every", String(rotateEvery),
                ],
                home: fixture.clientDirectory.url
            )
            #expect(packaged.status == 0, "\(packaged.output)")
            // A live packager cannot announce keys it has not made yet: the keys appear in the media playlists only.
            let master = origin.appendingPathComponent("live-1/master.m3u8")
            let text = try String(contentsOf: master, encoding: .utf8)
            #expect(text.contains("EXT-X-SESSION-KEY"))
            try text.split(separator: "\n").filter { !$0.hasPrefix("#EXT-X-SESSION-KEY") }.joined(separator: "\n")
                .write(to: master, atomically: true, encoding: .utf8)
            return Live(fixture: fixture, clear: clear, origin: origin)
        }

        /// `stowage origin --live` on the packaged asset; its base URL.
        func startOrigin(_ extra: [String]) async throws -> (RunningProcess, URL) {
            let process = try ProcessRunner.start(try StowageExecutable.url(), ["origin", origin.path, "--live"] + extra)
            var output = Data()
            let deadline = ContinuousClock.now + .seconds(30)
            while process.isRunning, !output.contains(UInt8(ascii: "\n")), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
                output = try process.standardOutput()
            }
            let line = String(decoding: output.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
            guard line.hasPrefix("listening on "), let url = URL(string: String(line.dropFirst("listening on ".count))) else {
                process.kill()
                throw FrameHashes.Failure(description: "the origin did not start: \(line)")
            }
            return (process, url)
        }

        /// The download's arguments for the asset on `origin`; its token goes in `STOWAGE_TOKEN` (`run` and `launchRecorder`
        /// take it), never on the command line.
        func download(_ origin: URL, keyServer: URL, _ extra: [String] = []) -> [String] {
            ["download", origin.appendingPathComponent("live-1/master.m3u8").absoluteString, "--key-server", keyServer.absoluteString] + extra
        }

        /// Starts `stowage` with the arguments beside the test, its output appended to `log`; `token` goes in `STOWAGE_TOKEN`.
        func launchRecorder(_ arguments: [String], log: URL, token: String? = nil) throws -> ChildProcess {
            var environment = ProcessInfo.processInfo.environment
            environment["STOWAGE_HOME"] = home.path
            environment["STOWAGE_TOKEN"] = token
            let fd = open(log.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            defer { close(fd) }
            return try ChildProcess.launch(
                try StowageExecutable.url().path,
                arguments,
                environment: environment,
                standardOutput: .descriptor(fd),
                standardError: .descriptor(fd)
            )
        }

        /// Waits (10 s at most) until `count` video segments are in place.
        /// - Throws: when they are not, naming how many are.
        func waitForVideoSegments(_ count: Int) async throws {
            var done: [String] = []
            for _ in 0..<500 {
                done = (try? FileManager.default.contentsOfDirectory(atPath: package.appendingPathComponent("video").path)) ?? []
                if done.filter({ $0.hasSuffix(".ts") }).count >= count { return }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw FrameHashes.Failure(description: "\(count) video segments were not recorded within 10 s: \(done.sorted())")
        }

        /// Runs `body` with the fixture's key server, a token, and `stowage origin --live ARGUMENTS` on the asset.
        func serving<T: Sendable>(
            _ arguments: [String],
            _ body: @Sendable (_ origin: URL, _ keyServer: URL, _ token: String) async throws -> T
        ) async throws -> T {
            let token = try await fixture.token()
            return try await fixture.withServers { _, keyServer in
                let (origin, url) = try await startOrigin(arguments)
                defer { origin.kill() }
                return try await body(url, keyServer, token)
            }
        }

        func manifest() throws -> PackageManifest {
            try JSONDecoder().decode(PackageManifest.self, from: Data(contentsOf: package.appendingPathComponent("manifest.json")))
        }

        /// Every file of the package equals the origin's file it came from.
        func assertFilesEqualSource(_ manifest: PackageManifest, sourceLocation: SourceLocation = #_sourceLocation) throws {
            #expect(!manifest.files.isEmpty, sourceLocation: sourceLocation)
            for file in manifest.files {
                let local = try Data(contentsOf: package.appendingPathComponent(file.path))
                let path = try #require(URL(string: file.sourceURL)).path
                let source = try Data(contentsOf: origin.appendingPathComponent(path))
                #expect(local == source, "\(file.path) differs from \(file.sourceURL)", sourceLocation: sourceLocation)
            }
        }

        /// A clear playlist of the source's segments the rendition recorded (its media sequence numbers), for
        /// ffmpeg's reference packets.
        func clearReference(of rendition: PackageRendition, stream: String) throws -> URL {
            var lines = [
                "#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:\(rendition.segments.first?.mediaSequence ?? 0)",
            ]
            for segment in rendition.segments where !segment.isGap {
                lines += [String(format: "#EXTINF:%.6f,", segment.duration), "seg_\(segment.mediaSequence).ts"]
            }
            lines.append("#EXT-X-ENDLIST")
            let url = clear.appendingPathComponent("\(stream)/recorded.m3u8")
            try (lines.joined(separator: "\n") + "\n").write(to: url, atomically: true, encoding: .utf8)
            return url
        }
    }

    /// Runs `stowage` with `STOWAGE_HOME`, `STOWAGE_TOKEN` set to `token` (unset without one) and no locale; status and
    /// both outputs together.
    static func run(
        _ arguments: [String],
        home: URL,
        token: String? = nil,
        timeout: Duration = .seconds(120)
    ) async throws -> (status: Int32, output: String) {
        var environment = ProcessInfo.processInfo.environment
        for name in ["LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"] { environment[name] = nil }
        environment["STOWAGE_HOME"] = home.path
        environment["STOWAGE_TOKEN"] = token
        let result = try await ProcessRunner.run(try StowageExecutable.url(), arguments, environment: environment, timeout: timeout)
        return (result.status, String(decoding: result.standardOutput + result.standardError, as: UTF8.self))
    }

    /// Size and MD5 of each packet of the first stream of type `stream` of `input`, as ffmpeg copies them.
    static func packets(_ input: String, stream: String) async throws -> [String] {
        let result = try await ProcessRunner.run(
            program: "ffmpeg",
            ["-nostdin", "-v", "error", "-i", input, "-map", "0:\(stream):0", "-c", "copy", "-f", "framemd5", "-"],
            timeout: .seconds(120)
        )
        #expect(result.status == 0, "ffmpeg \(input): \(String(decoding: result.standardError, as: UTF8.self))")
        return String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map {
            $0.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ",")
        }
    }

    /// Plays the package through the gate and compares ffmpeg's packets of each stream with the clear segments'.
    static func assertPlaysLikeClearTwin(_ live: Live, manifest: PackageManifest) async throws {
        let library = try OfflineLibrary(dataDirectory: live.fixture.clientDirectory)
        let playback = try await library.play(assetId: "live-1", online: false)
        do {
            for (kind, stream, folder) in [(PackageRendition.Kind.video, "v", "stream_0"), (.audio, "a", "stream_1")] {
                let rendition = try #require(manifest.renditions.first { $0.kind == kind })
                let clear = try await packets(try live.clearReference(of: rendition, stream: folder).path, stream: stream)
                #expect(clear.count > 20)
                let played = try await packets(playback.address.sessionMultivariantURL.absoluteString, stream: stream)
                let same = played == clear
                #expect(same, "\(stream): \(played.count) packets against the clear segments' \(clear.count)")
            }
        } catch {
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()
    }

    @Test(
        "a SAMPLE-AES stream rotating keys every 2 segments, window 3 at 4x, is recorded to its EXT-X-ENDLIST, whole and identical",
        arguments: [[], ["--profile", "lossy", "--seed", "11"]]
    )
    func recordsToEndList(_ conditions: [String]) async throws {
        let live = try await Live.make(seconds: 24)
        defer { live.fixture.remove() }
        try await live.serving(["--window", "3", "--speed", "4"] + conditions) { url, keyServer, token in
            let recorded = try await Self.run(live.download(url, keyServer: keyServer), home: live.home, token: token)
            #expect(recorded.status == 0, "\(recorded.output)")
            #expect(recorded.output.contains("recording ended: the stream ended (EXT-X-ENDLIST)"), "\(recorded.output)")
        }
        let manifest = try live.manifest()
        let recording = try #require(manifest.recording)
        #expect(recording.endReason == .endList && recording.gaps.isEmpty && recording.playlistType == "live")
        #expect(manifest.isComplete)
        try live.assertFilesEqualSource(manifest)
        let video = try #require(manifest.rendition(id: "video"))
        // The recording ends with the source's last segment, and holds every segment from where it began.
        #expect(video.segments.last?.mediaSequence == 11)
        #expect(video.segments.map(\.mediaSequence) == Array((video.segments.first?.mediaSequence ?? 0)...11))
        #expect(video.segments.allSatisfy { $0.programDateTime != nil })
        // Keys rotated during the recording: the last lease covers every key, and it is the only one holding keys.
        #expect(Set(video.files.compactMap(\.key?.keyId)).count >= 3)
        let store = try KeyStore(dataDirectory: live.home, clock: SystemClock())
        let holding = try store.leases(assetId: "live-1").filter { $0.state.holdsKeyMaterial }
        #expect(holding.count == 1)
        let leased = Set(holding.first?.record.terms.keyIds ?? [])
        #expect(leased.isSuperset(of: manifest.keys.map(\.keyId)))
        let local = try String(contentsOf: live.package.appendingPathComponent("video/index.m3u8"), encoding: .utf8)
        #expect(local.contains("#EXT-X-ENDLIST") && local.contains("#EXT-X-PLAYLIST-TYPE:VOD") && !local.contains("#EXT-X-GAP"))
        #expect(!FileManager.default.fileExists(atPath: live.package.appendingPathComponent(".recording").path))

        let verify = try await Self.run(["verify", "live-1", "--deep"], home: live.home)
        #expect(verify.status == 0 && !verify.output.contains("recording_gap"), "\(verify.output)")
        try await Self.assertPlaysLikeClearTwin(live, manifest: manifest)
    }

    @Test("SIGKILL for longer than the window, then resume: what came before and after is kept, the hole is a marked gap, exit status 3")
    func killedRecorderLeavesMarkedGap() async throws {
        let live = try await Live.make(seconds: 40)
        defer { live.fixture.remove() }
        let output = live.fixture.root.appendingPathComponent("record.log")
        try await live.serving(["--window", "3", "--speed", "4"]) { url, keyServer, token in
            let recorder = try live.launchRecorder(live.download(url, keyServer: keyServer), log: output, token: token)
            // A test that fails part way never leaves a recorder running.
            defer { recorder.send(SIGKILL) }
            // Killed once the first segments are in place (bounded wait).
            try await live.waitForVideoSegments(2)
            recorder.send(SIGKILL)
            _ = await recorder.waitForExit()
            // Away for 3 s: 12 s of media at 4x, four times the 6 s window.
            try await Task.sleep(for: .seconds(3))
            let resumed = try await Self.run(["resume", "live-1"], home: live.home)
            #expect(resumed.status == 3, "\(resumed.output)")
            #expect(resumed.output.contains("[recording_gap]") && resumed.output.contains("of the broadcast"), "\(resumed.output)")
        }
        let manifest = try live.manifest()
        let recording = try #require(manifest.recording)
        #expect(recording.endReason == .endList)
        #expect(manifest.isComplete)
        let gaps = recording.gaps.filter { $0.renditionId == "video" }
        #expect(gaps.count == 1)
        let gap = try #require(gaps.first)
        #expect(gap.segments >= 3 && gap.seconds >= 6)
        let start = try #require(gap.startsAt)
        let end = try #require(gap.endsAt)
        #expect(abs((end - start) - gap.seconds) < 0.01)
        // Before and after the gap, every file equals the source; the gap's segments are EXT-X-GAP in the playlist.
        try live.assertFilesEqualSource(manifest)
        let video = try #require(manifest.rendition(id: "video"))
        #expect(video.segments.last?.mediaSequence == 19)
        let missing = video.segments.filter(\.isGap).map(\.mediaSequence)
        #expect(missing == Array(gap.firstMediaSequence..<(gap.firstMediaSequence + gap.segments)))
        #expect(video.segments.contains { !$0.isGap && $0.mediaSequence < gap.firstMediaSequence })
        let local = try String(contentsOf: live.package.appendingPathComponent("video/index.m3u8"), encoding: .utf8)
        #expect(local.components(separatedBy: "#EXT-X-GAP").count - 1 == gap.segments)

        let verify = try await Self.run(["verify", "live-1", "--deep"], home: live.home)
        #expect(verify.status == 0, "\(verify.output)")
        #expect(verify.output.contains("warning [recording_gap]"), "\(verify.output)")
        let info = try await Self.run(["info", "live-1"], home: live.home)
        #expect(info.output.contains("gap in video") && info.output.contains("wall clock:"), "\(info.output)")
    }

    @Test("played while it records: the served playlist grows as an EVENT playlist, and ffmpeg's packets equal the clear segments'")
    func playWhileRecording() async throws {
        let live = try await Live.make(seconds: 24)
        defer { live.fixture.remove() }
        let work = live.fixture.root.appendingPathComponent("played", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let output = live.fixture.root.appendingPathComponent("record.log")
        // 2x: 12 s of real time, time enough for a player to join while the stream goes on. A window of 6 segments (6 s
        // of real time) leaves a recorder slowed by a busy machine time to fetch each segment before it leaves.
        try await live.serving(["--window", "6", "--speed", "2"]) { url, keyServer, token in
            let recorder = try live.launchRecorder(live.download(url, keyServer: keyServer), log: output, token: token)
            // A test that fails part way never leaves a recorder running.
            defer { recorder.send(SIGKILL) }
            try await live.waitForVideoSegments(1)
            let library = try OfflineLibrary(dataDirectory: live.fixture.clientDirectory)
            // The first segments land while their keys are obtained: until then the gate says keys_pending.
            var started: PlaybackHandle?
            // Asked every 100 ms, not faster: each refused attempt opens the key store the recorder is writing to.
            for _ in 0..<100 where started == nil {
                do {
                    started = try await library.play(assetId: "live-1", online: false)
                } catch let error as PlaybackError where error.code == "keys_pending" {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            let playback = try #require(started)
            let first = try String(contentsOf: live.package.appendingPathComponent("video/index.m3u8"), encoding: .utf8)
            #expect(first.contains("#EXT-X-PLAYLIST-TYPE:EVENT") && !first.contains("#EXT-X-ENDLIST"))
            // The player reads the growing playlist from its first segment until EXT-X-ENDLIST comes.
            let played = try await ProcessRunner.run(
                program: "ffmpeg",
                [
                    "-nostdin", "-v", "error", "-live_start_index", "0", "-i", playback.address.sessionMultivariantURL.absoluteString,
                    "-map", "0:v:0", "-c", "copy", "-f", "framemd5", work.appendingPathComponent("v.txt").path,
                    "-map", "0:a:0", "-c", "copy", "-f", "framemd5", work.appendingPathComponent("a.txt").path,
                ],
                timeout: .seconds(120)
            )
            #expect(played.status == 0, "\(String(decoding: played.standardError, as: UTF8.self))")
            let ended = await recorder.waitForExit()
            #expect(ended.status == 0, "\((try? String(contentsOf: output, encoding: .utf8)) ?? "")")
            await playback.stop()
            await library.close()
        }
        let manifest = try live.manifest()
        #expect(manifest.isComplete && manifest.recording?.gaps.isEmpty == true)
        for (kind, stream, folder) in [(PackageRendition.Kind.video, "v", "stream_0"), (.audio, "a", "stream_1")] {
            let rendition = try #require(manifest.renditions.first { $0.kind == kind })
            let clear = try await Self.packets(try live.clearReference(of: rendition, stream: folder).path, stream: stream)
            let text = try String(contentsOf: work.appendingPathComponent("\(stream).txt"), encoding: .utf8)
            let played = text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map {
                $0.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ",")
            }
            #expect(clear.count > 20)
            let same = played == clear
            #expect(same, "\(stream): \(played.count) packets played while recording against the clear segments' \(clear.count)")
        }
    }

    @Test("Ctrl-C ends a recording and keeps it; a second Ctrl-C, while its last files still come, pauses it at once")
    func secondInterruptPauses() async throws {
        let live = try await Live.make(seconds: 16)
        defer { live.fixture.remove() }
        let output = live.fixture.root.appendingPathComponent("record.log")
        // A link of 3 kB/s: a segment takes seconds, so files the recording listed are still coming after the first
        // Ctrl-C.
        try await live.serving(["--window", "3", "--speed", "4", "--loop", "--bandwidth", "3000"]) { url, keyServer, token in
            let recorder = try live.launchRecorder(live.download(url, keyServer: keyServer), log: output, token: token)
            defer { recorder.send(SIGKILL) }
            // Recording (a Ctrl-C while the download is still being planned pauses it): its keys are obtained only
            // once it records.
            func log() -> String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }
            for _ in 0..<500 where !log().contains("keys: ") { try await Task.sleep(for: .milliseconds(20)) }
            #expect(log().contains("keys: "), "the recording did not start within 10 s: \(log())")
            recorder.send(SIGINT)
            // The recording ends in the manifest; its listed files go on coming over the slow link.
            var ended = false
            for _ in 0..<500 where !ended {
                ended = (try? live.manifest().recording?.endReason) == .stopped
                if !ended { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(ended, "the first Ctrl-C did not end the recording within 10 s")
            #expect(recorder.isRunning, "the recording's last files came too fast for a second Ctrl-C to matter")
            recorder.send(SIGINT)
            let exited = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    _ = await recorder.waitForExit()
                    return true
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(20))
                    // The wait above ends only with the process.
                    if recorder.isRunning { recorder.send(SIGKILL) }
                    return false
                }
                defer { group.cancelAll() }
                return await group.next() ?? false
            }
            #expect(exited, "the recorder did not exit within 20 s of the second Ctrl-C: \(log())")
            #expect(log().contains("paused"), "\(log())")
        }
        let manifest = try live.manifest()
        #expect(!manifest.isComplete)
        #expect(manifest.recording?.endReason == .stopped)
        let listed = try await Self.run(["list", "--json"], home: live.home)
        #expect(listed.output.contains("\"paused\""), "\(listed.output)")
    }

    @Test("stowage stop ends a killed recording here, without reloading it; once ended, stop says not_recording")
    func stopKilledRecording() async throws {
        let live = try await Live.make(seconds: 16)
        defer { live.fixture.remove() }
        let output = live.fixture.root.appendingPathComponent("record.log")
        try await live.serving(["--window", "3", "--speed", "4", "--loop"]) { url, keyServer, token in
            let recorder = try live.launchRecorder(live.download(url, keyServer: keyServer), log: output, token: token)
            defer { recorder.send(SIGKILL) }
            try await live.waitForVideoSegments(2)
            recorder.send(SIGKILL)
            _ = await recorder.waitForExit()
            let recorded = try String(contentsOf: live.package.appendingPathComponent(".recording/video.m3u8"), encoding: .utf8)
            let listed = recorded.components(separatedBy: "#EXTINF").count - 1
            #expect(listed >= 2)
            let stopped = try await Self.run(["stop", "live-1"], home: live.home)
            #expect(stopped.status == 0, "\(stopped.output)")
            let manifest = try live.manifest()
            #expect(manifest.isComplete && manifest.recording?.endReason == .stopped)
            // What the killed run had listed, and no more: the stream (still live) was not reloaded.
            #expect(manifest.renditions.first { $0.id == "video" }?.segments.count == listed)
            try live.assertFilesEqualSource(manifest)
            let again = try await Self.run(["stop", "live-1"], home: live.home)
            #expect(again.status == 1 && again.output.contains("not_recording") && again.output.contains("stowage resume live-1"), "\(again.output)")
        }
        let verify = try await Self.run(["verify", "live-1", "--deep"], home: live.home)
        #expect(verify.status == 0, "\(verify.output)")
    }

    @Test("a key rotating every segment: a lease per 32 keys, one playback window over them all, refused when one is gone")
    func manyKeys() async throws {
        // 70 keys per rendition, a new key for every 2 s segment: more than the 64 keys the key server takes in one
        // request, so more than one lease can hold.
        let live = try await Live.make(seconds: 140, rotateEvery: 1)
        defer { live.fixture.remove() }
        try await live.serving(["--window", "3", "--speed", "20", "--event"]) { url, keyServer, token in
            let recorded = try await Self.run(live.download(url, keyServer: keyServer), home: live.home, token: token)
            #expect(recorded.status == 0, "\(recorded.output)")
        }
        let manifest = try live.manifest()
        #expect(manifest.isComplete && manifest.recording?.gaps.isEmpty == true)
        try live.assertFilesEqualSource(manifest)
        let skd = manifest.keys.filter { $0.kind == .skd }.map(\.keyId)
        #expect(skd.count > 64)
        let store = try KeyStore(dataDirectory: live.home, clock: SystemClock())
        let holding = try store.leases(assetId: "live-1").filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial }
        // One lease per group of 32 keys in the manifest's order; the groups' older leases were returned.
        #expect(holding.count == (skd.count + 31) / 32)
        #expect(holding.allSatisfy { $0.record.terms.keyIds.count <= 32 })
        #expect(Set(holding.flatMap(\.record.terms.keyIds)) == Set(skd))
        let verify = try await Self.run(["verify", "live-1", "--deep"], home: live.home)
        #expect(verify.status == 0, "\(verify.output)")

        try await Self.assertPlaysLikeClearTwin(live, manifest: manifest)
        // Playing started every lease's window at the same first play: the asset has one window.
        let played = try store.leases(assetId: "live-1").filter { $0.state.holdsKeyMaterial }
        #expect(played.count == holding.count && played.allSatisfy { $0.record.firstPlayedAt != nil })
        #expect(Set(played.map(\.record.firstPlayedAt)).count == 1)

        // One group's lease returned: the asset no longer plays, whatever the other leases say.
        try store.returnLease(leaseId: try #require(holding.last).leaseId, at: SystemClock().now)
        let refused = try await Self.run(["verify", "live-1"], home: live.home)
        // Returned, or released already if the key server was told meanwhile.
        #expect(refused.status != 0 && (refused.output.contains("returned") || refused.output.contains("released")), "\(refused.output)")
    }

    @Test("an EVENT playlist that grows is recorded from its first segment, even when the recorder starts late")
    func eventFromFirstSegment() async throws {
        let live = try await Live.make(seconds: 16)
        defer { live.fixture.remove() }
        try await live.serving(["--window", "2", "--speed", "4", "--event"]) { url, keyServer, token in
            // 1.2 s late: a sliding window of 2 would have lost the first segments by now.
            try await Task.sleep(for: .milliseconds(1200))
            let recorded = try await Self.run(live.download(url, keyServer: keyServer), home: live.home, token: token)
            #expect(recorded.status == 0, "\(recorded.output)")
        }
        let manifest = try live.manifest()
        #expect(manifest.recording?.playlistType == "event" && manifest.recording?.gaps.isEmpty == true)
        let video = try #require(manifest.rendition(id: "video"))
        #expect(video.segments.map(\.mediaSequence) == Array(0...7))
        try live.assertFilesEqualSource(manifest)
        try await Self.assertPlaysLikeClearTwin(live, manifest: manifest)
    }

    @Test(
        "a live stream that restarts its numbering: five reloads behind the recording end it with live_sequence_reset, and what was recorded stays whole"
    )
    func sequenceReset() async throws {
        let live = try await Live.make(seconds: 8)
        defer { live.fixture.remove() }
        let output = live.fixture.root.appendingPathComponent("record.log")
        let token = try await live.fixture.token()
        try await live.fixture.withServers { _, keyServer in
            let (first, firstURL) = try await live.startOrigin(["--window", "3", "--speed", "4", "--loop"])
            defer { first.kill() }
            // The recorder reaches the origin through a relay whose port stays bound for the whole test: the second
            // origin, on a port of its own, takes over the stream's address without binding a port just let go.
            let relay = try StallingRelay(upstreamPort: try #require(firstURL.port))
            defer { relay.stop() }
            var address = try #require(URLComponents(url: firstURL, resolvingAgainstBaseURL: false))
            address.port = relay.port
            let url = try #require(address.url)
            let recorder = try live.launchRecorder(live.download(url, keyServer: keyServer), log: output, token: token)
            // A test that fails part way never leaves a recorder running.
            defer { recorder.send(SIGKILL) }
            try await live.waitForVideoSegments(8)
            first.kill()
            _ = try await first.waitForExit(timeout: .seconds(10))
            // The stream comes back at the same address numbered from 0, at an eighth of real speed: it stays behind the
            // recording for far longer than five reloads.
            let (restarted, secondURL) = try await live.startOrigin(["--window", "3", "--speed", "0.125", "--loop"])
            defer { restarted.kill() }
            relay.redirect(to: try #require(secondURL.port))
            let watchdog = Task {
                try await Task.sleep(for: .seconds(120))
                recorder.send(SIGKILL)
            }
            let ended = await recorder.waitForExit()
            watchdog.cancel()
            let transcript = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            #expect(ended.status != 0 && ended.status != 9, "\(transcript)")
            #expect(transcript.contains("[live_sequence_reset]") && transcript.contains("under a new asset ID"), "\(transcript)")
        }
        // What was recorded before the restart is kept, byte for byte the source's.
        let manifest = try live.manifest()
        let video = try #require(manifest.rendition(id: "video"))
        #expect(video.segments.count >= 8)
        try live.assertFilesEqualSource(manifest)
    }

    @Test("Ctrl-C ends a recording of a stream that never ends and keeps it: exit status 0, a complete package")
    func interruptKeepsRecording() async throws {
        let live = try await Live.make(seconds: 8)
        defer { live.fixture.remove() }
        let output = live.fixture.root.appendingPathComponent("record.log")
        try await live.serving(["--window", "3", "--speed", "4", "--loop"]) { url, keyServer, token in
            let recorder = try live.launchRecorder(live.download(url, keyServer: keyServer), log: output, token: token)
            // A test that fails part way never leaves a recorder running.
            defer { recorder.send(SIGKILL) }
            try await live.waitForVideoSegments(3)
            recorder.send(SIGINT)
            let watchdog = Task {
                try await Task.sleep(for: .seconds(60))
                recorder.send(SIGKILL)
            }
            let ended = await recorder.waitForExit()
            watchdog.cancel()
            let transcript = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            #expect(ended.status == 0, "\(transcript)")
            #expect(transcript.contains("recording ended: stopped"), "\(transcript)")
        }
        let manifest = try live.manifest()
        #expect(manifest.recording?.endReason == .stopped && manifest.isComplete)
        try live.assertFilesEqualSource(manifest)
        let verify = try await Self.run(["verify", "live-1", "--deep"], home: live.home)
        #expect(verify.status == 0, "\(verify.output)")
    }

    @Test("--until stops a looping stream at the time given, keeping what was recorded")
    func untilTime() async throws {
        let live = try await Live.make(seconds: 8)
        defer { live.fixture.remove() }
        try await live.serving(["--window", "3", "--speed", "4", "--loop"]) { url, keyServer, token in
            let formatter = ISO8601DateFormatter()
            let until = Date().addingTimeInterval(3)
            let recorded = try await Self.run(
                live.download(url, keyServer: keyServer, ["--until", formatter.string(from: until)]),
                home: live.home,
                token: token
            )
            #expect(recorded.status == 0, "\(recorded.output)")
            // A looping stream never ends: only the time given can have stopped it.
            #expect(recorded.output.contains("--until reached"), "\(recorded.output)")
        }
        let manifest = try live.manifest()
        #expect(manifest.recording?.endReason == .until && manifest.isComplete)
        let video = try #require(manifest.rendition(id: "video"))
        #expect(video.segments.count >= 4)
        try live.assertFilesEqualSource(manifest)
        let refused = try await Self.run(["download", "http://127.0.0.1:9/x.m3u8", "--until", "tomorrow"], home: live.home)
        #expect(refused.status != 0 && refused.output.contains("ISO 8601"), "\(refused.output)")
    }

    @Test("--duration stops a looping stream at the segment that reaches it, and the package verifies")
    func durationLimit() async throws {
        let live = try await Live.make(seconds: 8)
        defer { live.fixture.remove() }
        try await live.serving(["--window", "3", "--speed", "4", "--loop"]) { url, keyServer, token in
            let recorded = try await Self.run(live.download(url, keyServer: keyServer, ["--duration", "9s"]), home: live.home, token: token)
            #expect(recorded.status == 0, "\(recorded.output)")
            #expect(recorded.output.contains("--duration reached"), "\(recorded.output)")
        }
        let manifest = try live.manifest()
        #expect(manifest.recording?.endReason == .duration)
        let video = try #require(manifest.rendition(id: "video"))
        // 2 s segments: four make 8 s, short of 9; the fifth reaches it.
        #expect(video.segments.count == 5)
        #expect(video.duration == 10)
        let first = try #require(video.segments.first?.mediaSequence)
        #expect(video.segments.map(\.mediaSequence) == Array(first..<(first + 5)))
        try live.assertFilesEqualSource(manifest)
        let verify = try await Self.run(["verify", "live-1", "--deep"], home: live.home)
        #expect(verify.status == 0, "\(verify.output)")
    }
}
