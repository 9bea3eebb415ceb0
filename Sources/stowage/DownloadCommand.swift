import ArgumentParser
import AssetDownload
import Foundation
import KeyDelivery
import OfflinePackage
import StowageCore
import StowageLibrary
import StowageService
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// Options shared by the commands that run a download.
struct DownloadRunOptions: ParsableArguments {
    @Flag(help: "Print events as JSON lines instead of the live display; an error as the last line, {\"error\": ...}.")
    var json = false

    @Option(help: "Disk space to leave free (e.g. 500M, 2G): the download pauses with insufficient_storage rather than go below it.")
    var keepFree = "32M"

    @Option(help: "Cap the download rate at this many bytes per second (e.g. 1M, 500K); unlimited when left out.")
    var limitRate: String?

    @OptionGroup var tls: TLSOptions

    @OptionGroup var proxy: ProxyOptions

    /// The download session's configuration these options give.
    func configuration() throws -> DownloadSession.Configuration {
        var configuration = DownloadSession.Configuration(trust: tls.trust, proxy: try proxy.settings())
        configuration.storageMargin = try ByteQuantity.parse(keepFree, option: "--keep-free")
        if let limitRate {
            let rate = try ByteQuantity.parse(limitRate, option: "--limit-rate")
            configuration.bandwidth = TokenBucket(bytesPerSecond: Int(rate), capacity: Int(max(64 << 10, rate / 4)))
        }
        return configuration
    }
}

