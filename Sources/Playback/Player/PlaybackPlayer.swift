public import Foundation
import KeyDelivery
public import StowageCore

/// A local player started on the session's URL (`stowage play --player`), or ffmpeg decoding to nowhere for tests and
/// headless checks.
///
/// ```swift
/// let status = try await PlaybackPlayer.ffmpegNull.play(url)   // 0 when every frame decoded
/// ```
public enum PlaybackPlayer: String, Sendable, Hashable, CaseIterable {
    /// `ffplay -autoexit URL`
    case ffplay
    /// `mpv URL`
    case mpv
    /// `vlc --play-and-exit URL` (VLC refuses to run as root).
    case vlc
    /// `ffmpeg -nostdin -v error -xerror -i URL -map 0 -f null -`: decodes every stream, shows nothing.
    case ffmpegNull = "ffmpeg-null"

    /// The program run, looked up on `PATH`.
    public var executable: String {
        switch self {
        case .ffplay: "ffplay"
        case .mpv: "mpv"
        case .vlc: "vlc"
        case .ffmpegNull: "ffmpeg"
        }
    }

    /// The arguments for playing `url`.
    public func arguments(for url: URL) -> [String] {
        switch self {
        case .ffplay: ["-hide_banner", "-loglevel", "error", "-autoexit", url.absoluteString]
        case .mpv: ["--really-quiet", url.absoluteString]
        case .vlc: ["--play-and-exit", url.absoluteString]
        case .ffmpegNull: ["-nostdin", "-v", "error", "-xerror", "-i", url.absoluteString, "-map", "0", "-f", "null", "-"]
        }
    }

    /// Starts the player on `url` and waits for it to exit; cancelling the calling task terminates it.
    ///
    /// - Parameter standardError: where the player's diagnostics go; inherited by default.
    /// - Returns: the player's exit status, or the signal number when a signal ended it.
    /// - Throws: ``ChildProcessError`` when the player cannot be started.
    public func play(_ url: URL, standardError: ChildProcess.Stream = .inherit) async throws -> Int32 {
        let player = try ChildProcess.launch(
            "/usr/bin/env",
            [executable] + arguments(for: url),
            environment: SecretInput.childEnvironment,
            standardOutput: .null,
            standardError: standardError
        )
        return await withTaskCancellationHandler {
            await player.waitForExit().status
        } onCancel: {
            // Stopped: SIGTERM lets the player restore the terminal; its exit ends the wait above.
            player.send(SIGTERM)
        }
    }
}
