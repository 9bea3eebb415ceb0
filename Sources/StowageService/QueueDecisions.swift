import AssetDownload
import Foundation
import StowageCore

/// The download queue's decisions as values: what blocks the queue, which downloads may start and in what order, how
/// long a paused one waits before it is tried again. No clock, no disk and no tasks of its own: ``DownloadScheduler``
/// passes the moment and what it sees, so each rule is tested alone (QueueDecisionsTests).
struct QueueDecisions: Sendable {
    /// One download as the queue sees it.
    struct Entry: Sendable, Hashable {
        var assetId: String
        var state: DownloadState
        /// Why it stopped, when it did.
        var failureCode: ErrorCode? = nil
        /// Higher runs first.
        var priority = 0
        /// Unix seconds: among equal priorities, the oldest runs first.
        var createdAt: Int64
    }

    var maxDownloads: Int
    var window: TimeWindow?
    var keepFreeBytes: Int64
    var initialRetryDelay: Duration
    var maximumRetryDelay: Duration

    /// Why no download may run at `date` with `freeBytes` free on the data directory's disk (nil when unknown), or nil
    /// when downloads may run: outside the time window first, then the free-space floor.
    func block(at date: Date, timeZone: TimeZone = .current, freeBytes: Int64?) -> DownloadError? {
        if let window, !window.contains(date, timeZone: timeZone) {
            return .waiting(code: .outsideTimeWindow, message: window.closedReason)
        }
        if let freeBytes, freeBytes < keepFreeBytes {
            return .insufficientStorage(needed: keepFreeBytes, available: freeBytes)
        }
        return nil
    }

    /// Whether the queue runs a download in this state: queued, left `downloading` by a process that died, or paused
    /// by a condition that may pass. Failed downloads and those the user paused wait for `resume`.
    static func isRunnable(_ entry: Entry) -> Bool {
        switch entry.state {
        case .queued, .downloading: true
        case .paused: entry.failureCode.map(DownloadError.isTransient(code:)) ?? false
        case .failed, .completed, .removing: false
        }
    }

    /// The downloads the queue would run, in order (priority, then the oldest), those running left out.
    static func order(_ entries: [Entry], running: Set<String>) -> [String] {
        entries
            .filter { !running.contains($0.assetId) && isRunnable($0) }
            .sorted { ($0.priority, -$0.createdAt) > ($1.priority, -$1.createdAt) }
            .map(\.assetId)
    }

    /// The downloads that may start at `now`, in queue order: those whose wait after a failure is over. The scheduler
    /// starts them in this order while places remain (``placesLeft(running:)``); one that does not start (another
    /// process runs it) leaves its place to the next.
    func candidates(
        _ entries: [Entry],
        running: Set<String>,
        notBefore: [String: ContinuousClock.Instant],
        now: ContinuousClock.Instant
    ) -> [String] {
        Self.order(entries, running: running).filter { notBefore[$0].map { $0 <= now } ?? true }
    }

    /// How many more downloads may run beside `running` of them.
    func placesLeft(running: Int) -> Int { max(0, maxDownloads - running) }

    /// How long a download paused for `code` waits before the queue tries it again, after `failures` such pauses in a
    /// row: no time for a condition the queue watches itself (disk space, time window, a stopped service), else the
    /// initial delay doubled per failure, never more than the maximum.
    func retryDelay(afterFailures failures: Int, code: ErrorCode) -> Duration {
        if [.insufficientStorage, .outsideTimeWindow, .serviceStopped].contains(code) { return .zero }
        return Backoff(initial: initialRetryDelay, maximum: maximumRetryDelay).delay(afterFailures: failures)
    }
}

// Outside the declarations, so that each keeps its memberwise initializer (the tests build values with it).
extension QueueDecisions {
    init(_ configuration: ServiceConfiguration) {
        self.init(
            maxDownloads: configuration.maxDownloads,
            window: configuration.window,
            keepFreeBytes: configuration.keepFreeBytes,
            initialRetryDelay: configuration.initialRetryDelay,
            maximumRetryDelay: configuration.maximumRetryDelay
        )
    }
}

extension QueueDecisions.Entry {
    init(_ record: DownloadTaskRecord) {
        self.init(
            assetId: record.assetId,
            state: record.state,
            failureCode: record.failureCode,
            priority: record.priority,
            createdAt: record.createdAt
        )
    }
}
