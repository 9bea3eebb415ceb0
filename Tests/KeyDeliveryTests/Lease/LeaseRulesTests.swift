import KeyDelivery
import StowageCore
import Testing

/// docs/key-protocol.md, "Client-side lease rules", at and around every boundary.
struct LeaseRulesTests {
    let rules = LeaseRules.standard(highWaterMark: TimeHighWaterMark())

    @Test(arguments: [
        (Int64(1_000_000 - 301), LeaseError.Reason?.some(.notYetValid)),
        (1_000_000 - 300, nil),
        (1_000_000 - 299, nil),
        (1_000_000, nil),
    ])
    func issuedAtLeewayIs300Seconds(now: Int64, reason: LeaseError.Reason?) {
        let lease = makeRecord(issuedAt: 1_000_000)
        #expect(rules.evaluate(lease, at: now).error?.reason == reason)
        #expect(rules.authorize(lease, at: now).error?.reason == reason)
    }

    @Test func notYetValidNamesTheStartOfValidity() {
        let error = rules.evaluate(makeRecord(issuedAt: 1_000_000), at: 0).error
        #expect(error?.time == 999_700)
        #expect(error?.code == "not_yet_valid")
    }

    @Test(arguments: [
        (Int64(1_999_999), LeaseError.Reason?.none),
        (2_000_000, .storageWindowExpired),
        (2_000_001, .storageWindowExpired),
    ])
    func storageWindowBeforeFirstPlay(now: Int64, reason: LeaseError.Reason?) {
        let lease = makeRecord(storageExpiresAt: 2_000_000)
        #expect(rules.evaluate(lease, at: now).error?.reason == reason)
    }

    @Test func beforeFirstPlayThePlaybackWindowHasNotStarted() {
        // Far later than issuedAt + playbackDuration, but nothing has played: only the storage window applies.
        let lease = makeRecord(issuedAt: 1_000_000, storageExpiresAt: 2_000_000, playbackDuration: 100)
        let evaluation = rules.evaluate(lease, at: 1_500_000)
        #expect(evaluation.isValid)
        #expect(evaluation.playbackTimeLeft == 100)
        #expect(evaluation.expiresAt == 2_000_000)
        #expect(evaluation.expiresAtIfPlayedNow == 1_500_100)
    }

    @Test(arguments: [
        (Int64(1_100_000 + 172_799), LeaseError.Reason?.none),
        (1_100_000 + 172_800, .playbackWindowExpired),
        (1_100_000 + 172_801, .playbackWindowExpired),
    ])
    func playbackWindowAfterFirstPlay(now: Int64, reason: LeaseError.Reason?) {
        let lease = makeRecord(storageExpiresAt: 2_000_000, playbackDuration: 172_800, firstPlayedAt: 1_100_000)
        #expect(rules.evaluate(lease, at: now).error?.reason == reason)
        #expect(rules.authorize(lease, at: now).error?.reason == reason)
    }

    /// Dual expiry: whichever window closes first ends the lease.
    @Test(arguments: [
        // Storage ends first (1_200_000 < 1_190_000 + 172_800).
        (Int64(1_190_000), Int64(1_199_999), LeaseError.Reason?.none),
        (1_190_000, 1_200_000, .storageWindowExpired),
        // Playback ends first (1_000_100 + 172_800 = 1_172_900 < 1_200_000).
        (1_000_100, 1_172_899, nil),
        (1_000_100, 1_172_900, .playbackWindowExpired),
    ])
    func dualExpiryIsTheEarlierEnd(firstPlayedAt: Int64, now: Int64, reason: LeaseError.Reason?) {
        let lease = makeRecord(storageExpiresAt: 1_200_000, playbackDuration: 172_800, firstPlayedAt: firstPlayedAt)
        let evaluation = rules.evaluate(lease, at: now)
        #expect(evaluation.error?.reason == reason)
        #expect(evaluation.expiresAt == min(1_200_000, firstPlayedAt + 172_800))
    }

    @Test func whenBothWindowsClosedTheEarlierOneIsReported() {
        let playbackFirst = makeRecord(storageExpiresAt: 1_200_000, playbackDuration: 100, firstPlayedAt: 1_000_000)
        #expect(rules.evaluate(playbackFirst, at: 1_300_000).error?.reason == .playbackWindowExpired)
        #expect(rules.evaluate(playbackFirst, at: 1_300_000).error?.time == 1_000_100)
        let storageFirst = makeRecord(storageExpiresAt: 1_200_000, playbackDuration: 500_000, firstPlayedAt: 1_000_000)
        #expect(rules.evaluate(storageFirst, at: 1_600_000).error?.reason == .storageWindowExpired)
    }

    @Test func authorizingCountsFirstPlayAsNow() {
        let lease = makeRecord(storageExpiresAt: 2_000_000, playbackDuration: 172_800)
        let evaluation = rules.authorize(lease, at: 1_500_000)
        #expect(evaluation.isValid)
        #expect(evaluation.lease?.firstPlayedAt == 1_500_000)
        #expect(evaluation.lease?.state == .playing)
        #expect(evaluation.playbackEndsAt == 1_672_800)
        #expect(evaluation.timeLeft == 172_800)
        // Already started: the recorded first play stands.
        let started = makeRecord(playbackDuration: 172_800, firstPlayedAt: 1_400_000)
        #expect(rules.authorize(started, at: 1_500_000).lease?.firstPlayedAt == 1_400_000)
    }

    @Test(arguments: [Int64(0), -5])
    func aPlaybackWindowThatCannotStartIsRefused(duration: Int64) {
        // firstPlayedAt = now would give now < now + duration: false, so playback can never be authorized.
        let lease = makeRecord(playbackDuration: duration)
        #expect(rules.evaluate(lease, at: 1_500_000).isValid)
        let evaluation = rules.authorize(lease, at: 1_500_000)
        #expect(evaluation.error?.reason == .playbackWindowExpired)
        #expect(evaluation.lease?.firstPlayedAt == nil)
    }

