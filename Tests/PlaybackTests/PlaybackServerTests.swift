import Foundation
import KeyDelivery
import KeyServer
import OfflinePackage
import PackageTestSupport
import Packaging
import Playback
import StowageCore
import StowageTestSupport
import Testing

/// The playback server over loopback: what it serves, what it refuses mid-session, and how a session ends.
@Suite(.timeLimit(.minutes(5)))
struct PlaybackServerTests {
    private static func package(in root: URL, assetId: String = "movie", method: ContentPackager.Method = .sampleAES) async throws -> TestPackage {
        try await TestPackages.make(clearPlaylist: TestPackages.mediaFixture("ts-clear/index.m3u8"), method: method, assetId: assetId, in: root)
    }

    @Test func playlistsHaveNoKeysAndOnlyTheSessionPathServes() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root)
        let (results, _) = try await PlaybackHarness.withSession(package) { address in
            let master = try await PlaybackHarness.get(address.multivariantURL)
            let media = try await PlaybackHarness.get(address.sessionURL.appendingPathComponent("video/index.m3u8"))
            let base = URL(string: "http://\(address.host):\(address.port)")!
            let outside = try await PlaybackHarness.get(base.appendingPathComponent("video/00000.ts"))
            let guessed = try await PlaybackHarness.get(base.appendingPathComponent("aaaaaaaaaaaaaaaaaaaaaaaaaa/master.m3u8"))
            let manifest = try await PlaybackHarness.get(address.sessionURL.appendingPathComponent("manifest.json"))
            let escape = try await PlaybackHarness.get(URL(string: address.sessionURL.absoluteString + "..%2Fmanifest.json")!)
            return [master, media, outside, guessed, manifest, escape]
        }
        let master = String(decoding: results[0].body ?? [], as: UTF8.self)
        let media = String(decoding: results[1].body ?? [], as: UTF8.self)
        #expect(results[0].status == 200 && master.contains("video/index.m3u8"))
        #expect(!master.contains("SESSION-KEY") && !master.contains("stowage-key"))
        #expect(results[1].status == 200 && media.contains("00000.ts"))
        #expect(!media.contains("EXT-X-KEY") && !media.contains("stowage-key"))
        #expect(results[2...].allSatisfy { $0.status == 404 })
    }

    @Test("the two requests the server sends itself before the player comes leave no line in either log")
    func warmUpIsNotLogged() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root)
        // The warm-up is done before the address is given (ServerWarmUp): by the first request, its lines would be there.
        let (status, _) = try await PlaybackHarness.withSession(package) { address in
            try await PlaybackHarness.get(address.sessionMultivariantURL).status
        }
        #expect(status == 200)
        let access = PlaybackHarness.logLines(package.package.accessLogURL)
        #expect(access.count == 1, "\(access)")
        #expect(access.allSatisfy { !$0.contains(" 404 ") }, "\(access)")
        #expect(PlaybackHarness.logLines(package.package.errorLogURL).isEmpty)
    }

    @Test func theURLOnAPlayersCommandLineCannotBeReplayedByAnotherProcess() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root)
        let (results, _) = try await PlaybackHarness.withSession(package) { address in
            // ffmpeg, a process of its own, plays the URL it was given on its command line.
            let played = try await PlaybackPlayer.ffmpegNull.play(address.multivariantURL, standardError: .null)
            // Another process that read that command line (/proc/PID/cmdline) tries the same URL.
            let replayed = try await PlaybackPlayer.ffmpegNull.play(address.multivariantURL, standardError: .null)
            let fetched = try await PlaybackHarness.get(address.multivariantURL)
            // What the player was served names the session token, which is on no command line.
            let master = try await PlaybackHarness.get(address.sessionMultivariantURL)
            return (played, replayed, fetched.status, master, address)
        }
        let (played, replayed, fetched, master, address) = results
        #expect(played == 0)
        #expect(replayed != 0)
        #expect(fetched == 404)
        let text = String(decoding: master.body ?? [], as: UTF8.self)
        #expect(text.contains("\(address.sessionPath)video/index.m3u8"))
        #expect(!text.contains(address.entryPath))
        #expect(!address.multivariantURL.absoluteString.contains(address.sessionPath))
        #expect(PlaybackHarness.logLines(package.package.errorLogURL).contains { $0.contains("playback_url_reused") })
    }

    @Test func segmentsAreServedClear() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        // AES-128 TS decrypts to the clear twin byte for byte.
        let package = try await Self.package(in: root, method: .aes128)
        let (served, _) = try await PlaybackHarness.withSession(package) { address in
            try await PlaybackHarness.get(address.sessionURL.appendingPathComponent("video/00001.ts"))
        }
        let clear = try Data(contentsOf: TestPackages.mediaFixture("ts-clear/seg_1.ts"))
        #expect(served.status == 200)
        #expect(served.body == Array(clear))
    }

    @Test func expiryDuringPlaybackAnswers403AndLogsWhy() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root)
        let (statuses, end) = try await PlaybackHarness.withSession(package) { address in
            let before = try await PlaybackHarness.get(address.sessionURL.appendingPathComponent("video/00000.ts"))
            package.clock.advance(by: 48 * 3_600 + 1)
            let after = try await PlaybackHarness.get(address.sessionURL.appendingPathComponent("video/00001.ts"))
            let master = try await PlaybackHarness.get(address.multivariantURL)
            return (before.status, after.status, master.status, String(decoding: after.body ?? [], as: UTF8.self))
        }
        #expect(statuses.0 == 200)
        #expect(statuses.1 == 403 && statuses.2 == 403)
        #expect(statuses.3.contains("playback_window_expired"))
        #expect(end.reason == .stopped)
        let errors = PlaybackHarness.logLines(package.package.errorLogURL)
        #expect(errors.contains { $0.contains("/video/00001.ts") && $0.contains("playback_window_expired") })
        #expect(PlaybackHarness.logLines(package.package.accessLogURL).contains { $0.contains("/video/00001.ts") && $0.contains(" 403 ") })
    }

    @Test func aSegmentModifiedAfterAuthorizationIsCutShortAndLogged() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root, method: .aes128)
        // Small chunks: most of the file is sent before the checksum can be known.
        let (results, _) = try await PlaybackHarness.withSession(package, configuration: .init(chunkSize: 4096)) { address in
            try package.damage("video/00002.ts", at: 100)
            let damaged = try? await PlaybackHarness.get(address.sessionURL.appendingPathComponent("video/00002.ts"))
            let intact = try await PlaybackHarness.get(address.sessionURL.appendingPathComponent("video/00001.ts"))
            return (damaged, intact)
        }
        // The damaged file never arrives whole; the others still play.
        #expect(results.0?.body == nil)
        #expect(results.1.status == 200 && results.1.body != nil)
        let errors = PlaybackHarness.logLines(package.package.errorLogURL)
        #expect(errors.contains { $0.contains("/video/00002.ts") && $0.contains("segment_checksum_mismatch") })
    }

    @Test func twoSessionsAtOnce() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let clear = TestPackages.mediaFixture("ts-clear/index.m3u8")
        let first = try await Self.package(in: root, assetId: "first")
        let second = try await TestPackages.make(
            clearPlaylist: TestPackages.mediaFixture("fmp4-clear/index.m3u8"),
            method: .sampleAES,
            assetId: "second",
            in: root
        )
        let expectedFirst = try await DecodedFrames.of(clear, map: "0:v:0")
        let expectedSecond = try await DecodedFrames.of(TestPackages.mediaFixture("fmp4-clear/index.m3u8"), map: "0:v:0")
        // Both sessions of `first` (same package, two servers) and one of `second`, all playing at the same time.
        let results = try await PlaybackHarness.withSession(first) { a in
            try await PlaybackHarness.withSession(first) { b in
                try await PlaybackHarness.withSession(second) { c in
                    #expect(a.sessionPath != b.sessionPath)
                    async let one = DecodedFrames.of(a.multivariantURL, map: "0:v:0")
                    async let two = DecodedFrames.of(b.multivariantURL, map: "0:v:0")
                    async let three = DecodedFrames.of(c.multivariantURL, map: "0:v:0")
                    return try await [one, two, three]
                }.0
            }.0
        }.0
        #expect(results[0] == expectedFirst)
        #expect(results[1] == expectedFirst)
        #expect(results[2] == expectedSecond)
    }

    @Test func deletingThePackageEndsTheSession() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root)
        let gate = PlaybackHarness.gate(package)
        let authorization = try gate.authorize(assetId: "movie")
        let server = try PlaybackServer(authorization: authorization, gate: gate)
        let started = try await ListeningServer.start { onListening in try await server.run(onListening: onListening) }
        let task = started.task
        let address = try started.listeningAddress()
        #expect(try await PlaybackHarness.get(address.multivariantURL).status == 200)

        // `stowage delete` removes the folder while the player plays.
        try FileManager.default.removeItem(at: package.package.url)
        let after = try? await PlaybackHarness.get(address.sessionURL.appendingPathComponent("video/00001.ts"))
        #expect(after == nil || after?.status == 410)
        // The session ends by itself (no cancellation), with the reason.
        let end = try await task.value
        #expect(end.reason == .packageDeleted)
        #expect(end.error?.code == "package_deleted")
    }

    @Test func headlessFFmpegPlaysUntilTheLeaseEnds() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root)
        let statuses = try await PlaybackHarness.withSession(package) { address in
            let playing = try await PlaybackPlayer.ffmpegNull.play(address.multivariantURL, standardError: .null)
            package.clock.advance(by: 48 * 3_600)
            let expired = try await PlaybackPlayer.ffmpegNull.play(address.sessionMultivariantURL, standardError: .null)
            return (playing, expired)
        }.0
        #expect(statuses.0 == 0)
        #expect(statuses.1 != 0)
        #expect(PlaybackHarness.logLines(package.package.errorLogURL).contains { $0.contains("playback_window_expired") })
    }

    @Test func theSessionEndsWhenThePlayerExits() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root, method: .aes128)
        let gate = PlaybackHarness.gate(package)
        let server = try PlaybackServer(authorization: try gate.authorize(assetId: "movie"), gate: gate)
        let end = try await server.run(player: .ffmpegNull, playerStandardError: .null)
        #expect(end.reason == .playerExited)
        #expect(end.playerExitStatus == 0)
        // The player fetched every segment.
        let access = PlaybackHarness.logLines(package.package.accessLogURL)
        for index in 0..<3 {
            #expect(access.contains { $0.contains("/video/0000\(index).ts") && ($0.contains(" 200 ") || $0.contains(" 206 ")) })
        }
    }
}
