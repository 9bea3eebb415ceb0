import Foundation
import HLS
import NIOPosix
import Synchronization

/// The origin's live clock and its parsed VOD media playlists: renders each request's live view
/// (``LiveSimulation/view(of:elapsed:startedAt:)``).
final class LivePlaylists: Sendable {
    let simulation: LiveSimulation
    /// The wall clock when the origin started, for EXT-X-PROGRAM-DATE-TIME.
    let startedAt: Date
    /// The monotonic clock when the origin started, for the live edge.
    let started: ContinuousClock.Instant
    /// Parsed media playlists by resolved path, with the modification date they were read at; nil for a file that
    /// is not a complete media playlist (served as it is).
    private let cache = Mutex<[String: (modified: Date, playlist: MediaPlaylist?)]>([:])

    init(simulation: LiveSimulation, startedAt: Date = Date(), started: ContinuousClock.Instant = .now) {
        self.simulation = simulation
        self.startedAt = startedAt
        self.started = started
    }

    /// Media seconds since the origin started.
    var elapsed: Double {
        let duration = ContinuousClock.now - started
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds * simulation.speed
    }

    /// The live view of the media playlist at `path`, or nil when the file is not a complete media playlist (then it
    /// is served as it is). Blocking: call it from a thread pool.
    func view(at path: String) -> MediaPlaylist? {
        guard let modified = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date else { return nil }
        let source: MediaPlaylist?
        if let cached = cache.withLock({ $0[path] }), cached.modified == modified {
            source = cached.playlist
        } else {
            var parsed: MediaPlaylist?
            if let data = FileManager.default.contents(atPath: path), let result = try? PlaylistParser.parse(data),
                case .media(let media) = result.playlist, media.endList
            {
                parsed = media
            }
            cache.withLock { $0[path] = (modified, parsed) }
            source = parsed
        }
        guard let source else { return nil }
        var view = simulation.view(of: source, elapsed: elapsed, startedAt: startedAt)
        // Blocking playlist reload (RFC 8216bis 6.2.5.2): a recorder asks for the next segment and gets it as soon as
        // it is published, however fast the stream runs.
        var control = view.serverControl ?? ServerControl()
        control.canBlockReload = true
        view.serverControl = control
        return view
    }

    /// The live view once it holds media sequence number `msn` (`_HLS_msn`), or once it ends or the wait reaches
    /// three target durations (RFC 8216bis 6.2.5.2), checked every 20 ms.
    func view(at path: String, holding msn: Int?, threadPool: NIOThreadPool) async throws -> MediaPlaylist? {
        guard var view = try await threadPool.runIfActive({ self.view(at: path) }) else { return nil }
        guard let msn else { return view }
        let deadline = ContinuousClock.now + .seconds(Double(max(view.targetDuration, 1)) * 3)
        while !view.endList, (view.mediaSequence ?? 0) + view.segments.count - 1 < msn, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            guard let next = try await threadPool.runIfActive({ self.view(at: path) }) else { return nil }
            view = next
        }
        return view
    }

    /// The `_HLS_msn` of a request target, if any.
    static func blockingSequence(in target: String) -> Int? {
        guard let query = target.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
        for pair in query.split(separator: "&") where pair.hasPrefix("_HLS_msn=") {
            return Int(pair.dropFirst("_HLS_msn=".count))
        }
        return nil
    }
}