/// `stowage download URL ...`
struct DownloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: "Download an encrypted HLS asset into an offline package, with its keys.",
        discussion: """
            Takes one variant (the highest by default) and the audio and subtitle renditions asked for (without
            --audio and --subtitles, as AVFoundation chooses: audio in your language from LANGUAGE, LC_ALL,
            LC_MESSAGES or LANG, else the playlist's default; subtitles in your language when the audio is not in it;
            forced subtitles in the audio's language; each choice is printed with why); obtains the
            keys (skd keys from the key server under a persistent lease, identity keys over HTTP) before any segment;
            streams segments into $STOWAGE_HOME/packages/ASSET_ID/ still encrypted, several at a time, with retries.
            Ctrl-C pauses; `stowage resume ASSET_ID` carries on without fetching completed segments again.
            --background hands the download to the running download service (`stowage service run`) and returns at
            once with the asset ID; --attach ASSET_ID shows the progress of a download the service runs (Ctrl-C
            detaches, the download goes on).
            The entitlement token goes only to a key server you trust: --key-server, --trust-key-server, one added
            with `stowage keys trust`, or one the playlist advertises on its own host over https (http on loopback).
            --header values go only to the playlist's host and the hosts named with --header-host; --user-agent and
            --referer go with every request; each cookie of --cookies FILE (Netscape format) only to the hosts its
            line names. Requests go through --proxy, else HTTPS_PROXY / HTTP_PROXY / ALL_PROXY, except to the hosts
            NO_PROXY names.
            A playlist without EXT-X-ENDLIST (live, or EVENT) is recorded: reloaded at the cadence RFC 8216bis
            prescribes (at once with blocking reload when the server offers it), every rendition in step, new keys
            obtained as they appear, until EXT-X-ENDLIST, --duration of recorded media, --until, or Ctrl-C (which
            ends the recording and keeps it; `stowage resume` after a crash goes on from the live edge). Segments
            that left the playlist before they were fetched are marked EXT-X-GAP, and the command then exits with
            status 3 saying how much is missing.
            --play starts playback (`stowage play`) as soon as the keys are stored and a first file has landed: files
            not there yet are waited for, and the download goes on; with --player the command ends when both have.
            Example:
              stowage download http://127.0.0.1:8080/master.m3u8 --asset-id demo-1 --audio en,fr --subtitles all \\
                --key-server http://127.0.0.1:8443 --token-file ~/.config/stowage/token
              stowage keyserver token --sub alice --asset show --data-dir /srv/keys | \\
                stowage download --background https://cdn.example/show/master.m3u8 --token - --priority 5
              stowage download --attach demo-1
              stowage download http://127.0.0.1:8080/master.m3u8 --asset-id demo-1 --play --player mpv
              stowage download http://127.0.0.1:8080/master.m3u8 --asset-id match-1 --duration 2h
              stowage download https://cdn.example/show/master.m3u8 --cookies cookies.txt --referer https://site.example/show \\
                --user-agent 'Mozilla/5.0' --proxy http://127.0.0.1:3128
            """
    )

    @Argument(help: "The multivariant (or media) playlist URL (or a local path).")
    var url: String?

    @Flag(help: "Hand the download to the running download service and return at once.")
    var background = false

    @Flag(help: "Start playing as soon as the keys are stored and a first file has landed, while the download goes on.")
    var play = false

    @Option(help: "With --play: ffplay, mpv, vlc, ffmpeg-null, or none (print the URL and serve until Ctrl-C).")
    var player = "none"

    @Option(help: "Show the progress of a download the service runs, until it ends (Ctrl-C detaches).")
    var attach: String?

    @Option(help: "With --background: the place in the service's queue (higher runs first).")
    var priority = 0

    @Option(help: "Take the lowest variant with at least this many bits per second.")
    var minBitrate: Int?

    @Option(help: "Take no variant above this many bits per second.")
    var maxBitrate: Int?

    @Option(
        help: """
            Audio renditions: comma-separated languages, 'all', 'default' (DEFAULT=YES) or 'none'. Without it: your \
            language (LANGUAGE, LC_ALL, LC_MESSAGES, LANG), else the playlist's default.
            """
    )
    var audio: String?

    @Option(
        help: """
            Subtitle renditions: comma-separated languages, 'all', 'default' (DEFAULT=YES) or 'none'. Without it: your \
            language when the audio is not in it, and forced subtitles in the audio's language.
            """
    )
    var subtitles: String?

    @Option(help: "Segments downloaded at once.")
    var concurrency = 4

    @OptionGroup var header: HeaderOptions

    @Option(name: .customLong("header-host"), help: "Another host the --header values may be sent to (repeatable).")
    var headerHosts: [String] = []

    @Option(help: "The key server URL (default: the one the playlist advertises, if it is on the playlist's host over https).")
    var keyServer: String?

    @Option(
        name: .customLong("trust-key-server"),
        help: "Trust this key server when the playlist advertises it on another host (repeatable)."
    )
    var trustedKeyServers: [String] = []

    @OptionGroup var tokenInput: TokenOptions

    @Option(help: "The asset ID (default: the key server's asset named by the playlist's skd keys, else derived from the URL).")
    var assetId: String?

    @Option(help: "A title for `stowage list`.")
    var title: String?

    @Option(help: "A live stream: stop recording after this much media (e.g. 2h, 90m, 30s).")
    var duration: String?

    @Option(help: "A live stream: stop recording at this time (ISO 8601, e.g. 2026-11-26T21:00:00Z).")
    var until: String?

    @OptionGroup var browser: BrowserOptions

    @OptionGroup var output: DownloadRunOptions

    func validate() throws {
        guard (url == nil) != (attach == nil) else { throw ValidationError("give a playlist URL, or --attach ASSET_ID, not both") }
        guard attach == nil || !background else { throw ValidationError("--attach and --background do not go together") }
        guard !play || (!background && attach == nil) else {
            throw ValidationError("--play plays a download run here, not with --background or --attach")
        }
        guard player == "none" || PlaybackPlayer(rawValue: player) != nil else {
            throw ValidationError("--player must be ffplay, mpv, vlc, ffmpeg-null or none")
        }
        guard (1...32).contains(concurrency) else { throw ValidationError("--concurrency must be 1...32") }
        _ = try recordingLimits()
        guard output.proxy.proxy == nil || !background else {
            throw ValidationError(
                "--proxy applies to a download run here; the download service uses its own (`stowage service run --proxy`, or HTTPS_PROXY)"
            )
        }
    }

    /// `--duration` and `--until`.
    func recordingLimits() throws -> RecordingLimits {
        var limits = RecordingLimits()
        if let duration {
            let seconds = try Library.parseDuration(duration)
            guard seconds > 0 else { throw ValidationError("--duration must be longer than 0 s") }
            limits.maximumDuration = Double(seconds)
        }
        if let until {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime]
            let fractional = ISO8601DateFormatter()
            fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            guard let date = formatter.date(from: until) ?? fractional.date(from: until) else {
                throw ValidationError("--until takes an ISO 8601 time with its zone, e.g. 2026-11-26T21:00:00Z; got '\(until)'")
            }
            limits.until = Int64(date.timeIntervalSince1970)
        }
        return limits
    }

    func run() async throws {
        if let attach { await ServiceDriver.attach(assetId: attach, json: output.json) }
        let variant: MediaSelectionOptions.Variant =
            minBitrate == nil && maxBitrate == nil ? .highest : .bitrate(minimum: minBitrate, maximum: maxBitrate)
        let pairs = header.resolve(json: output.json)
        let browserHeaders: BrowserHeaders
        do {
            browserHeaders = try browser.headers()
        } catch {
            CommandOutput.fail(error, json: output.json)
        }
        let languages = MediaSelectionOptions.preferredLanguages(environment: ProcessInfo.processInfo.environment)
        let request = DownloadRequest(
            url: url ?? "",
            assetId: assetId ?? "",
            title: title,
            selection: MediaSelectionOptions(
                variant: variant,
                audio: audio.map { .init(argument: $0) } ?? .automatic(languages: languages),
                subtitles: subtitles.map { .init(argument: $0) } ?? .automatic(languages: languages)
            ),
            headers: pairs,
            headerHosts: headerHosts,
            browser: browserHeaders,
            keyServerURL: keyServer,
            trustedKeyServers: trustedKeyServers,
            token: tokenInput.resolve(json: output.json),
            concurrency: concurrency,
            recording: (try? recordingLimits()) ?? RecordingLimits()
        )
        if background {
            await ServiceDriver.submit(request, priority: priority, json: output.json)
            return
        }
        let playing = play ? DownloadDriver.Play(player: PlaybackPlayer(rawValue: player)) : nil
        await DownloadDriver.run(output, play: playing) { library in try await library.download(request) }
    }
}

