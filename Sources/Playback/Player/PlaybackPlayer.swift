public import Foundation

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
    /// - Returns: the player's exit status.
    /// - Throws: when the player cannot be started (not installed).
    public func play(_ url: URL, standardError: FileHandle? = nil) async throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments(for: url)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        if let standardError { process.standardError = standardError }
        let (exits, continuation) = AsyncStream.makeStream(of: Int32.self)
        process.terminationHandler = { finished in
            continuation.yield(finished.terminationStatus)
            continuation.finish()
        }
        try process.run()
        return await withTaskCancellationHandler {
            var iterator = exits.makeAsyncIterator()
            if let status = await iterator.next() { return status }
            // Cancelled: stop the player and report how it ended.
            process.terminate()
            process.waitUntilExit()
            return process.terminationStatus
        } onCancel: {
            process.terminate()
        }
    }
}
