import KeyDelivery
import Testing

/// The rollback rule as a value: more than 300 s below the mark, or a latch, refuses.
struct TimeHighWaterMarkTests {
    @Test func exactly300SecondsBelowIsNotARollback() {
        let mark = TimeHighWaterMark(mark: 10_000)
        #expect(!mark.isRolledBack(at: 9_700))
        #expect(mark.isRolledBack(at: 9_699))
        #expect(!mark.isRolledBack(at: 20_000))
        #expect(!TimeHighWaterMark().isRolledBack(at: 0))
    }

    @Test func aLatchRefusesWhateverTheTime() {
        for latched in [TimeHighWaterMark(mark: 10_000, rollbackDetectedAt: 5_000), TimeHighWaterMark(mark: 10_000, tamperDetectedAt: 9_000)] {
            #expect(latched.isRolledBack(at: 10_000))
            #expect(latched.isRolledBack(at: 50_000))
        }
    }
}
