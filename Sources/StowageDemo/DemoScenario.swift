public import AssetDownload
public import Foundation
import KeyDelivery
import OfflinePackage
public import Playback
import StowageCore
import StowageLibrary

/// What the demo tells its audience, step by step; `stowage demo` prints it.
public enum DemoEvent: Sendable {
    /// A numbered step begins.
    case step(Int, String)
    /// What came of it.
    case detail(String)
    /// The download's own events (progress, renditions, keys), for a live display.
    case download(DownloadEvent)
}

/// The main job end to end, as a scenario of the library: an embedded key server and origin, the fixture packaged
/// with SAMPLE-AES, a download with two audio languages and subtitles, a deep verification, playback through the gate
/// into a player, a lease renewal, a simulated clock moved past the playback window to show the refusal, and the
/// asset deleted with its lease released. The client side runs entirely through ``OfflineLibrary``.
///
/// ```swift
/// try await DemoScenario(fixture: fixture, work: work).run { event in print(event) }
/// ```
public struct DemoScenario: Sendable {
    /// The clear multivariant playlist to package.
    public var fixture: URL
    /// A folder for the servers' files and the library's data directory.
    public var work: URL
    /// The origin's network profile.
    public var profile: String
    /// The player for the playback step; nil plays nothing (the URL is shown and served a moment).
    public var player: PlaybackPlayer?

    public init(fixture: URL, work: URL, profile: String = "wifi", player: PlaybackPlayer? = .ffmpegNull) {
        self.fixture = fixture
        self.work = work
        self.profile = profile
        self.player = player
    }

    /// Runs every step, telling `report` what happens.
    ///
    /// - Throws: ``DemoError`` when a step does not turn out as it should; the library's errors.
    public func run(_ report: (DemoEvent) -> Void) async throws {
        report(
            .step(
                1,
                "Starting an embedded key server and packaging \(fixture.deletingLastPathComponent().lastPathComponent)/ with SAMPLE-AES and fresh skd keys"
            )
        )
        // The device's clock is real time until step 7 moves it; the key server reads the same clock, so the two agree
        // on the time as a real device and server would (a request's clientTime must be near the server's).
        let clock = TestClock(now: SystemClock().now)
        let environment = try await DemoEnvironment.start(
            fixture: fixture,
            in: work,
            profile: profile,
            clock: { clock.now }
        )
        do {
            try await run(in: environment, clock: clock, report)
            await environment.stop()
        } catch {
            await environment.stop()
            throw error
        }
    }

    private func run(in environment: DemoEnvironment, clock: TestClock, _ report: (DemoEvent) -> Void) async throws {
        report(.detail("key server at \(environment.keyServerURL.absoluteString) (policy: 30 days to keep, 48 hours to watch once started)"))
        for rendition in environment.renditions {
            report(
                .detail(
                    "\(rendition.playlist): \(rendition.container), \(rendition.segments) segments, \(rendition.isEncrypted ? "encrypted" : "clear")"
                )
            )
        }
        report(.detail("content key \(environment.keyIDs.joined(separator: ", ")) registered with the key server; the origin never sees it"))
        report(.step(2, "Serving the packaged asset from an origin on 127.0.0.1 shaped like '\(profile)'"))
        report(.detail(environment.masterURL.absoluteString))

        // The device: its own data directory.
        let library = try OfflineLibrary(dataDirectory: DataDirectory(url: work.appendingPathComponent("home", isDirectory: true)), clock: clock)
        do {
            try await run(library, clock: clock, environment: environment, report)
            await library.close()
        } catch {
            await library.close()
            throw error
        }
    }

    private func run(
        _ library: OfflineLibrary,
        clock: TestClock,
        environment: DemoEnvironment,
        _ report: (DemoEvent) -> Void
    ) async throws {
        let assetId = environment.assetId
        report(.step(3, "Downloading: highest variant, audio en+fr, all subtitles (keys first, then segments)"))
        // No --key-server: the playlist advertises one on its own loopback host, which is trusted (docs/SECURITY.md).
        let task = try await library.download(
            DownloadRequest(
                url: environment.masterURL.absoluteString,
                assetId: assetId,
                title: "Stowage demo",
                selection: MediaSelectionOptions(audio: .languages(["en", "fr"]), subtitles: .all),
                token: try await environment.token()
            )
        )
        for await event in task.events { report(.download(event)) }
        let manifest = try await task.result()

        report(.step(4, "Verifying the package before going offline (deep: every file hashed and trial-decrypted)"))
        let verification = try await library.verify(assetId: assetId, options: .init(deep: true, duration: 48 * 3600))
        for rendition in verification.renditions {
            report(
                .detail(
                    "\(rendition.id): \(rendition.files) files, \(rendition.filesDecrypted) decrypted, \(rendition.isPlayable ? "ok" : "PROBLEM")"
                )
            )
        }
        guard verification.isPlayable else {
            throw DemoError(
                .demoVerificationFailed,
                "verification found problems: " + verification.problems.map(\.message).joined(separator: "; ")
            )
        }
        report(.detail("playable offline for at least 48 h: yes (\(String(format: "%.1f MB", Double(manifest.knownBytes) / 1e6)))"))

        report(.step(5, "Playing through the gate (first play starts the 48 h playback window)"))
        // What is stored only: the demo shows offline playback (its origin still runs, which would add online renditions).
        let playback = try await library.play(assetId: assetId, player: player, online: false)
        report(.detail("serving \(playback.url.absoluteString)\(player == nil ? " (no player)" : "")"))
        if let player {
            let end = try await playback.ended()
            if let error = end.error { throw error }
            guard end.playerExitStatus == 0 else {
                throw DemoError(.demoPlayerFailed, "\(player.executable) exited with status \(end.playerExitStatus ?? -1)")
            }
            report(.detail("\(player.executable) decoded every stream of the decrypted package"))
        } else {
            try await Task.sleep(for: .seconds(2))
            await playback.stop()
        }
        guard let lease = try library.leases().first(where: { $0.assetId == assetId }) else {
            throw DemoError(.demoNoLease, "no lease of \(assetId) was stored")
        }
        if let left = lease.playbackTimeLeft { report(.detail("lease \(lease.leaseId): playback window ends in \(HumanTime.duration(left))")) }

        report(.step(6, "Renewing the lease with the key server"))
        let renewed = try await library.renewLeases(assetId: assetId, token: try await environment.token())
        if let terms = renewed.first?.terms {
            report(.detail("storage window now ends \(HumanTime.date(terms.storageExpiresAt)); the playback window is unchanged"))
        }

        report(.step(7, "Moving a simulated clock 49 hours ahead, past the playback window"))
        clock.advance(by: 49 * 3600)
        do {
            let refused = try await library.play(assetId: assetId, player: nil)
            await refused.stop()
            throw DemoError(.demoGateOpen, "the gate allowed playback after the playback window")
        } catch let refusal as PlaybackError {
            report(.detail("refused: \(refusal.message) [\(refusal.code)]"))
        }

        report(.step(8, "Deleting the asset: files removed, keys erased, release sent to the key server"))
        let deletion = try library.delete(assetId: assetId).report
        report(
            .detail(
                "\(deletion.filesRemoved) files removed, \(String(format: "%.1f MB", Double(deletion.bytesFreed) / 1e6)) freed, "
                    + "\(deletion.leasesReturned.count) lease(s) queued for release"
            )
        )
        let sync = try await library.syncLeases()
        report(
            .detail("released on the key server: \(sync.released.count) lease(s)\(sync.failed.isEmpty ? "" : ", still queued: \(sync.failed.count)")")
        )
    }
}
