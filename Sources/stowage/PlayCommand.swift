import ArgumentParser
import Foundation
import Playback
import StowageCore
import StowageLibrary

/// `stowage play ASSET [--player ffplay|mpv|vlc|ffmpeg-null|none] [--port N]`
struct PlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play an offline asset through the playback gate: served decrypted on 127.0.0.1 while the lease allows.",
        discussion: """
            The gate checks the package (complete, files present), the lease (storage and playback windows, clock not
            set back) and the keys, and records the first play, which starts the playback window. The package is
            then served at an unguessable path on 127.0.0.1; every request checks the lease again. Prints the
            multivariant playlist URL; with --player starts that player and stops when it exits, else runs until
            Ctrl-C. Logs: packages/ASSET/logs/access.log and error.log.
            When the source is reachable, the served playlist also offers the variants and renditions the package
            does not hold (IDs online-..., listed in EXT-X-SESSION-DATA com.stowage.online): their segments are
            fetched from the source and decrypted with the stored lease's keys, or a streaming lease kept in memory.
            An asset still downloading, paused or failed part-way plays too: a file not there yet waits for the
            running download (then 503), or with none running is fetched from the source into the package as the
            download would have (404 segment_not_downloaded when the source cannot provide it).
            --offline offers only what is stored and fetches nothing.
            Example:
              stowage play demo-1 --player ffplay
              stowage play demo-1 --player none --port 8090
              stowage play demo-1 --offline --player mpv
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @Option(help: "ffplay, mpv, vlc, ffmpeg-null (decode to nowhere) or none (print the URL and serve until Ctrl-C).")
    var player = "none"

    @OptionGroup var tls: TLSOptions

    @OptionGroup var proxy: ProxyOptions

    @Option(help: "The port on 127.0.0.1; 0 picks a free one.")
    var port = 0

    @Flag(help: "Hash every file against the manifest before serving.")
    var checksums = false

    @Flag(help: "Offer only the renditions stored offline and fetch nothing, even when the source is reachable.")
    var offline = false

    @Flag(
        help:
            "Print JSON lines: {\"event\":\"playing\",\"url\":...,\"online\":[IDs]}, one {\"event\":\"served\",...} per request (bytes, seconds, firstByteSeconds, waitedSeconds), then {\"event\":\"stopped\",...}; errors as JSON."
    )
    var json = false

    func validate() throws {
        guard player == "none" || PlaybackPlayer(rawValue: player) != nil else {
            throw ValidationError("--player must be ffplay, mpv, vlc, ffmpeg-null or none")
        }
    }

    /// Prints one `served` event (`--json`).
    @Sendable static func printServed(_ request: PlaybackRequestEvent) {
        Terminal.standardOutput(Library.line(ServedLine(request: request)) + "\n")
    }

    func run() async throws {
        // Every segment streams through chunk buffers allocated and freed per read: HeapTuning, set up by `main` before
        // any other thread ran.
        if json {
            // The first `served` line's encoding pays the runtime's first look-ups of its Codable types (the other half
            // of the first request's look-ups, docs/PERFORMANCE.md): paid here instead, before the server listens.
            _ = Library.line(ServedLine(request: PlaybackRequestEvent(method: "GET", path: "-", status: 200, bytes: 0, seconds: 0)))
        }
        let library: OfflineLibrary
        let playback: PlaybackHandle
        do {
            library = try OfflineLibrary(downloads: DownloadSession.Configuration(trust: tls.trust, proxy: try proxy.settings()))
            playback = try await library.play(
                assetId: assetId,
                player: PlaybackPlayer(rawValue: player),
                port: port,
                fileCheck: checksums ? .checksums : .sizes,
                onRequest: json ? Self.printServed : nil,
                online: !offline
            )
        } catch {
            CommandOutput.fail(error, json: json)
        }
        let url = playback.url.absoluteString
        let online = playback.onlineRenditions
        let line =
            json
            ? Library.line(PlayingLine(url: url, online: online))
            : "playing \(url)" + (online.isEmpty ? "" : "\nonline (streamed from the source): \(online.joined(separator: ", "))")
        Terminal.standardOutput(line + "\n")
        // Ctrl-C or SIGTERM stops the session (and the player) gracefully.
        try? await CommandOutput.runUntilSignalled([PlaybackService(playback)])
        let outcome: Result<PlaybackEnd, any Error>
        do {
            outcome = .success(try await playback.ended())
        } catch {
            outcome = .failure(error)
        }
        await library.close()
        let end: PlaybackEnd
        switch outcome {
        case .success(let value): end = value
        case .failure(let error): CommandOutput.fail(error, json: json)
        }
        if let error = end.error { CommandOutput.fail(error, json: json) }
        if json {
            print(Library.line(["event": "stopped", "reason": "\(end.reason)"]))
        } else {
            Terminal.standardError("stopped (\(end.reason))\n")
        }
        if let status = end.playerExitStatus, status != 0 { throw ExitCode(status) }
    }
}

/// `{"event":"playing","url":...,"online":[...]}`: the session listens.
struct PlayingLine: Encodable {
    var event = "playing"
    var url: String
    /// The IDs of the renditions offered online beside the stored ones.
    var online: [String]
}

/// `{"event":"served", ...PlaybackRequestEvent}`: one request the session answered.
struct ServedLine: Encodable {
    var request: PlaybackRequestEvent

    private enum Key: String, CodingKey { case event }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode("served", forKey: .event)
        try request.encode(to: encoder)
    }
}