/// `stowage resume [ASSET]`
struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Resume a paused, failed or interrupted download (all pending ones when no asset is named).",
        discussion: """
            Completed segments are not fetched again; a partly written segment continues with an HTTP Range request.
            While the download service runs, the download goes back to its queue instead (see its progress with
            `stowage download --attach ASSET_ID`).
            Example:
              stowage resume demo-1
            """
    )

    @Argument(help: "The asset ID; omitted: every download not completed.")
    var assetId: String?

    @OptionGroup var output: DownloadRunOptions

    func run() async throws {
        if let service = await ServiceClient.connect() {
            await ServiceDriver.resume(assetId, service: service, json: output.json)
            return
        }
        if let assetId {
            await DownloadDriver.run(output) { library in try library.resume(assetId: assetId) }
            return
        }
        let pending: [String]
        do {
            pending = try await Library.with { try $0.pendingDownloads().map(\.assetId) }
        } catch {
            CommandOutput.fail(error, json: output.json)
        }
        if pending.isEmpty {
            print("nothing to resume")
            return
        }
        for asset in pending {
            await DownloadDriver.run(output, exitOnEnd: asset == pending.last) { library in try library.resume(assetId: asset) }
        }
    }
}

/// `stowage stop ASSET`
struct StopCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop",
        abstract: "End a live recording and keep it: its playlists stop being reloaded, what they list is fetched.",
        discussion: """
            The package then completes like any download (EXT-X-ENDLIST added); a segment gone from the server
            meanwhile becomes a marked gap. While the download service runs, ends the recording there (running,
            queued, paused or waiting; follow it with `stowage download --attach ASSET_ID`). Without the service,
            finishes a paused or interrupted recording here, in the foreground. A recording running in a terminal is
            ended with Ctrl-C there (this says so: asset_busy).
            Example:
              stowage stop match-1
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @OptionGroup var output: DownloadRunOptions

    func run() async throws {
        let assetId = self.assetId
        if let service = await ServiceClient.connect() {
            do {
                let download: ServiceDownload
                do {
                    download = try await service.stopRecording(assetId: assetId)
                    await service.close()
                } catch {
                    await service.close()
                    throw error
                }
                if output.json {
                    print(Library.json(download))
                } else {
                    print("\(ServiceText.line(download))\nthe recording of \(assetId) ends: progress: stowage download --attach \(assetId)")
                }
            } catch {
                CommandOutput.fail(error, json: output.json)
            }
            return
        }
        await DownloadDriver.run(output) { library in
            guard try library.downloadRecord(assetId: assetId) != nil else { throw DownloadError.notFound(assetId: assetId) }
            guard try library.isRecordingLive(assetId: assetId) else { throw library.notRecording(assetId: assetId) }
            return try library.resume(assetId: assetId, endingRecording: true)
        }
    }
}

/// `stowage cancel ASSET`
struct CancelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a download that has not completed: its partial files and state are removed.",
        discussion: """
            Keys already obtained are erased and their release queued (sent with `stowage keys sync`). Completed
            packages are removed with `stowage delete`.
            Example:
              stowage cancel demo-1
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @Flag(help: "Print the result as JSON.")
    var json = false

    func run() async throws {
        do {
            try await ServiceDriver.either { service in
                try await service.cancel(assetId: assetId)
            } local: { library in
                try library.cancel(assetId: assetId)
            }
            print(json ? #"{"cancelled":"\#(assetId)"}"# : "cancelled \(assetId): partial files removed")
        } catch {
            CommandOutput.fail(error, json: json)
        }
    }
}

