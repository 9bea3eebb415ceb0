import Testing

@testable import KeyServer

struct RequestRateLimiterTests {
    @Test func tokenBucket() {
        let limiter = RequestRateLimiter(.init(requestsPerSecond: 2, burst: 3))
        #expect((0..<3).allSatisfy { _ in limiter.admit("a", at: 100) })
        #expect(!limiter.admit("a", at: 100))
        #expect(limiter.admit("b", at: 100))
        #expect(!limiter.admit("a", at: 100.4))
        #expect(limiter.admit("a", at: 100.5))
        // Refills no further than the burst.
        #expect((0..<3).allSatisfy { _ in limiter.admit("a", at: 1_000) })
        #expect(!limiter.admit("a", at: 1_000))
        // A clock that goes back refills nothing.
        #expect(!limiter.admit("a", at: 10))
    }
}
