import Testing

@testable import AssetDownload

/// The order of a download run's phases, for each kind of run, with no network, database or clock.
struct DownloadPhaseTests {
    /// Every phase from the first to `.done`, as the runner walks them (bounded by ``DownloadPhase/mostSteps``).
    static func walk(_ facts: DownloadPhase.Facts) -> [DownloadPhase] {
        var phases = [DownloadPhase.first(facts)]
        for _ in 1..<DownloadPhase.mostSteps where phases.last != .done {
            phases.append(phases.last!.next(facts))
        }
        return phases
    }

    @Test func aNewDownloadWithKeysPlansThenObtainsEveryKeyBeforeAnyFile() {
        let phases = Self.walk(.init(hasKeys: true))
        #expect(phases == [.plan(fresh: true), .keys, .transfer(recording: false), .finish, .done])
    }

    @Test func aClearStreamHasNoKeyPhase() {
        #expect(Self.walk(.init()) == [.plan(fresh: true), .transfer(recording: false), .finish, .done])
    }

    @Test func aResumeReadsItsStoredPlanAndSkipsKeysItHolds() {
        let phases = Self.walk(.init(hasStoredPlan: true, hasKeys: true, keysAcquired: true))
        #expect(phases == [.plan(fresh: false), .transfer(recording: false), .finish, .done])
    }

    @Test func aResumeKilledBeforeItsKeysObtainsThemFirst() {
        let phases = Self.walk(.init(hasStoredPlan: true, hasKeys: true, keysAcquired: false))
        #expect(phases == [.plan(fresh: false), .keys, .transfer(recording: false), .finish, .done])
    }

    @Test func addingMediaPlansAfreshOverTheStoredPlan() {
        let phases = Self.walk(.init(hasStoredPlan: true, addsMedia: true, hasKeys: true, keysAcquired: true))
        #expect(phases.first == .plan(fresh: true))
    }

    @Test func aLiveStreamRecordsBesideTheTransferAndNeverWaitsForItsKeysFirst() {
        let phases = Self.walk(.init(hasKeys: true, keysAcquired: false, isLive: true))
        #expect(phases == [.plan(fresh: true), .recording, .transfer(recording: true), .finish, .done])
    }

    /// A recording that reached its end before the run that recorded it was stopped: its remaining files are
    /// fetched like a VOD download's, with no recorder waiting for more.
    @Test func anEndedRecordingFinishesWithoutRecording() {
        let phases = Self.walk(.init(hasStoredPlan: true, hasKeys: true, keysAcquired: true, isLive: false))
        #expect(!phases.contains(.recording))
        #expect(phases.contains(.transfer(recording: false)))
    }

    @Test func everyRunEndsWithinTheBound() {
        for bits in 0..<32 {
            let facts = DownloadPhase.Facts(
                hasStoredPlan: bits & 1 != 0,
                addsMedia: bits & 2 != 0,
                hasKeys: bits & 4 != 0,
                keysAcquired: bits & 8 != 0,
                isLive: bits & 16 != 0
            )
            let phases = Self.walk(facts)
            #expect(phases.last == .done, "\(facts)")
            #expect(phases.filter { $0 == .finish }.count == 1, "\(facts)")
        }
    }
}
