import StowageCore
import Testing

/// The shared rate of `--limit-rate` and the test origin's links, with the instants given, so no test waits.
struct TokenBucketTests {
    static let start = ContinuousClock.now

    static func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }

    @Test func aFullBucketLetsItsCapacityThroughAtOnce() {
        let bucket = TokenBucket(bytesPerSecond: 1_000, capacity: 4_000, startingAt: Self.start)
        #expect(bucket.reserve(4_000, at: Self.at(0)) == .zero)
        // Empty now: the next thousand bytes wait one second.
        #expect(bucket.reserve(1_000, at: Self.at(0)) == .seconds(1))
    }

    @Test func aDebtQueuesLaterSendersBehindEarlierOnes() {
        let bucket = TokenBucket(bytesPerSecond: 1_000, capacity: 1_000, startingAt: Self.start)
        #expect(bucket.reserve(3_000, at: Self.at(0)) == .seconds(2))
        // Two connections sharing the link: the second waits for the first's debt and its own bytes.
        #expect(bucket.reserve(500, at: Self.at(0)) == .milliseconds(2_500))
        // Half a second later the debt is smaller by 500 bytes.
        #expect(bucket.reserve(0, at: Self.at(0.5)) == .seconds(2))
    }

    @Test func theBucketRefillsAtItsRateUpToItsCapacity() {
        let bucket = TokenBucket(bytesPerSecond: 1_000, capacity: 2_000, startingAt: Self.start)
        #expect(bucket.reserve(2_000, at: Self.at(0)) == .zero)
        #expect(bucket.reserve(500, at: Self.at(0.5)) == .zero)
        // An hour idle fills the bucket to its capacity, not to an hour of bytes.
        #expect(bucket.reserve(2_000, at: Self.at(3_600)) == .zero)
        #expect(bucket.reserve(1_000, at: Self.at(3_600)) == .seconds(1))
    }

    @Test func aReservationStampedBeforeTheLastAddsNothing() {
        let bucket = TokenBucket(bytesPerSecond: 1_000, capacity: 1_000, startingAt: Self.start)
        #expect(bucket.reserve(1_000, at: Self.at(1)) == .zero)
        // Read its clock before the previous caller but took the lock after it: neither refills nor drains twice.
        #expect(bucket.reserve(1_000, at: Self.at(0.5)) == .seconds(1))
        #expect(bucket.reserve(0, at: Self.at(1.5)) == .milliseconds(500))
    }
}
