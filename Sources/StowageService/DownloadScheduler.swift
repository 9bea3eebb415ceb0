public import AssetDownload
import Foundation
import Logging
import OfflinePackage
public import StowageCore
import StowageLibrary

/// One download as the service sees it.
public struct ServiceDownload: Codable, Sendable, Hashable {
    public var assetId: String
    /// The stored state (`queued`, `downloading`, `paused`, `failed`, ...).
    public var state: String
    /// Whether the service is running it now.
    public var running: Bool
    /// Whether it waits for a condition (network, disk space, the time window) before the service runs it again.
    public var waiting: Bool
    public var priority: Int
    /// Place in the queue (0: next), for a queued task.
    public var position: Int?
    /// Why it is paused, waiting or failed.
    public var reason: DownloadUpdate.Problem?
    /// The last progress reported while it ran here.
    public var fraction: Double?
    public var bytes: Int64?
}

/// One run of a download by the service, for its status (and for tests of the queue).
public struct ServiceRun: Codable, Sendable, Hashable {
    public var assetId: String
    /// Seconds since the Unix epoch, with fractions.
    public var startedAt: Double
    public var endedAt: Double?
    /// `finished`, `failed`, `paused`, `waiting` once ended.
    public var outcome: String?
}

/// The service's queue: runs at most `maxDownloads` downloads at once, highest priority first (then oldest), only
/// while the conditions hold (time window, free space), waits out conditions that may pass with a growing back-off,
/// and tells watchers (`download --attach`) what happens.
///
/// It owns no state of its own that matters across restarts: every decision is made from the download tasks in
/// `stowage.sqlite`, so a service killed and started again picks up where it was (a task left `downloading` by the dead
/// process runs again; complete files are never fetched twice, as with `stowage resume`).
actor DownloadScheduler {
    private struct Running {
        let task: DownloadTask
        let pump: Task<Void, Never>
        var latest: DownloadUpdate?
    }

    private struct Waiting {
        var reason: DownloadUpdate.Problem
        var notBefore: ContinuousClock.Instant
        var failures: Int
    }

    let library: OfflineLibrary
    let configuration: ServiceConfiguration
    /// The queue's rules, as values.
    let decisions: QueueDecisions
    private var running: [String: Running] = [:]
    private var waiting: [String: Waiting] = [:]
    private var watchers: [String: [UUID: AsyncStream<DownloadUpdate>.Continuation]] = [:]
    private var runs: [ServiceRun] = []
    private var stopping = false
    /// Recordings to end as they start (`stowage stop` while they were not running).
    private var endingRecordings: Set<String> = []
    /// Why nothing may run now (outside the window, disk below its floor), nil when downloads may run.
    private var blocked: DownloadError?
    /// Why the queue could not be read at the last look (the state database damaged or locked), nil when it could:
    /// logged once when it starts and once when it ends, not at every tick.
    private var queueFailure: String?
    private let logger: Logger
    /// What the log says of each download (``DownloadLog``).
    private var downloadLog = DownloadLog()

    init(library: OfflineLibrary, configuration: ServiceConfiguration, logger: Logger) {
        self.library = library
        self.configuration = configuration
        decisions = QueueDecisions(configuration)
        self.logger = logger
    }

    // MARK: - Requests

    /// Queues a new download and runs it when its turn comes.
    func submit(_ request: DownloadRequest, priority: Int) async throws -> ServiceDownload {
        let assetId = try await library.enqueue(request, priority: priority)
        schedule()
        return try status(of: assetId)
    }

    /// Pauses a download (running here or not): it stays paused until resumed.
    func pause(_ assetId: String) async throws -> ServiceDownload {
        if let current = running[assetId] {
            current.task.pause()
            await current.pump.value
        } else {
            guard let record = try library.downloadRecord(assetId: assetId) else { throw DownloadError.notFound(assetId: assetId) }
            if record.state != .paused || record.failureCode != nil { try library.markPaused(assetId: assetId) }
        }
        waiting[assetId] = nil
        return try status(of: assetId)
    }

    /// Ends a live recording and keeps it: a running one stops reloading at once; a queued, paused or waiting one is
    /// put back in the queue to end as it starts. Either way the segments listed are fetched and the package completes.
    /// - Throws: `not_recording` when the asset is not a live recording still going on.
    func stopRecording(_ assetId: String) throws -> ServiceDownload {
        guard try library.isRecordingLive(assetId: assetId) else {
            // An unknown asset says download_not_found, not not_recording.
            _ = try status(of: assetId)
            throw library.notRecording(assetId: assetId)
        }
        if let current = running[assetId] {
            current.task.stopRecording()
        } else {
            endingRecordings.insert(assetId)
            if let record = try library.downloadRecord(assetId: assetId), record.state != .queued { try library.requeue(assetId: assetId) }
            waiting[assetId] = nil
            schedule()
        }
        return try status(of: assetId)
    }

    /// Puts a paused or failed download back in the queue (at `priority`, if given).
    func resume(_ assetId: String, priority: Int?) throws -> ServiceDownload {
        if running[assetId] == nil {
            try library.requeue(assetId: assetId, priority: priority)
            waiting[assetId] = nil
            schedule()
        }
        return try status(of: assetId)
    }

    /// Stops the download if it runs here, then cancels it (files, state and keys removed).
    func cancel(_ assetId: String) async throws {
        await stop(assetId)
        try library.cancel(assetId: assetId)
        waiting[assetId] = nil
        finishWatchers(assetId)
    }

    /// Stops the download if it runs here, then deletes the asset.
    func delete(_ assetId: String) async throws -> AssetDeletion {
        await stop(assetId)
        let deletion = try library.delete(assetId: assetId)
        waiting[assetId] = nil
        finishWatchers(assetId)
        return deletion
    }

    private func stop(_ assetId: String) async {
        guard let current = running[assetId] else { return }
        current.task.pause()
        await current.pump.value
    }

    // MARK: - Status

    func status(of assetId: String) throws -> ServiceDownload {
        guard let record = try library.downloadRecord(assetId: assetId) else { throw DownloadError.notFound(assetId: assetId) }
        let queue = try queueOrder()
        return describe(record, position: queue.firstIndex(of: assetId))
    }

    func downloads() throws -> [ServiceDownload] {
        let queue = try queueOrder()
        return try library.pendingDownloads().map { describe($0, position: queue.firstIndex(of: $0.assetId)) }
    }

    func recentRuns() -> [ServiceRun] { runs }

    /// Whether the asset's download runs or waits here (the catalog shows such an asset as the service sees it).
    func overlay(_ summary: AssetSummary) -> AssetSummary {
        var summary = summary
        if running[summary.assetId] != nil {
            summary.download = DownloadState.downloading.rawValue
            summary.failure = nil
        } else if let wait = waiting[summary.assetId] {
            summary.download = "waiting"
            summary.failure = "\(wait.reason.message) [\(wait.reason.code)]"
        }
        return summary
    }

    private func describe(_ record: DownloadTaskRecord, position: Int?) -> ServiceDownload {
        let current = running[record.assetId]
        let wait = waiting[record.assetId]
        var reason = record.failureCode.map { DownloadUpdate.Problem(code: $0.rawValue, message: record.failureMessage ?? $0.rawValue) }
        if current == nil, let wait { reason = wait.reason }
        if current == nil, record.state == .queued, let blocked { reason = .init(code: blocked.code.rawValue, message: blocked.description) }
        return ServiceDownload(
            assetId: record.assetId,
            state: current != nil ? DownloadState.downloading.rawValue : record.state.rawValue,
            running: current != nil,
            waiting: current == nil && (wait != nil || (blocked != nil && QueueDecisions.isRunnable(.init(record)))),
            priority: record.priority,
            position: current == nil && record.state == .queued ? position : nil,
            reason: current != nil ? nil : reason,
            fraction: current?.latest?.fraction,
            bytes: current?.latest?.bytes
        )
    }

    /// The tasks the queue would run, in order.
    private func queueOrder() throws -> [String] {
        QueueDecisions.order(try library.pendingDownloads().map(QueueDecisions.Entry.init), running: Set(running.keys))
    }

    // MARK: - Watching

    /// The updates of one download from now until its run here ends for good (finished, failed, paused by the user,
    /// cancelled, deleted), starting with where it stands.
    func watch(_ assetId: String) throws -> AsyncStream<DownloadUpdate> {
        let current = try status(of: assetId)
        let (stream, continuation) = AsyncStream.makeStream(of: DownloadUpdate.self, bufferingPolicy: .bufferingNewest(256))
        if let latest = running[assetId]?.latest {
            continuation.yield(latest)
        } else if current.running {
            continuation.yield(DownloadUpdate(asset: assetId, event: .resumed))
        } else if current.waiting {
            var update = DownloadUpdate(asset: assetId, event: .waiting)
            update.reason = current.reason
            continuation.yield(update)
        } else if current.state == DownloadState.queued.rawValue {
            var update = DownloadUpdate(asset: assetId, event: .queued)
            update.position = current.position
            continuation.yield(update)
        } else {
            // Not running and not going to: say why, and end.
            var update = DownloadUpdate(asset: assetId, event: current.state == DownloadState.failed.rawValue ? .failed : .paused)
            if current.state == DownloadState.failed.rawValue { update.error = current.reason } else { update.reason = current.reason }
            if current.state == DownloadState.completed.rawValue {
                update = DownloadUpdate(asset: assetId, event: .finished)
                update.complete = true
            }
            continuation.yield(update)
            continuation.finish()
            return stream
        }
        let id = UUID()
        watchers[assetId, default: [:]][id] = continuation
        continuation.onTermination = { [weak self] _ in Task { await self?.unwatch(assetId, id) } }
        return stream
    }

    private func unwatch(_ assetId: String, _ id: UUID) {
        watchers[assetId]?[id] = nil
        if watchers[assetId]?.isEmpty == true { watchers[assetId] = nil }
    }

    private func publish(_ update: DownloadUpdate) {
        if let line = downloadLog.line(for: update) { logger.log(level: line.level, "\(line.text)") }
        for continuation in watchers[update.asset]?.values ?? [:].values { continuation.yield(update) }
    }

    private func finishWatchers(_ assetId: String) {
        for continuation in watchers[assetId]?.values ?? [:].values { continuation.finish() }
        watchers[assetId] = nil
    }

    // MARK: - Running

    /// Checks the conditions, suspends what may not run, and starts what may, up to the limit.
    func schedule() {
        guard !stopping else { return }
        blocked = currentBlock()
        if let blocked {
            for (_, current) in running { current.task.suspend(because: blocked) }
            return
        }
        guard decisions.placesLeft(running: running.count) > 0 else { return }
        let queue: [String]
        do {
            queue = decisions.candidates(
                try library.pendingDownloads().map(QueueDecisions.Entry.init),
                running: Set(running.keys),
                notBefore: waiting.mapValues(\.notBefore),
                now: .now
            )
            if queueFailure != nil { logger.notice("the download queue can be read again; downloads start as before") }
            queueFailure = nil
        } catch {
            // No download starts while the queue cannot be read: said, not passed over in silence (before, the
            // service simply never started anything).
            let text = (error as? any StowageError).map { "\($0.message) [\($0.code)]" } ?? "\(error)"
            if text != queueFailure { logger.error("the download queue cannot be read, so no download starts: \(text)") }
            queueFailure = text
            return
        }
        for assetId in queue where decisions.placesLeft(running: running.count) > 0 { start(assetId) }
    }

    private func start(_ assetId: String) {
        let task: DownloadTask
        do {
            task = try library.resume(assetId: assetId, endingRecording: endingRecordings.remove(assetId) != nil)
        } catch {
            // Another process runs it (a `stowage download` in a terminal): not the queue's to run.
            return
        }
        let pump = Task { [weak self] in
            for await event in task.events { await self?.observe(event, of: assetId) }
            let outcome: Result<PackageManifest, any Error>
            do {
                outcome = .success(try await task.result())
            } catch {
                outcome = .failure(error)
            }
            await self?.ended(assetId, outcome)
        }
        running[assetId] = Running(task: task, pump: pump, latest: nil)
        runs.append(ServiceRun(assetId: assetId, startedAt: Date().timeIntervalSince1970))
        if runs.count > 100 { runs.removeFirst(runs.count - 100) }
    }

    private func observe(_ event: DownloadEvent, of assetId: String) {
        var update = DownloadUpdate(event, assetId: assetId)
        switch event {
        case .progress(let progress):
            // Progress after a wait: the condition passed, the back-off starts over.
            if progress.bytesPerSecond > 0 { waiting[assetId] = nil }
            running[assetId]?.latest = update
        case .paused(let reason?) where reason.isTransient:
            update = DownloadUpdate(asset: assetId, event: .waiting)
            update.reason = .init(code: reason.code.rawValue, message: reason.description)
        case .paused, .finished, .failed:
            return  // told when the run has ended (ended(_:_:)), after the state is stored
        default:
            break
        }
        publish(update)
    }

    private func ended(_ assetId: String, _ outcome: Result<PackageManifest, any Error>) {
        running[assetId] = nil
        let record: DownloadTaskRecord?
        do {
            record = try library.downloadRecord(assetId: assetId)
        } catch {
            // How the run ended cannot be read back: said, not taken for a pause.
            logger.error("the end of the download of \(assetId) cannot be read back: \((error as? any StowageError)?.message ?? "\(error)")")
            record = nil
        }
        var final: DownloadUpdate
        var keepWatching = false
        switch outcome {
        case .success(let manifest):
            waiting[assetId] = nil
            final = DownloadUpdate(.finished(manifest), assetId: assetId)
        case .failure:
            if let record, record.state == .paused, let code = record.failureCode, DownloadError.isTransient(code: code) {
                // A condition that may pass: wait, then try again (never longer than the maximum delay).
                let failures = (waiting[assetId]?.failures ?? 0) + 1
                let reason = DownloadUpdate.Problem(code: code.rawValue, message: record.failureMessage ?? code.rawValue)
                waiting[assetId] = Waiting(
                    reason: reason,
                    notBefore: .now + decisions.retryDelay(afterFailures: failures, code: code),
                    failures: failures
                )
                final = DownloadUpdate(asset: assetId, event: .waiting)
                final.reason = reason
                keepWatching = !stopping
            } else if let record, record.state == .failed {
                final = DownloadUpdate(asset: assetId, event: .failed)
                final.error = .init(code: (record.failureCode ?? .failed).rawValue, message: record.failureMessage ?? "the download failed")
            } else {
                final = DownloadUpdate(asset: assetId, event: .paused)
            }
        }
        if let index = runs.lastIndex(where: { $0.assetId == assetId && $0.endedAt == nil }) {
            runs[index].endedAt = Date().timeIntervalSince1970
            runs[index].outcome = final.event.rawValue
        }
        publish(final)
        if !keepWatching { finishWatchers(assetId) }
        schedule()
    }

    /// Why downloads may not run now.
    private func currentBlock() -> DownloadError? {
        decisions.block(at: Date(), freeBytes: configuration.freeSpace(library.dataDirectory.url))
    }

    /// Stops every running download so that the next start continues it (`service_stopped`, a condition that passes).
    func shutdown() async {
        stopping = true
        let reason = DownloadError.waiting(
            code: .serviceStopped,
            message: "the download service stopped; the download continues when the service starts again"
        )
        let pumps = running.values.map(\.pump)
        for current in running.values { current.task.suspend(because: reason) }
        for pump in pumps { await pump.value }
        for assetId in watchers.keys { finishWatchers(assetId) }
    }
}
