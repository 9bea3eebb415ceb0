import Foundation
import StowageCore

/// When and how long to wait before trying a request again: exponential backoff with jitter, a bounded number of
/// attempts without progress, and the server's Retry-After honoured.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in a row that may fail without a byte of progress before the file fails.
    public var maximumAttempts: Int
    /// The first backoff, in seconds.
    public var initialDelay: Double
    /// The longest backoff, in seconds.
    public var maximumDelay: Double
    /// While the network is unreachable (connection refused, host unreachable), the task keeps waiting this long in
    /// total before it fails, so a download survives a network that comes back.
    public var networkDownGrace: Double

    public init(maximumAttempts: Int = 8, initialDelay: Double = 0.25, maximumDelay: Double = 8, networkDownGrace: Double = 120) {
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.networkDownGrace = networkDownGrace
    }

    /// How long the first request of a new download waits for an unreachable host (0: it fails at once). A refused
    /// connection before anything was fetched is more often a wrong URL than a network about to come back; the
    /// download service waits such a download out in its queue instead.
    public var firstContactGrace: Double = 0

    /// The policy for the first request to a new source: ``firstContactGrace`` instead of ``networkDownGrace``.
    public var firstContact: RetryPolicy {
        var policy = self
        policy.networkDownGrace = firstContactGrace
        return policy
    }

    /// The delay before attempt `failures + 1`: `initialDelay * 2^(failures-1)` capped, times a jitter in [0.5, 1.5),
    /// or the server's Retry-After when it asks for longer (capped at 60 s).
    public func delay(afterFailures failures: Int, retryAfter: Double? = nil) -> Double {
        Backoff(initial: .seconds(initialDelay), maximum: .seconds(maximumDelay), jitter: true)
            .delay(afterFailures: failures, retryAfter: retryAfter.map { .seconds($0) }, cap: .seconds(60))
            .inSeconds
    }
}
