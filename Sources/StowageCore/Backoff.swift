/// Exponential back-off, the one rule every retry loop of Stowage follows: after `failures` failed tries in a row the
/// next waits `initial × 2^(failures − 1)`, never more than `maximum`, spread by a jitter of ×0.5 to ×1.5 when asked
/// (so that many clients failing together do not come back together); a server's `Retry-After` is honoured when it
/// asks for longer, up to a cap.
///
/// ```swift
/// let backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(8), jitter: true)
/// try await Task.sleep(for: backoff.delay(afterFailures: failures, retryAfter: .seconds(3), cap: .seconds(60)))
/// ```
public struct Backoff: Sendable, Hashable {
    /// The wait after the first failure.
    public var initial: Duration
    /// The longest wait the doubling reaches.
    public var maximum: Duration
    /// Whether each wait is spread by a random factor in [0.5, 1.5).
    public var jitter: Bool

    public init(initial: Duration, maximum: Duration, jitter: Bool = false) {
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
    }

    /// The wait before the next try after `failures` failed ones (1 or more; fewer count as 1).
    public func delay(afterFailures failures: Int) -> Duration {
        let base = min(initial * (1 << min(max(failures, 1) - 1, 30)), maximum)
        return jitter ? base * Double.random(in: 0.5..<1.5) : base
    }

    /// The wait before the next try, honouring a server's `Retry-After` when it asks for longer than the back-off:
    /// never less than the back-off, never more than `cap` (a negative `Retry-After` counts as none).
    public func delay(afterFailures failures: Int, retryAfter: Duration?, cap: Duration) -> Duration {
        let backoff = delay(afterFailures: failures)
        guard let retryAfter, retryAfter > backoff else { return backoff }
        return min(retryAfter, max(cap, backoff))
    }
}

extension Duration {
    /// The duration in seconds, as a `Double` (for APIs that count in seconds).
    public var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