/// `stowage add-media ASSET --audio ... --subtitles ...`
struct AddMediaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-media",
        abstract: "Add audio or subtitle renditions to a downloaded (or downloading) asset.",
        discussion: """
            The asset's multivariant playlist is loaded again from its source; renditions already held are skipped.
            Example:
              stowage add-media demo-1 --audio de --subtitles fr
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @Option(help: "Audio renditions to add: comma-separated languages, 'all', 'default' or 'none'.")
    var audio = "none"

    @Option(help: "Subtitle renditions to add: comma-separated languages, 'all', 'default' or 'none'.")
    var subtitles = "none"

    @OptionGroup var output: DownloadRunOptions

    func run() async throws {
        let selection = MediaSelectionOptions(variant: .highest, audio: .init(argument: audio), subtitles: .init(argument: subtitles))
        await DownloadDriver.run(output) { library in try library.addMedia(assetId: assetId, selection: selection) }
    }
}

/// Runs one download task in the foreground: live display or JSON lines, Ctrl-C pauses, exit status from the result.
enum DownloadDriver {
    /// `download --play`: a playback session started once the keys are stored and a first file has landed.
    struct Play {
        /// The player started on it; nil serves the URL until Ctrl-C.
        var player: PlaybackPlayer?
    }

    static func run(
        _ options: DownloadRunOptions,
        exitOnEnd: Bool = true,
        play: Play? = nil,
        _ start: (OfflineLibrary) async throws -> DownloadTask
    ) async {
        let json = options.json
        // Trapped before the task starts: a Ctrl-C while it starts is kept for the task (it pauses it), never the
        // default action that ends the process with the task half begun.
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        let library: OfflineLibrary
        let task: DownloadTask
        do {
            library = try OfflineLibrary(downloads: try options.configuration())
            task = try await start(library)
        } catch {
            CommandOutput.fail(error, json: json)
        }
        // Ctrl-C or SIGTERM pauses the task (its files stay for `resume`), or ends a live recording and keeps it; a
        // second one pauses the recording too, for a user who will not wait for its last files (`interrupt()` does
        // both, in that order).
        let watcher = Task {
            for await _ in signals { task.interrupt() }
        }
        let display = ProgressDisplay(json: json, assetId: task.assetId)
        var playback: PlaybackHandle?
        var playFailure: (any Error)?
        for await event in task.events {
            // The error that ends the task is reported once, below, in the one error shape.
            switch event {
            case .failed, .paused(.some): continue
            default: display.show(event)
            }
            if let play, playback == nil, playFailure == nil, case .progress(let progress) = event,
                progress.renditions.contains(where: { $0.filesDone > 0 })
            {
                do {
                    // The selection being downloaded, not the source's other renditions (they would be fetched twice).
                    let handle = try await library.play(assetId: task.assetId, player: play.player, online: false)
                    playback = handle
                    let url = handle.url.absoluteString
                    Terminal.standardOutput((json ? Library.line(["event": "playing", "url": url]) : "playing \(url)") + "\n")
                } catch let error as any StowageError where error.code == .keysPending {
                    // A live recording fetches its first segments while it obtains their keys: try again at the next
                    // progress.
                    continue
                } catch {
                    // The download goes on; the refusal is said once, in the one shape, but does not end the command.
                    playFailure = error
                    CommandOutput.warn(error, event: "playback_refused", json: json)
                }
            }
        }
        watcher.cancel()
        var failure: (any Error)?
        var interrupted = false
        var finished: PackageManifest?
        do {
            finished = try await task.result()
        } catch is CancellationError {
            failure = nil
            interrupted = true
        } catch {
            failure = error
        }
        if let playback {
            if failure != nil || interrupted {
                await playback.stop()
            } else {
                // The download is over: the session goes on until the player exits, or Ctrl-C.
                try? await CommandOutput.runUntilSignalled([PlaybackService(playback)])
                await playback.stop()
            }
        }
        await library.close()
        if let failure { CommandOutput.fail(failure, json: json) }
        if let recording = finished?.recording, !recording.gaps.isEmpty {
            // Complete, but not whole: said, and exit status 3, so a script never takes a recording with holes for a
            // whole one.
            let renditions = Set(recording.gaps.map(\.renditionId)).count
            let message =
                "the recording of \(task.assetId) is complete but misses about "
                + "\(HumanTime.duration(Int64(recording.missingSeconds.rounded()))) of the broadcast, in \(recording.gaps.count) gap(s) "
                + "over \(renditions) rendition(s): those segments left the live playlist before they were fetched "
                + "(`stowage info \(task.assetId)` lists them)"
            if json {
                Terminal.standardOutput(Library.line(["event": "recording_gaps", "message": message]) + "\n")
            } else {
                Terminal.standardError("warning: \(message) [recording_gap]\n")
            }
            exit(3)
        }
        if exitOnEnd { exit(0) }
    }
}

/// Renders download updates: a redrawn block on a terminal, plain lines otherwise, JSON lines with --json. The same
/// for a download running here and one attached to in the service.
final class ProgressDisplay {
    let json: Bool
    let assetId: String
    let isTerminal = isatty(STDERR_FILENO) == 1
    private var drawnLines = 0
    private var lastDraw = Date.distantPast
    private var lastPlainPercent = -10

    init(json: Bool, assetId: String) {
        self.json = json
        self.assetId = assetId
    }

    func show(_ event: DownloadEvent) { show(DownloadUpdate(event, assetId: assetId)) }

    func show(_ update: DownloadUpdate) {
        if json {
            Terminal.standardOutput(update.jsonLine() + "\n")
            return
        }
        switch update.event {
        case .willDownload: say("downloading \(assetId) to \(update.location ?? "?")")
        case .resolvedMediaSelections:
            for selection in update.mediaSelections ?? [] {
                let detail = [selection.language, selection.resolution, selection.bandwidth.map { "\($0 / 1000) kbit/s" }].compactMap { $0 }
                let why = selection.reason.map { ": \($0)" } ?? ""
                say("  \(selection.id): \(selection.kind) \(selection.name) \(detail.joined(separator: ", ")), \(selection.files) files\(why)")
            }
        case .playlistWarnings:
            let warnings = update.warnings ?? []
            say("  playlists: \(warnings.count) deviation(s) from RFC 8216bis, read as players read them:")
            for warning in warnings.prefix(20) { say("    warning: \(warning)") }
            if warnings.count > 20 { say("    ... and \(warnings.count - 20) more in the package's manifest.json") }
        case .keysAcquired: say("keys: \(update.keys ?? 0) obtained and stored\(update.leaseId.map { " (lease \($0))" } ?? "")")
        case .progress: draw(update)
        case .mediaSelectionCompleted: if !isTerminal { say("  \(update.id ?? "?") complete") }
        case .paused:
            say(update.reason.map { "paused: \($0.message) [\($0.code)]" } ?? "paused; run `stowage resume \(assetId)` to continue")
        case .resumed: say("resuming")
        case .recordingGap:
            if let gap = update.gap {
                let span = gap.startsAt.map { start in " (\(HumanTime.instant(start)) to \(HumanTime.instant(gap.endsAt ?? start)))" } ?? ""
                say(
                    "gap: \(gap.segments) segment(s) of \(gap.renditionId), about \(HumanTime.duration(Int64(gap.seconds.rounded()))), "
                        + "left the live playlist before they were fetched\(span); marked EXT-X-GAP"
                )
            }
        case .recordingEnded:
            if let recording = update.recording {
                let why: String
                switch recording.endReason {
                case .endList: why = "the stream ended (EXT-X-ENDLIST)"
                case .duration: why = "--duration reached"
                case .until: why = "--until reached"
                case .stopped: why = "stopped"
                case nil: why = "ended"
                }
                say("recording ended: \(why); fetching the last segments")
            }
        case .queued: say("queued in the service\(update.position.map { $0 > 0 ? " behind \($0) download(s)" : "" } ?? "")")
        case .waiting: say("waiting: \(update.reason?.message ?? "for a condition to pass") [\(update.reason?.code ?? "waiting")]")
        case .finished:
            let megabytes = String(format: "%.1f", Double(update.bytes ?? 0) / 1e6)
            say("complete: \(assetId), \(update.mediaSelectionCount ?? 0) media selections, \(megabytes) MB")
        case .failed:
            Terminal.standardError(Terminal.errorLine(update.error?.message ?? "failed", code: update.error?.code ?? "failed"))
        }
    }

    private func say(_ line: String) {
        if isTerminal, drawnLines > 0 {
            FileHandle.standardError.write(Data(String(repeating: "\u{1b}[1A\u{1b}[2K", count: drawnLines).utf8))
            drawnLines = 0
        }
        Terminal.standardError(line + "\n")
    }

    private func draw(_ progress: DownloadUpdate) {
        let fraction = progress.fraction ?? 0
        let percent = Int(fraction * 100)
        let rate = String(format: "%.1f MB/s", Double(progress.bytesPerSecond ?? 0) / 1e6)
        let eta = progress.secondsLeft.map { String(format: "ETA %d:%02d", Int($0) / 60, Int($0) % 60) } ?? "ETA -"
        guard isTerminal else {
            if percent >= lastPlainPercent + 10 || percent == 100 {
                lastPlainPercent = percent
                Terminal.standardError("  \(percent)% \(rate)\n")
            }
            return
        }
        guard Date().timeIntervalSince(lastDraw) > 0.1 || fraction >= 1 else { return }
        lastDraw = Date()
        var lines = (progress.renditions ?? []).map { r in
            String(
                format: "  %-16@ %3d%%  %3d/%-3d files  %.1f/%.1f s",
                r.id as NSString,
                r.filesTotal == 0 ? 100 : r.filesDone * 100 / r.filesTotal,
                r.filesDone,
                r.filesTotal,
                r.loadedSeconds,
                r.durationSeconds
            )
        }
        lines.append("  overall \(percent)%  \(rate)  \(eta)")
        var text = String(repeating: "\u{1b}[1A\u{1b}[2K", count: drawnLines)
        text += Terminal.safe(lines.joined(separator: "\n")) + "\n"
        drawnLines = lines.count
        FileHandle.standardError.write(Data(text.utf8))
    }
}
