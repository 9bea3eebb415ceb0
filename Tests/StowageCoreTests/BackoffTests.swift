import StowageCore
import Testing

/// ``Backoff``: the one rule of every retry loop (downloads, playlists, identity keys, key requests, the recording's
/// rate limits, the service's queue and its lease upkeep).
@Suite("Backoff")
struct BackoffTests {
    @Test("doubles from the initial wait to the maximum, and stays there however many failures")
    func doubles() {
        let backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(8))
        #expect((1...8).map { backoff.delay(afterFailures: $0) } == [250, 500, 1_000, 2_000, 4_000, 8_000, 8_000, 8_000].map { .milliseconds($0) })
        #expect(backoff.delay(afterFailures: 0) == .milliseconds(250))
        #expect(backoff.delay(afterFailures: 10_000) == .seconds(8))
    }

    @Test("jitter spreads each wait between half and one and a half times it")
    func jitter() {
        let backoff = Backoff(initial: .seconds(1), maximum: .seconds(4), jitter: true)
        let waits = (0..<200).map { _ in backoff.delay(afterFailures: 3) }
        #expect(waits.allSatisfy { $0 >= .seconds(2) && $0 < .seconds(6) })
        #expect(Set(waits).count > 100, "the waits are spread, not one value")
    }

    @Test("a server's Retry-After counts when it asks for longer than the back-off, up to the cap; never less")
    func retryAfter() {
        let backoff = Backoff(initial: .milliseconds(500), maximum: .seconds(8))
        #expect(backoff.delay(afterFailures: 1, retryAfter: .seconds(1), cap: .seconds(30)) == .seconds(1))
        #expect(backoff.delay(afterFailures: 1, retryAfter: .seconds(600), cap: .seconds(30)) == .seconds(30))
        #expect(backoff.delay(afterFailures: 1, retryAfter: .seconds(-5), cap: .seconds(30)) == .milliseconds(500))
        #expect(backoff.delay(afterFailures: 3, retryAfter: .seconds(1), cap: .seconds(30)) == .seconds(2))
        #expect(backoff.delay(afterFailures: 2, retryAfter: nil, cap: .seconds(30)) == .seconds(1))
    }

    @Test("seconds as a Double")
    func seconds() {
        #expect(Duration.milliseconds(1_500).inSeconds == 1.5)
        #expect(Duration.seconds(-2).inSeconds == -2)
    }
}
