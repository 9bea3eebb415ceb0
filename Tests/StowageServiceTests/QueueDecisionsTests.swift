import AssetDownload
import Foundation
import StowageCore
import Testing

@testable import StowageService

/// The download queue's rules, each with the moment and the tasks given: no service, no network, no clock.
@Suite("The download queue's decisions")
struct QueueDecisionsTests {
    static let utc = TimeZone(identifier: "UTC")!

    static func decisions(maxDownloads: Int = 2, window: String? = nil, keepFree: Int64 = 1_000) throws -> QueueDecisions {
        QueueDecisions(
            maxDownloads: maxDownloads,
            window: try window.map { try TimeWindow(parsing: $0) },
            keepFreeBytes: keepFree,
            initialRetryDelay: .seconds(5),
            maximumRetryDelay: .seconds(60)
        )
    }

    /// 2026-12-07 at `hour`:`minute` UTC.
    static func date(_ hour: Int, _ minute: Int = 0) -> Date {
        Date(timeIntervalSince1970: 1_796_601_600 + Double(hour * 3_600 + minute * 60))
    }

    @Test("order: higher priority first, then the oldest; running, failed, completed and user-paused ones left out")
    func order() {
        typealias Entry = QueueDecisions.Entry
        let entries = [
            Entry(assetId: "old-low", state: .queued, priority: 0, createdAt: 100),
            Entry(assetId: "new-high", state: .queued, priority: 5, createdAt: 300),
            Entry(assetId: "old-high", state: .queued, priority: 5, createdAt: 200),
            Entry(assetId: "left-downloading", state: .downloading, priority: 0, createdAt: 150),
            Entry(assetId: "running", state: .downloading, priority: 9, createdAt: 50),
            Entry(assetId: "paused-by-user", state: .paused, failureCode: nil, priority: 9, createdAt: 60),
            Entry(assetId: "paused-offline", state: .paused, failureCode: .playlistNetworkError, priority: 1, createdAt: 70),
            Entry(assetId: "paused-forbidden", state: .paused, failureCode: .notEntitled, priority: 9, createdAt: 80),
            Entry(assetId: "failed", state: .failed, failureCode: .playlistNetworkError, priority: 9, createdAt: 90),
            Entry(assetId: "done", state: .completed, priority: 9, createdAt: 10),
        ]
        #expect(
            QueueDecisions.order(entries, running: ["running"]) == ["old-high", "new-high", "paused-offline", "old-low", "left-downloading"]
        )
    }

    @Test("candidates: a download waiting after a failure is passed over until its time, then comes in its place")
    func waitsAfterFailure() throws {
        let decisions = try Self.decisions()
        let entries = [
            QueueDecisions.Entry(assetId: "a", state: .paused, failureCode: .playlistNetworkError, priority: 1, createdAt: 1),
            QueueDecisions.Entry(assetId: "b", state: .queued, createdAt: 2),
        ]
        let now = ContinuousClock.now
        let notBefore = ["a": now + .seconds(5)]
        #expect(decisions.candidates(entries, running: [], notBefore: notBefore, now: now) == ["b"])
        #expect(decisions.candidates(entries, running: [], notBefore: notBefore, now: now + .seconds(5)) == ["a", "b"])
    }

    @Test("places: as many as the limit leaves, never fewer than none")
    func places() throws {
        let decisions = try Self.decisions(maxDownloads: 2)
        #expect([0, 1, 2, 3].map { decisions.placesLeft(running: $0) } == [2, 1, 0, 0])
    }

    @Test("blocked outside the time window (across midnight too), then below the free-space floor; free otherwise")
    func blocks() throws {
        let night = try Self.decisions(window: "22:00-06:00", keepFree: 1_000)
        #expect(night.block(at: Self.date(23), timeZone: Self.utc, freeBytes: 5_000) == nil)
        #expect(night.block(at: Self.date(5, 59), timeZone: Self.utc, freeBytes: 5_000) == nil)
        #expect(night.block(at: Self.date(6), timeZone: Self.utc, freeBytes: 5_000)?.code == "outside_time_window")
        // The window is told before the disk.
        #expect(night.block(at: Self.date(12), timeZone: Self.utc, freeBytes: 10)?.code == "outside_time_window")
        #expect(night.block(at: Self.date(1), timeZone: Self.utc, freeBytes: 999)?.code == "insufficient_storage")
        #expect(night.block(at: Self.date(1), timeZone: Self.utc, freeBytes: 1_000) == nil)
        // Free space that cannot be read blocks nothing.
        #expect(try Self.decisions().block(at: Self.date(12), timeZone: Self.utc, freeBytes: nil) == nil)
    }

    @Test("retry delay: doubling from the initial delay to the maximum; none for conditions the queue watches itself")
    func retryDelays() throws {
        let decisions = try Self.decisions()
        #expect((1...6).map { decisions.retryDelay(afterFailures: $0, code: .segmentFailed) } == [5, 10, 20, 40, 60, 60].map { .seconds($0) })
        #expect(decisions.retryDelay(afterFailures: 1_000, code: .segmentFailed) == .seconds(60))
        for code: ErrorCode in [.insufficientStorage, .outsideTimeWindow, .serviceStopped] {
            #expect(decisions.retryDelay(afterFailures: 3, code: code) == .zero)
        }
    }
}
