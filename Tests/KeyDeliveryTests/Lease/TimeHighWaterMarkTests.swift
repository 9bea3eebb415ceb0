import KeyDelivery
import Testing

struct TimeHighWaterMarkTests {
    @Test func theMarkIsTheLargestTimeSeen() {
        var mark = TimeHighWaterMark()
        #expect(mark.mark == nil)
        #expect(mark.observe(localTime: 1_000) == .consistent)
        mark.observe(serverTime: 5_000)
        #expect(mark.observe(localTime: 4_800) == .consistent)
        #expect(mark.mark == 5_000)
        mark.observe(serverTime: 4_000)
        #expect(mark.mark == 5_000)
        #expect(mark.observe(localTime: 6_000) == .consistent)
        #expect(mark.mark == 6_000)
    }

    @Test func exactly300SecondsBelowIsNotARollback() {
        var mark = TimeHighWaterMark(mark: 10_000)
        #expect(mark.observe(localTime: 9_700) == .consistent)
        #expect(!mark.isRolledBack(at: 9_700))
        #expect(mark.isRolledBack(at: 9_699))
        #expect(mark.observe(localTime: 9_699) == .rollbackDetected)
        #expect(mark.rollbackDetectedAt == 9_699)
    }

    @Test func aRollbackStaysLatchedUntilReanchored() {
        var mark = TimeHighWaterMark(mark: 10_000)
        #expect(mark.observe(localTime: 5_000) == .rollbackDetected)
        // Putting the clock forward again does not clear it, nor does a server time from an acquisition.
        #expect(mark.observe(localTime: 10_100) == .rollbackStillLatched)
        #expect(mark.isRolledBack(at: 10_100))
        mark.observe(serverTime: 10_200)
        #expect(mark.isRolledBack(at: 10_200))
        // A renewal re-anchors.
        #expect(mark.reanchor(serverTime: 10_200, localTime: 10_205) == .consistent)
        #expect(!mark.isRolledBack(at: 10_205))
        #expect(mark.mark == 10_205)
    }

    @Test func reanchoringDropsAFutureMarkButCatchesAClockStillBehind() {
        // A clock once set a year ahead left a high mark; the server's time replaces it.
        var mark = TimeHighWaterMark(mark: 40_000_000)
        #expect(mark.reanchor(serverTime: 10_000, localTime: 10_000) == .consistent)
        #expect(mark.mark == 10_000)
        // A clock still far behind the server is a rollback again at once.
        var behind = TimeHighWaterMark(mark: 10_000, rollbackDetectedAt: 1)
        #expect(behind.reanchor(serverTime: 20_000, localTime: 10_000) == .rollbackDetected)
        #expect(behind.isRollbackLatched)
    }
}
