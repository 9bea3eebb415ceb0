import Synchronization

/// A token bucket per caller (a device ID, or an account for identity keys): `burst` requests at once, refilled at
/// `requestsPerSecond`. Time comes from the server's clock, so tests can refill a bucket by moving it.
final class RequestRateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updatedAt: Double
    }

    private let rate: Double
    private let burst: Double
    private let buckets = Mutex<[String: Bucket]>([:])
    /// Past this many callers, full buckets are dropped (a full bucket is the same as none).
    private let pruneThreshold = 100_000

    init(_ limit: KeyServerConfiguration.RateLimit) {
        rate = limit.requestsPerSecond
        burst = Double(limit.burst)
    }

    /// Takes one token from `caller`'s bucket at `time`.
    ///
    /// - Returns: false when the bucket is empty (the request must be refused with `429 rate_limited`).
    func admit(_ caller: String, at time: Double) -> Bool {
        buckets.withLock { buckets in
            var bucket = buckets[caller] ?? Bucket(tokens: burst, updatedAt: time)
            // A clock moved backwards refills nothing rather than draining.
            let elapsed = max(0, time - bucket.updatedAt)
            bucket.tokens = min(burst, bucket.tokens + elapsed * rate)
            bucket.updatedAt = max(bucket.updatedAt, time)
            let admitted = bucket.tokens >= 1
            if admitted { bucket.tokens -= 1 }
            buckets[caller] = bucket
            if buckets.count > pruneThreshold {
                buckets = buckets.filter { _, bucket in bucket.tokens + max(0, time - bucket.updatedAt) * rate < burst }
            }
            return admitted
        }
    }
}