    @Test func oneSecondPlaybackWindowCanStart() {
        #expect(rules.authorize(makeRecord(playbackDuration: 1), at: 1_500_000).isValid)
    }

    @Test func withoutPlaybackWindowOnlyStorageApplies() {
        let lease = makeRecord(storageExpiresAt: 2_000_000, playbackDuration: nil, firstPlayedAt: 1_000_000)
        #expect(rules.authorize(lease, at: 1_999_999).isValid)
        #expect(rules.authorize(lease, at: 2_000_000).error?.reason == .storageWindowExpired)
        #expect(rules.evaluate(lease, at: 1_500_000).playbackTimeLeft == nil)
    }

    @Test(arguments: [
        (LeaseState.expired, LeaseError.Reason.leaseExpired), (.returned, .returned), (.released, .released),
    ])
    func endedLeasesAreRefused(state: LeaseState, reason: LeaseError.Reason) {
        let lease = makeRecord(state: state)
        #expect(rules.evaluate(lease, at: 1_500_000).error?.reason == reason)
        #expect(rules.authorize(lease, at: 1_500_000).error?.reason == reason)
    }

    @Test func rollbackIsRefusedBeyond300SecondsBelowTheMark() {
        let mark = TimeHighWaterMark(mark: 1_500_000)
        let rules = LeaseRules.standard(highWaterMark: mark)
        let lease = makeRecord()
        #expect(rules.authorize(lease, at: 1_499_700).isValid)
        #expect(rules.authorize(lease, at: 1_499_699).error?.reason == .clockRollbackDetected)
        #expect(rules.authorize(lease, at: 1_499_699).error?.time == 1_500_000)
    }

    @Test func timeLeftValuesForDisplay() {
        let lease = makeRecord(storageExpiresAt: 2_000_000, playbackDuration: 172_800, renewableUntil: 1_800_000, firstPlayedAt: 1_700_000)
        let evaluation = rules.evaluate(lease, at: 1_800_000)
        #expect(evaluation.storageExpiresAt == 2_000_000)
        #expect(evaluation.storageTimeLeft == 200_000)
        #expect(evaluation.playbackEndsAt == 1_872_800)
        #expect(evaluation.playbackTimeLeft == 72_800)
        #expect(evaluation.timeLeft == 72_800)
        #expect(evaluation.renewableUntil == 1_800_000)
        #expect(!evaluation.isRenewable)
        #expect(rules.evaluate(lease, at: 1_799_999).isRenewable)
        let past = rules.evaluate(lease, at: 2_100_000)
        #expect(past.storageTimeLeft == 0 && past.playbackTimeLeft == 0 && past.timeLeft == 0)
    }

    @Test func coverageCountsThePlaybackWindowFromNowBeforeFirstPlay() {
        let lease = makeRecord(storageExpiresAt: 2_000_000, playbackDuration: 172_800)
        // Exactly the playback window: [now, now + 48h) is covered.
        #expect(rules.coverage(of: lease, from: 1_500_000, duration: 172_800).isValid)
        let tooLong = rules.coverage(of: lease, from: 1_500_000, duration: 172_801)
        #expect(tooLong.error?.reason == .expiresTooSoon)
        #expect(tooLong.error?.time == 1_672_800)
        // Nothing is recorded by asking.
        #expect(tooLong.lease?.firstPlayedAt == nil)
    }

    @Test func coverageIsBoundedByTheStorageWindowAndARunningPlaybackWindow() {
        let nearStorageEnd = makeRecord(storageExpiresAt: 1_600_000, playbackDuration: 172_800)
        #expect(rules.coverage(of: nearStorageEnd, from: 1_500_000, duration: 100_000).isValid)
        #expect(rules.coverage(of: nearStorageEnd, from: 1_500_000, duration: 100_001).error?.time == 1_600_000)
        let started = makeRecord(storageExpiresAt: 2_000_000, playbackDuration: 172_800, firstPlayedAt: 1_400_000)
        #expect(rules.coverage(of: started, from: 1_500_000, duration: 72_800).isValid)
        #expect(rules.coverage(of: started, from: 1_500_000, duration: 72_801).error?.reason == .expiresTooSoon)
        // Refused already now: that reason, not expiresTooSoon.
        #expect(rules.coverage(of: started, from: 1_600_000, duration: 1).error?.reason == .playbackWindowExpired)
    }

    @Test func policiesCompose() {
        let storageOnly = LeaseRules { StorageWindowPolicy() }
        let lease = makeRecord(storageExpiresAt: 2_000_000, playbackDuration: 10, firstPlayedAt: 1_000_000, state: .returned)
        #expect(storageOnly.evaluate(lease, at: 1_500_000).isValid)
        let strict = LeaseRules {
            LeaseStatePolicy()
            if lease.terms.playbackDuration != nil {
                PlaybackWindowPolicy()
            }
        }
        #expect(strict.policies.count == 2)
        #expect(strict.evaluate(lease, at: 1_500_000).error?.reason == .returned)
    }

    @Test func errorsCarryStableCodesAndNoSecrets() throws {
        let error = try #require(rules.evaluate(makeRecord(storageExpiresAt: 2_000_000), at: 2_000_000).error)
        #expect(error.code == "storage_window_expired")
        #expect(error.assetId == "movie-1" && error.leaseId == "lease-1")
        #expect(error.description.contains("movie-1"))
        #expect(Set(LeaseError.Reason.allCases.map(\.rawValue)).count == LeaseError.Reason.allCases.count)
    }
}
