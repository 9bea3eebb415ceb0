import Synchronization

/// A shared link's rate: a token bucket that every transfer draws from (the test origin's shaped network, the
/// download service's `--limit-rate`).
///
/// Senders reserve bytes before they write them and wait for the returned delay; the balance may go negative, which
/// queues later senders behind earlier ones, so concurrent connections share the rate as they would share one link.
public final class TokenBucket: Sendable {
    private struct State {
        var tokens: Double
        var last: ContinuousClock.Instant
    }

    public let bytesPerSecond: Double
    public let capacity: Double
    private let clock = ContinuousClock()
    private let state: Mutex<State>

    /// - Parameters:
    ///   - bytesPerSecond: the refill rate.
    ///   - capacity: the largest burst, in bytes; the bucket starts full.
    ///   - start: when the bucket is full (now, unless a test says otherwise).
    public init(bytesPerSecond: Int, capacity: Int, startingAt start: ContinuousClock.Instant = ContinuousClock.now) {
        self.bytesPerSecond = Double(max(1, bytesPerSecond))
        self.capacity = Double(max(1, capacity))
        state = Mutex(State(tokens: Double(max(1, capacity)), last: start))
    }

    /// Reserves `bytes` and returns how long to wait before sending them.
    public func reserve(_ bytes: Int) -> Duration { reserve(bytes, at: clock.now) }

    /// Reserves `bytes` at `now` (the bucket refills for the time since the last reservation, up to its capacity) and
    /// returns how long to wait before sending them.
    public func reserve(_ bytes: Int, at now: ContinuousClock.Instant) -> Duration {
        state.withLock { state in
            // A reservation stamped before the last one (two threads' clocks read in either order) adds nothing.
            let seconds = max(0, state.last.duration(to: now).inSeconds)
            state.tokens = min(capacity, state.tokens + seconds * bytesPerSecond)
            state.last = max(state.last, now)
            state.tokens -= Double(bytes)
            guard state.tokens < 0 else { return .zero }
            return .nanoseconds(Int64((-state.tokens / bytesPerSecond * 1e9).rounded(.up)))
        }
    }
}
