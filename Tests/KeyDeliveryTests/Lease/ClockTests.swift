import Foundation
import KeyDelivery
import Testing

struct ClockTests {
    @Test func testClockMovesOnlyWhenTold() {
        let clock = TestClock(now: 1_000)
        #expect(clock.now == 1_000)
        clock.advance(by: 50)
        #expect(clock.now == 1_050)
        clock.set(10)
        #expect(clock.now == 10)
        clock.advance(by: -5)
        #expect(clock.now == 5)
    }

    @Test func systemClockReadsWholeSecondsSinceTheEpoch() {
        let expected = Int64(Date().timeIntervalSince1970)
        #expect(abs(SystemClock().now - expected) <= 2)
    }

    @Test func clocksAreInjectedAsExistentials() {
        let clocks: [any Clock] = [SystemClock(), TestClock(now: 42)]
        #expect(clocks[1].now == 42)
    }
}
