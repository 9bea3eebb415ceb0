import ArgumentParser
import Foundation
import KeyDelivery
import OfflinePackage
import Playback

/// `stowage play ASSET [--player ffplay|mpv|ffmpeg-null|none] [--port N]`
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
            Example:
              stowage play demo-1 --player ffplay
              stowage play demo-1 --player none --port 8090
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @Option(help: "ffplay, mpv, ffmpeg-null (decode to nowhere) or none (print the URL and serve until Ctrl-C).")
    var player = "none"

    @Option(help: "The port on 127.0.0.1; 0 picks a free one.")
    var port = 0

    @Flag(help: "Hash every file against the manifest before serving.")
    var checksums = false

    func validate() throws {
        guard player == "none" || PlaybackPlayer(rawValue: player) != nil else {
            throw ValidationError("--player must be ffplay, mpv, ffmpeg-null or none")
        }
    }

    func run() async throws {
        let directory = DataDirectory.fromEnvironment()
        let authorization: PlaybackAuthorization
        let gate: PlaybackGate
        do {
            try directory.prepare()
            let store = try KeyStore(dataDirectory: directory.url, clock: SystemClock())
            let device = try DeviceIdentity.loadOrCreate(in: directory.url)
            gate = PlaybackGate(dataDirectory: directory, store: store, device: device, fileCheck: checksums ? .checksums : .sizes)
            authorization = try gate.authorize(assetId: assetId)
        } catch let error as PlaybackError {
            CommandOutput.fail(code: error.code, message: error.message, json: false)
        } catch {
            CommandOutput.fail(code: "playback_failed", message: "\(error)", json: false)
        }
        let server: PlaybackServer
        do {
            server = try PlaybackServer(authorization: authorization, gate: gate, configuration: .init(port: port))
        } catch {
            CommandOutput.fail(code: "playback_server_failed", message: "\(error)", json: false)
        }
        let onListening: @Sendable (PlaybackServer.Address) async -> Void = { address in
            FileHandle.standardOutput.write(Data("playing \(address.multivariantURL.absoluteString)\n".utf8))
        }
        let chosen = PlaybackPlayer(rawValue: player)
        let session = Task {
            if let chosen { return try await server.run(player: chosen, onListening: onListening) }
            return try await server.run(onListening: onListening)
        }
        let signals = SignalStop()
        let stopper = Task {
            await signals.wait()
            session.cancel()
        }
        let end: PlaybackEnd
        do {
            end = try await session.value
        } catch {
            stopper.cancel()
            CommandOutput.fail(code: "playback_server_failed", message: "\(error)", json: false)
        }
        stopper.cancel()
        if let error = end.error {
            CommandOutput.fail(code: error.code, message: error.message, json: false)
        }
        FileHandle.standardError.write(Data("stopped (\(end.reason))\n".utf8))
        if let status = end.playerExitStatus, status != 0 { throw ExitCode(status) }
    }
}
