/// How the origin shapes the link between itself and its clients, like Apple's Network Link Conditioner.
///
/// Every setting is independent; ``unconditioned`` turns all of them off and is what the origin uses unless told
/// otherwise. The fault rates are fractions of requests (0 never, 1 always). Each request gets at most one fault,
/// tried in this order: error response, connection reset, truncated body, stall.
///
/// Which requests fault is decided by the origin's seed, not by chance: for a given seed, request path, `Range` header
/// and the number of earlier requests for that path, the outcome is always the same, however concurrent requests
/// interleave. A retried request is a new attempt with its own outcome, so it may fault again; with every rate below 1,
/// every path eventually succeeds.
///
/// ```swift
/// var conditions = NetworkConditions.profile(named: "3g")!.scaled(bandwidth: 50)
/// conditions.errorRate = 0.2
/// let origin = Origin(configuration: .init(root: "/srv/hls", conditions: conditions, seed: 42))
/// ```
public struct NetworkConditions: Sendable, Hashable, Codable {
    /// The link's throughput in bytes per second, shared by all connections like one link; `nil` is unlimited.
    public var bandwidthBytesPerSecond: Int?
    /// The delay added before each response head is sent, in milliseconds.
    public var latencyMilliseconds: Int
    /// The fraction of requests answered with an error instead of the file: 503 Service Unavailable, or about a third
    /// of the time 429 Too Many Requests with `Retry-After: 1`.
    public var errorRate: Double
    /// The fraction of responses whose connection is reset (TCP RST) after a random part of the body was sent.
    public var resetRate: Double
    /// The fraction of responses that declare their full `Content-Length` but end early: the connection is closed
    /// (TCP FIN) after a random part of the body was sent.
    public var truncateRate: Double
    /// The fraction of responses whose body pauses once, part way, for ``stallMilliseconds`` before it continues.
    public var stallRate: Double
    /// How long a stalled body pauses, in milliseconds. Make it longer than a client's read timeout to trip it.
    public var stallMilliseconds: Int

    /// - Parameters:
    ///   - bandwidthBytesPerSecond: the link's throughput shared by all connections; `nil` is unlimited.
    ///   - latencyMilliseconds: the delay before each response head.
    ///   - errorRate: the fraction of requests answered 503 or 429.
    ///   - resetRate: the fraction of responses reset mid-body.
    ///   - truncateRate: the fraction of responses whose body ends early.
    ///   - stallRate: the fraction of responses whose body pauses once.
    ///   - stallMilliseconds: how long a stalled body pauses; 3 s by default, longer than most read timeouts in tests.
    public init(
        bandwidthBytesPerSecond: Int? = nil,
        latencyMilliseconds: Int = 0,
        errorRate: Double = 0,
        resetRate: Double = 0,
        truncateRate: Double = 0,
        stallRate: Double = 0,
        stallMilliseconds: Int = 3000
    ) {
        self.bandwidthBytesPerSecond = bandwidthBytesPerSecond
        self.latencyMilliseconds = latencyMilliseconds
        self.errorRate = errorRate
        self.resetRate = resetRate
        self.truncateRate = truncateRate
        self.stallRate = stallRate
        self.stallMilliseconds = stallMilliseconds
    }

    /// No shaping at all: unlimited bandwidth, no latency, no faults. Files are served as fast as the host allows.
    public static let unconditioned = NetworkConditions()

    /// Whether these conditions change anything about how a response is sent.
    public var isUnconditioned: Bool {
        bandwidthBytesPerSecond == nil && latencyMilliseconds <= 0 && errorRate <= 0 && resetRate <= 0 && truncateRate <= 0
            && (stallRate <= 0 || stallMilliseconds <= 0)
    }

    /// The same conditions on a link `factor` times as fast; latency, stalls and the fault mix are unchanged.
    ///
    /// Tests use it to run a slow profile over a few megabytes in seconds: `profile(named: "edge")!.scaled(bandwidth: 100)`.
    /// - Parameter factor: the bandwidth multiplier, greater than 0. Unlimited bandwidth stays unlimited.
    /// - Returns: the scaled conditions; the bandwidth is at least 1 byte per second.
    public func scaled(bandwidth factor: Double) -> NetworkConditions {
        precondition(factor > 0, "the bandwidth factor must be positive")
        var scaled = self
        if let bandwidth = bandwidthBytesPerSecond {
            scaled.bandwidthBytesPerSecond = max(1, Int((Double(bandwidth) * factor).rounded()))
        }
        return scaled
    }

    /// The same conditions with latency and stalls `factor` times as long; bandwidth and the fault mix are unchanged.
    ///
    /// `scaled(time: 0.01)` turns a 3 s stall into 30 ms and 300 ms latency into 3 ms.
    /// - Parameter factor: the duration multiplier, 0 or more.
    /// - Returns: the scaled conditions.
    public func scaled(time factor: Double) -> NetworkConditions {
        precondition(factor >= 0, "the time factor must not be negative")
        var scaled = self
        scaled.latencyMilliseconds = Int((Double(latencyMilliseconds) * factor).rounded())
        scaled.stallMilliseconds = Int((Double(stallMilliseconds) * factor).rounded())
        return scaled
    }
}
