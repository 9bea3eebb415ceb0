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
    public init(bytesPerSecond: Int, capacity: Int) {
        self.bytesPerSecond = Double(max(1, bytesPerSecond))
        self.capacity = Double(max(1, capacity))
        state = Mutex(State(tokens: Double(max(1, capacity)), last: clock.now))
    }

    /// Reserves `bytes` and returns how long to wait before sending them.
    public func reserve(_ bytes: Int) -> Duration {
        let now = clock.now
        return state.withLock { state in
            let elapsed = state.last.duration(to: now)
            let seconds = elapsed.inSeconds
            state.tokens = min(capacity, state.tokens + seconds * bytesPerSecond)
            state.last = now
            state.tokens -= Double(bytes)
            guard state.tokens < 0 else { return .zero }
            return .nanoseconds(Int64((-state.tokens / bytesPerSecond * 1e9).rounded(.up)))
        }
    }
}
