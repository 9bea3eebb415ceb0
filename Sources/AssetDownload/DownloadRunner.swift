import AsyncHTTPClient
import Foundation
import HLS
import KeyDelivery
import NIOCore
import OfflinePackage
import StowageCore
import StowageCrypto
import Synchronization

/// Runs one task from its stored state to the end: plan (or read the plan), keys, files, manifest.
struct DownloadRunner: Sendable {
    let session: DownloadSession
    let assetId: String
    let mode: DownloadSession.Mode
    let events: AsyncStream<DownloadEvent>.Continuation
    /// Why the task was stopped, when it was stopped for a condition rather than by the user.
    let stopReason: StopReason
    /// Whether a live recording was asked to stop.
    let recordingControl: RecordingControl

    var store: DownloadStore { session.store }
    var now: Int64 { session.clock.now }

    func run() async throws -> PackageManifest {
        defer { events.finish() }
        do {
            let manifest = try await download()
            events.yield(.finished(manifest))
            return manifest
        } catch is CancellationError {
            let reason = stopReason.value
            _ = try? store.transition(assetId, reason == nil ? .pause : .wait, failure: reason, at: now)
            events.yield(.paused(reason))
            throw CancellationError()
        } catch let error as DownloadError {
            let waits = error.code == .insufficientStorage || (session.configuration.pausesOnTransientFailure && error.isTransient)
            if !waits { forgetIfNothingStarted() }
            _ = try? store.transition(assetId, waits ? .wait : .fail, failure: error, at: now)
            events.yield(waits ? .paused(error) : .failed(error))
            throw error
        } catch {
            let wrapped = Self.wrap(error)
            forgetIfNothingStarted()
            _ = try? store.transition(assetId, .fail, failure: wrapped, at: now)
            events.yield(.failed(wrapped))
            throw wrapped
        }
    }

    /// A new download that failed before its plan was stored (a wrong URL, not a playlist, a refused connection) has
    /// nothing to resume: its record goes, so that the same command can simply be run again (as a failed
    /// `URLSessionTask` is gone too), rather than being answered with `download_exists`.
    private func forgetIfNothingStarted() {
        guard case .start = mode, let package = try? PackageDirectory(assetId: assetId, in: session.dataDirectory) else { return }
        guard !FileManager.default.fileExists(atPath: package.manifestURL.path) else { return }
        try? FileManager.default.removeItem(at: package.url)
        try? store.remove(assetId)
    }

    static func wrap(_ error: any Error) -> DownloadError {
        switch error {
        case let error as DownloadError: error
        case let error as KeySessionError: .keys(code: error.code, message: error.message, subject: error.subject)
        case let error as KeyStoreError: .keys(code: error.code, message: error.message, subject: error.subject)
        case let error as PackageError: .package(code: error.code, message: error.description, subject: error.subject)
        default: .storage("asset download stopped: \(error)")
        }
    }

    /// What the phases of one run share: the stored task, its package, and the manifest as it grows.
    private struct RunState {
        var record: DownloadTaskRecord
        let package: PackageDirectory
        /// The manifest an earlier run wrote, if any.
        var existing: PackageManifest?
        var manifest: PackageManifest
        /// The recorded playlists of a recording planned by this run (a new recording writes them before its manifest).
        var recordedFromPlan: [String: RecordedPlaylist]?
        var recorder: RecordingPackage?
        var recordingKeys: RecordingKeys?
        /// What this run hashed and placed, with each file's identity then (``OfflinePackage/VerifiedFileRecords``).
        var placed: [String: VerifiedFileRecords.Entry] = [:]

        var facts: DownloadPhase.Facts {
            DownloadPhase.Facts(
                hasStoredPlan: existing != nil,
                hasKeys: !manifest.keys.isEmpty,
                keysAcquired: record.keysAcquired,
                isLive: manifest.recording.map { !$0.hasEnded } ?? false
            )
        }
    }

    /// Takes the run through its phases (``DownloadPhase``), each done by one function below.
    private func download() async throws -> PackageManifest {
        let (record, package, existing) = try begin()
        var selection: MediaSelectionOptions?
        if case .addMedia(let options) = mode { selection = options }
        var phase = DownloadPhase.first(.init(hasStoredPlan: existing != nil, addsMedia: selection != nil))
        var run = try await plan(record, package: package, existing: existing, fresh: phase == .plan(fresh: true), selection: selection)
        for _ in 1..<DownloadPhase.mostSteps {
            phase = phase.next(run.facts)
            switch phase {
            case .plan, .done: return run.manifest
            case .keys:
                try await acquireKeys(manifest: run.manifest, request: run.record.request)
                try store.setKeysAcquired(assetId, true, at: now)
                run.record.keysAcquired = true
            case .recording: try await beginRecording(&run)
            case .transfer: try await transfer(&run)
            case .finish: try finish(&run)
            }
        }
        return run.manifest
    }

    /// Reads the stored task (refusing one whose request or secrets cannot be read), marks it running, and reads the
    /// manifest an earlier run wrote.
    private func begin() throws -> (DownloadTaskRecord, PackageDirectory, PackageManifest?) {
        guard let record = try store.task(assetId) else { throw DownloadError.notFound(assetId: assetId) }
        if let damage = record.requestDamage {
            // Its URL, headers, token and key server are lost: running on would fail later with misleading errors.
            throw DownloadError.database(
                "the stored request of asset \(assetId) in stowage.sqlite cannot be read (\(damage)); its URL, headers and token "
                    + "are lost: cancel it with `stowage cancel \(assetId)` and download it again"
            )
        }
        if let damage = record.secretsDamage {
            // Its token, headers and cookies are lost: the origin or the key server would refuse with less helpful words.
            throw DownloadError.keys(
                code: damage.code,
                message: "the token and headers sealed with the download of asset \(assetId) could not be opened (\(damage.message)); "
                    + "cancel it with `stowage cancel \(assetId)` and download it again with its token and headers",
                subject: ErrorSubject(assetId: assetId)
            )
        }
        if case .addMedia = mode {
            try store.transition(assetId, .addMedia, at: now)
        } else {
            try store.transition(assetId, .run, at: now)
        }
        let package = try PackageDirectory(assetId: assetId, in: session.dataDirectory)
        // A manifest is written whole (temporary file, flush, rename), so one that does not read was damaged or edited:
        // planning afresh over it would write the recorded playlists and keys anew and lose what it describes.
        do {
            return (record, package, try package.readManifest())
        } catch {
            if case .notFound = error { return (record, package, nil) }
            throw DownloadError.package(
                code: .invalidManifest,
                message: "the manifest of asset \(assetId) cannot be read (\(error.description)); nothing was changed: restore "
                    + "\(package.manifestURL.path), or remove the asset with `stowage delete \(assetId)` and download it again"
            )
        }
    }

    // MARK: - Plan

    /// The stored plan, or a fresh one written to the package (inline keys, playlists, then the manifest).
    private func plan(
        _ record: DownloadTaskRecord,
        package: PackageDirectory,
        existing: PackageManifest?,
        fresh: Bool,
        selection: MediaSelectionOptions?
    ) async throws -> RunState {
        var run: RunState
        if let existing, !fresh {
            run = RunState(record: record, package: package, existing: existing, manifest: existing)
        } else {
            run = try await planAfresh(record, package: package, existing: existing, selection: selection)
        }
        events.yield(.willDownload(to: package.url))
        events.yield(.resolvedMediaSelections(run.manifest.renditions))
        if let warnings = run.manifest.playlistWarnings, !warnings.isEmpty { events.yield(.playlistWarnings(warnings)) }
        return run
    }

    private func planAfresh(
        _ record: DownloadTaskRecord,
        package: PackageDirectory,
        existing: PackageManifest?,
        selection: MediaSelectionOptions?
    ) async throws -> RunState {
        var record = record
        let planner = DownloadPlanner(
            loader: PlaylistFetcher(
                loader: PlaylistLoader(
                    routes: session.http,
                    headers: record.request.scopedHeaders,
                    timeoutSeconds: session.configuration.headTimeout
                ),
                // The first contact with a new source fails in seconds: a refused connection then is far more
                // often a wrong URL than a network that will come back (the service waits such a download out).
                retry: existing == nil ? session.configuration.retry.firstContact : session.configuration.retry
            )
        )
        let plan = try await planner.plan(
            url: PlaylistLoader.url(of: record.request.url),
            assetId: assetId,
            title: record.request.title,
            options: selection ?? record.request.selection,
            now: now,
            existing: existing,
            recording: record.request.recording
        )
        let manifest = plan.manifest
        let recordedFromPlan = existing == nil && manifest.recording != nil ? plan.recordedPlaylists : nil
        if let existing, manifest.keys.count != existing.keys.count {
            try store.setKeysAcquired(assetId, false, at: now)
            record.keysAcquired = false
        }
        if let advertised = plan.advertisedKeyServer?.absoluteString, record.request.advertisedKeyServerURL != advertised {
            record.request.advertisedKeyServerURL = advertised
            try store.updateRequest(record.request, at: now)
        }
        try checkSpace(for: manifest, completed: existing == nil ? [:] : try store.completedFiles(assetId), package: package)
        // Keys written into the playlists are sealed in the key store before the manifest, which names them only by
        // reference, is written: a manifest on disk can always get its inline keys from the store.
        try storeInlineKeys(plan.inlineKeys)
        // Playlists first, the manifest last: a manifest on disk means its playlists are there.
        do {
            try FileManager.default.createDirectory(at: package.url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            if let recordedFromPlan { try RecordingPackage.write(recordedFromPlan, package: package) }
            for (path, text) in plan.playlists.sorted(by: { $0.key < $1.key }) {
                try PackageDirectory.writeAtomically(Data(text.utf8), to: try package.url(forRelativePath: path))
            }
            for rendition in manifest.renditions {
                try FileManager.default.createDirectory(at: try package.url(forRelativePath: rendition.id), withIntermediateDirectories: true)
            }
        } catch {
            throw DownloadError.storage("cannot write the playlists of package \(assetId) in \(package.url.path): \(FileErrorText.describe(error))")
        }
        try package.writeManifest(manifest)
        return RunState(record: record, package: package, existing: existing, manifest: manifest, recordedFromPlan: recordedFromPlan)
    }

    // MARK: - Recording

    /// Makes the recorder of a live or EVENT stream (docs/live-recording.md), after reconciling what a killed run left.
    private func beginRecording(_ run: inout RunState) async throws {
        recordingControl.beginRecording()
        let recording = RecordingPackage(
            manifest: run.manifest,
            recorded: try run.recordedFromPlan ?? RecordingPackage.load(run.manifest, package: run.package),
            package: run.package,
            storeInlineKeys: storeInlineKeys
        )
        // A run killed between writing its recorded playlists and the manifest left the manifest behind them; one
        // killed between storing a new lease and superseding the older ones left two leases holding keys.
        if run.recordedFromPlan == nil { run.manifest = try await recording.reconcile() }
        let keyStore = try KeyStore(dataDirectory: session.dataDirectory.url, machineID: session.machineID, clock: session.clock)
        try keyStore.supersedeCovered(assetId: assetId, at: now)
        let request = run.record.request
        run.recordingKeys = RecordingKeys(held: try heldKeys(of: run.manifest)) { keys in
            try await acquireRecordingKeys(keys, recording: recording, request: request)
        }
        run.recorder = recording
    }

    // MARK: - Transfer

    /// Fetches every pending file with the task's workers (and records beside them when recording); the first failure
    /// ends the transfer.
    private func transfer(_ run: inout RunState) async throws {
        // A recording that ended but was stopped before its last files landed keeps its recorded playlists too: a
        // segment gone from the server meanwhile becomes a gap. A recorded playlist that cannot be read fails the run,
        // saying so: without it, a segment gone from the server would fail every resume instead of becoming a gap.
        if run.recorder == nil, run.manifest.recording != nil {
            let recorded = try RecordingPackage.load(run.manifest, package: run.package)
            if !recorded.isEmpty { run.recorder = RecordingPackage(manifest: run.manifest, recorded: recorded, package: run.package) { _ in } }
        }
        let completed = try completedFiles(run.manifest, package: run.package)
        let tracker = ProgressTracker(manifest: run.manifest, completed: completed, events: events)
        await tracker.report()
        let isRecording = run.recordingKeys != nil
        if isRecording { await tracker.update(run.manifest, recording: true) }
        let pending = run.manifest.renditions.flatMap { rendition in
            let estimate = FileFetcher.averageFileBytes(of: rendition)
            return rendition.files.filter { completed[$0.path] == nil }.map { (rendition.id, $0, $0.byteRange?.length ?? estimate) }
        }
        // A recording's files are fetched at once (the oldest are about to leave the window); its keys come beside.
        let queue = WorkQueue(pending, open: isRecording) { (try? store.wanted(assetId)) ?? [] }
        let worker = FileTransfer(runner: self, request: run.record.request, package: run.package, tracker: tracker, gaps: run.recorder)
        let concurrency = max(1, min(run.record.request.concurrency, 32))
        let (recorder, recordingKeys, request, startKeys) = (run.recorder, run.recordingKeys, run.record.request, run.manifest.keys)
        try await withThrowingTaskGroup(of: Void.self) { group in
            if let recorder, let recordingKeys {
                group.addTask {
                    try await self.record(recorder, queue: queue, tracker: tracker, request: request, keys: recordingKeys, startKeys: startKeys)
                }
            }
            for _ in 0..<concurrency {
                group.addTask { try await worker.work(queue) }
            }
            // The first failure ends the download: `waitForAll()` would wait for every other task first, and workers
            // waiting on a recording's open queue never end by themselves. Leaving the group by a throw cancels them.
            while try await group.next() != nil {}
        }
        if let recorder { run.manifest = await recorder.manifest }
        run.placed = worker.placed.all
    }

    /// The files recorded as done, with any renamed into place by a process killed before it recorded them: those are
    /// hashed instead of fetched again.
    private func completedFiles(_ manifest: PackageManifest, package: PackageDirectory) throws -> [String: CompletedFile] {
        var completed = try store.completedFiles(assetId)
        for file in manifest.files where completed[file.path] == nil {
            let url = try package.url(forRelativePath: file.path)
            if FileManager.default.fileExists(atPath: url.path), let done = try? Self.hash(url) {
                if file.byteRange == nil || file.byteRange?.length == done.size {
                    try store.recordFile(assetId, path: file.path, size: done.size, sha256: done.sha256)
                    completed[file.path] = done
                }
            }
        }
        return completed
    }

    // MARK: - Finish

    /// Every file is in place: the manifest gets sizes and checksums, then the task is complete.
    private func finish(_ run: inout RunState) throws {
        let completed = try store.completedFiles(assetId)
        // A part file the download left when it was paused is stale if a player fetched that file meanwhile (`fetchForPlayer`).
        for file in run.manifest.files {
            if let url = try? run.package.url(forRelativePath: file.path) {
                try? FileManager.default.removeItem(at: url.appendingPathExtension("part"))
            }
        }
        var manifest = run.manifest
        for r in manifest.renditions.indices {
            for i in manifest.renditions[r].initSections.indices {
                let path = manifest.renditions[r].initSections[i].path
                manifest.renditions[r].initSections[i].size = completed[path]?.size
                manifest.renditions[r].initSections[i].sha256 = completed[path]?.sha256
            }
            for s in manifest.renditions[r].segments.indices {
                guard let path = manifest.renditions[r].segments[s].file?.path else { continue }
                manifest.renditions[r].segments[s].file?.size = completed[path]?.size
                manifest.renditions[r].segments[s].file?.sha256 = completed[path]?.sha256
            }
            manifest.renditions[r].isComplete = manifest.renditions[r].files.allSatisfy { completed[$0.path] != nil }
        }
        // Never a package reported complete with a file missing (a recording whose manifest outgrew its queue).
        if let missing = manifest.files.first(where: { completed[$0.path] == nil }) {
            throw DownloadError.storage(
                "\(missing.path) of \(assetId) was never fetched though the download ran to its end; run `stowage resume \(assetId)` to fetch it"
            )
        }
        manifest.updatedAt = now
        // What this run hashed and placed, so that play need not hash it again (a cache: see VerifiedFileRecords).
        VerifiedFileRecords.record(run.placed, manifest: manifest, in: run.package)
        try run.package.writeManifest(manifest)
        try store.transition(assetId, .complete, at: now)
        // The recorded playlists are not needed once the package is complete, however the recording ended.
        try? FileManager.default.removeItem(at: run.package.url.appendingPathComponent(RecordingPackage.directoryName))
        run.manifest = manifest
    }

    /// Writes each attempt at `file` to the access log, and failed ones to the error log too.
    static func attemptLog(
        _ file: PackageFile,
        _ renditionId: String,
        _ accessLog: ExtendedLogFile?,
        _ errorLog: ExtendedLogFile?
    ) -> @Sendable (Int?, Int64, Double, Int, TransferFailure?) -> Void {
        { status, bytes, seconds, retries, failure in
            accessLog?.write([
                "cs-method": "GET",
                "cs-uri": file.sourceURL,
                "sc-status": status.map(String.init) ?? "-",
                "sc-bytes": String(bytes),
                "time-taken": String(format: "%.3f", seconds),
                "x-retries": String(retries),
                "x-rendition": renditionId,
                "x-throughput": seconds > 0 ? String(Int(Double(bytes) / seconds)) : "-",
            ])
            if let failure {
                errorLog?.write([
                    "cs-uri": file.sourceURL, "x-error-domain": failure.domain, "x-error-code": failure.code, "x-comment": failure.comment,
                ])
            }
        }
    }

    // MARK: - Keys

    /// Seals the keys a playlist writes inline (`data:` URIs) in the key store under their references, before a
    /// manifest or recorded playlist that names them is written.
    @Sendable func storeInlineKeys(_ keys: [String: SecretBytes]) throws {
        guard !keys.isEmpty else { return }
        let keyStore = try KeyStore(dataDirectory: session.dataDirectory.url, machineID: session.machineID, clock: session.clock)
        for (reference, key) in keys.sorted(by: { $0.key < $1.key }) {
            try keyStore.storeIdentityKey(key, uri: reference, assetId: assetId, expiresAt: nil, at: now)
        }
    }

    private func acquireKeys(manifest: PackageManifest, request: DownloadRequest) async throws {
        let (leaseId, _) = try await session.obtainKeys(
            manifest.keys,
            leaseFor: manifest.keys.filter { $0.kind == .skd },
            request: request,
            assetId: assetId
        )
        events.yield(.keysAcquired(leaseId: leaseId, keys: manifest.keys.count))
    }

    /// The most skd keys one lease of a recording holds: a key server caps the keys of one request (Stowage's own at
    /// 64), so a recording whose key rotates often holds one lease per group of this many keys.
    static let recordingKeysPerLease = 32

    /// Keys that appeared while a stream is recorded: identity keys as they are; skd keys by group. The recording's skd
    /// keys, in the order the manifest lists them, fall in groups of ``recordingKeysPerLease``; each group with a key
    /// no lease holds is requested whole, in a new lease stored as superseding the asset's older lease of that group
    /// (``KeyDelivery/KeyStore/persist(_:keyServer:at:superseding:)``: the group's keys so far, and the asset's first
    /// play, in the transaction that stores it).
    func acquireRecordingKeys(_ keys: [PackageKey], recording: RecordingPackage, request: DownloadRequest) async throws {
        let identity = keys.filter { $0.kind == .identity }
        if !identity.isEmpty { _ = try await session.obtainKeys(identity, leaseFor: [], request: request, assetId: assetId) }
        var leaseIds: [String] = []
        if keys.contains(where: { $0.kind == .skd }) {
            let keyStore = try KeyStore(dataDirectory: session.dataDirectory.url, machineID: session.machineID, clock: session.clock)
            var group: [PackageKey] = []
            // A key server that says rate_limited (a stream rotating its key faster than the server's policy allows
            // requests) is waited out: the recording goes on meanwhile, and the next request, for every key of the
            // group met by then, takes in the keys that appeared while it waited.
            do {
                for attempt in 1...6 {
                    do {
                        for wanted in try await Self.groupsToLease(recording.manifest.keys, keyStore: keyStore, assetId: assetId) {
                            group = wanted
                            let (leaseId, keySession) = try await session.obtainKeys(
                                [],
                                leaseFor: wanted,
                                request: request,
                                assetId: assetId,
                                superseding: true
                            )
                            guard let leaseId else { continue }
                            // The superseded lease's release goes now if the server answers; else it stays queued.
                            _ = try? await keySession?.sync()
                            leaseIds.append(leaseId)
                        }
                        break
                    } catch let error as any StowageError where error.code == .rateLimited && attempt < 6 {
                        try await Task.sleep(for: Backoff(initial: .seconds(2), maximum: .seconds(30)).delay(afterFailures: attempt))
                    }
                }
            } catch let error as any StowageError where error.code == .malformedRequest && group.count > 1 {
                throw DownloadError.keys(
                    code: .recordingKeyLimit,
                    message:
                        "the key server refused one lease for \(group.count) skd keys of the recording of \(assetId) (it said: "
                        + "\(error.message)); a recording asks for its keys in groups of \(Self.recordingKeysPerLease), and this key "
                        + "server takes fewer in one request, so the recording cannot go on: the package stays incomplete "
                        + "(`stowage cancel \(assetId)` removes it); raise the key server's limit to \(Self.recordingKeysPerLease) keys"
                )
            }
        }
        events.yield(.keysAcquired(leaseId: leaseIds.last, keys: keys.count))
    }

    /// The groups of ``recordingKeysPerLease`` skd keys of `keys` (in order) that hold a key no lease of `assetId`
    /// holds with its key material.
    static func groupsToLease(_ keys: [PackageKey], keyStore: KeyStore, assetId: String) throws -> [[PackageKey]] {
        let held = Set(try keyStore.leases(assetId: assetId).filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial }.flatMap(\.record.terms.keyIds))
        let skd = keys.filter { $0.kind == .skd }
        return stride(from: 0, to: skd.count, by: recordingKeysPerLease)
            .map { Array(skd[$0..<min($0 + recordingKeysPerLease, skd.count)]) }
            .filter { group in group.contains { !held.contains($0.keyId) } }
    }

    // MARK: - Space

    private func checkSpace(for manifest: PackageManifest, completed: [String: CompletedFile], package: PackageDirectory) throws {
        var needed: Int64 = 0
        for rendition in manifest.renditions {
            let files = rendition.files
            let missing = files.filter { completed[$0.path] == nil }.count
            guard !files.isEmpty else { continue }
            needed += rendition.expectedBytes * Int64(missing) / Int64(files.count)
        }
        needed = needed + needed / 10 + session.configuration.storageMargin
        if let free = session.configuration.freeSpace(package.url), free < needed {
            throw DownloadError.insufficientStorage(needed: needed, available: free)
        }
    }

    /// Before each file: when the free space cannot hold it, pause (and, when configured, wait for space).
    func waitForSpace(bytes: Int64, package: PackageDirectory) async throws {
        let needed = bytes + session.configuration.storageMargin
        guard let free = session.configuration.freeSpace(package.url), free < needed else { return }
        let error = DownloadError.insufficientStorage(needed: needed, available: free)
        guard session.configuration.storageWaitSeconds > 0 else { throw error }
        try store.transition(assetId, .wait, failure: error, at: now)
        events.yield(.paused(error))
        let deadline = ContinuousClock.now + .seconds(session.configuration.storageWaitSeconds)
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(250))
            if let free = session.configuration.freeSpace(package.url), free >= needed {
                try store.transition(assetId, .run, at: now)
                events.yield(.resumed)
                return
            }
        }
        throw error
    }

    static func hash(_ url: URL) throws -> CompletedFile {
        let (size, sha256) = try ChunkedFile.sha256(of: url)
        return CompletedFile(size: size, sha256: sha256)
    }
}

/// What a run's workers share, and the loop each runs: take a file from the queue and stream it to its place, the next
/// file's transfer overlapping the previous one's flush, rename and record.
private struct FileTransfer: Sendable {
    let runner: DownloadRunner
    let package: PackageDirectory
    let tracker: ProgressTracker
    /// The recording that turns a live segment gone from the server into a gap (nil for a finite stream).
    let gaps: RecordingPackage?
    let fetcher: FileFetcher
    let accessLog: ExtendedLogFile?
    let errorLog: ExtendedLogFile?
    let placed = PlacedFiles()

    init(runner: DownloadRunner, request: DownloadRequest, package: PackageDirectory, tracker: ProgressTracker, gaps: RecordingPackage?) {
        self.runner = runner
        self.package = package
        self.tracker = tracker
        self.gaps = gaps
        let configuration = runner.session.configuration
        fetcher = FileFetcher(
            client: runner.session.http,
            configuration: .init(
                headers: request.scopedHeaders,
                headTimeout: .seconds(configuration.headTimeout),
                transferTimeout: .seconds(configuration.transferTimeout),
                retry: configuration.retry,
                link: configuration.bandwidth,
                maximumFileBytes: configuration.maximumFileBytes
            )
        )
        accessLog = try? ExtendedLogFile(url: package.accessLogURL, fields: ExtendedLogFile.accessFields)
        errorLog = try? ExtendedLogFile(url: package.errorLogURL, fields: ExtendedLogFile.errorFields)
    }

    func work(_ queue: WorkQueue) async throws {
        let (store, assetId) = (runner.store, runner.assetId)
        try await withThrowingTaskGroup(of: Void.self) { placing in
            while let (renditionId, file, estimate) = try await queue.next() {
                try Task.checkCancellation()
                // A player of this paused asset may have fetched the file since the download started.
                if let done = try store.completedFile(assetId, path: file.path) {
                    await tracker.complete(file.path, renditionId: renditionId, done)
                    continue
                }
                let staged: StagedFile
                do {
                    guard let fetched = try await fetch(file, renditionId: renditionId, estimate: estimate) else { continue }
                    staged = fetched
                } catch {
                    // The previous file is whole: put it in place before stopping, so no resume asks for it again.
                    try? await placing.waitForAll()
                    throw error
                }
                try await placing.next()
                placing.addTask {
                    let identity = try await fetcher.place(staged)
                    try store.recordFile(assetId, path: file.path, size: staged.done.size, sha256: staged.done.sha256)
                    if let identity { placed.add(file.path, VerifiedFileRecords.Entry(sha256: staged.done.sha256, identity: identity)) }
                    await tracker.complete(file.path, renditionId: renditionId, staged.done)
                }
            }
            try await placing.waitForAll()
        }
    }

    /// Streams `file` beside its place; nil for a live segment the server no longer has (it left the window before a
    /// slow link reached it), which becomes a gap, never silent, rather than a download that can never complete.
    private func fetch(_ file: PackageFile, renditionId: String, estimate: Int64) async throws -> StagedFile? {
        try await runner.waitForSpace(bytes: estimate, package: package)
        do {
            return try await fetcher.fetch(
                file,
                to: try package.url(forRelativePath: file.path),
                estimate: estimate,
                log: DownloadRunner.attemptLog(file, renditionId, accessLog, errorLog)
            )
        } catch DownloadError.segmentHTTPStatus(_, _, let status) where gaps != nil && (status == 404 || status == 410) {
            if let gaps, let gap = try await gaps.markUnavailable(path: file.path) {
                runner.events.yield(.recordingGap(gap))
                let grown = await gaps.manifest
                await tracker.update(grown, recording: !(grown.recording?.hasEnded ?? true))
            }
            return nil
        }
    }
}

/// Hands out pending files to the workers, in manifest order, except that a file a player waits for (it seeked ahead
/// of the download, `DownloadStore.want`) goes first.
actor WorkQueue {
    /// Rendition ID, file, expected size.
    typealias Item = (String, PackageFile, Int64)
    private var items: [Item]
    private var position = 0
    private var handedOut: Set<String> = []
    /// The paths players wait for, latest first (read anew for every file, so a wish from another process counts).
    private let wanted: @Sendable () -> [String]

    /// Whether more items may come (a live recording): ``next()`` then waits for them until ``close()``.
    private var isOpen: Bool

    init(_ items: [Item], open: Bool = false, wanted: @escaping @Sendable () -> [String] = { [] }) {
        self.items = items
        self.isOpen = open
        self.wanted = wanted
    }

    /// Adds files a recording found.
    func append(_ more: [Item]) { items += more }

    /// No more files will come.
    func close() { isOpen = false }

    /// The next file; while the queue is open and empty, waits (checking every 50 ms) for one or for ``close()``.
    func next() async throws -> Item? {
        while isOpen, position >= items.count {
            try await Task.sleep(for: .milliseconds(50))
        }
        return take()
    }

    private func take() -> Item? {
        for path in wanted() where !handedOut.contains(path) {
            if let index = items[position...].firstIndex(where: { $0.1.path == path }) {
                // To the front of what is left; the rest keep their order.
                let item = items.remove(at: index)
                items.insert(item, at: position)
                break
            }
        }
        guard position < items.count else { return nil }
        defer { position += 1 }
        handedOut.insert(items[position].1.path)
        return items[position]
    }
}

/// Turns file completions into progress events.
actor ProgressTracker {
    private struct State {
        var progress: DownloadProgress.Rendition
        /// Media time span of each segment file.
        var spans: [String: (start: Double, end: Double)]
        var loaded: [(start: Double, end: Double)]

        /// Merges the loaded spans into sorted, disjoint ranges.
        mutating func mergeRanges() {
            let sorted = loaded.sorted { $0.start < $1.start }
            var merged: [(start: Double, end: Double)] = []
            for span in sorted {
                if let last = merged.last, span.start <= last.end + 0.001 {
                    merged[merged.count - 1].end = max(last.end, span.end)
                } else {
                    merged.append(span)
                }
            }
            loaded = merged
            progress.loadedTimeRanges = merged.map { [$0.start, $0.end] }
            progress.loadedSeconds = merged.reduce(0) { $0 + ($1.end - $1.start) }
        }
    }

    private var renditions: [State]
    private let events: AsyncStream<DownloadEvent>.Continuation
    private let started = ContinuousClock.now
    private var bytesThisRun: Int64 = 0
    private var isRecording = false

    init(manifest: PackageManifest, completed: [String: CompletedFile], events: AsyncStream<DownloadEvent>.Continuation) {
        self.events = events
        renditions = manifest.renditions.map { rendition in
            var spans: [String: (start: Double, end: Double)] = [:]
            var time = 0.0
            var loaded: [(start: Double, end: Double)] = []
            for segment in rendition.segments {
                let span = (start: time, end: time + segment.duration)
                time += segment.duration
                if let path = segment.file?.path {
                    spans[path] = span
                    if completed[path] != nil { loaded.append(span) }
                } else {
                    loaded.append(span)  // GAP segments have nothing to fetch
                }
            }
            let files = Set(rendition.files.map(\.path))
            let done = files.filter { completed[$0] != nil }
            var state = State(
                progress: .init(
                    id: rendition.id,
                    kind: rendition.kind,
                    loadedSeconds: 0,
                    loadedTimeRanges: [],
                    durationSeconds: rendition.duration,
                    bytes: done.reduce(0) { $0 + (completed[$1]?.size ?? 0) },
                    filesDone: done.count,
                    filesTotal: files.count,
                    expectedBytes: Int64(Double(rendition.bandwidth ?? 128_000) * rendition.duration / 8)
                ),
                spans: spans,
                loaded: loaded
            )
            state.mergeRanges()
            return state
        }
    }

    /// Takes in the segments a live recording added: totals, durations and media time spans. While `recording`, a
    /// rendition that caught up with the live edge is not reported complete.
    func update(_ manifest: PackageManifest, recording: Bool) {
        isRecording = recording
        for rendition in manifest.renditions {
            guard let index = renditions.firstIndex(where: { $0.progress.id == rendition.id }) else { continue }
            var time = 0.0
            for segment in rendition.segments {
                if let path = segment.file?.path, renditions[index].spans[path] == nil {
                    renditions[index].spans[path] = (start: time, end: time + segment.duration)
                }
                time += segment.duration
            }
            renditions[index].progress.durationSeconds = rendition.duration
            renditions[index].progress.filesTotal = rendition.files.count
            renditions[index].progress.expectedBytes = Int64(Double(rendition.bandwidth ?? 128_000) * rendition.duration / 8)
        }
    }

    func complete(_ path: String, renditionId: String, _ file: CompletedFile) {
        guard let index = renditions.firstIndex(where: { $0.progress.id == renditionId }) else { return }
        renditions[index].progress.filesDone += 1
        renditions[index].progress.bytes += file.size
        if let span = renditions[index].spans[path] {
            renditions[index].loaded.append(span)
            renditions[index].mergeRanges()
        }
        bytesThisRun += file.size
        report()
        if !isRecording, renditions[index].progress.filesDone == renditions[index].progress.filesTotal {
            events.yield(.renditionCompleted(id: renditionId))
        }
    }

    func report() {
        let all = renditions.map(\.progress)
        let totalWeight = all.reduce(0) { $0 + max($1.expectedBytes, 1) }
        let fraction = all.reduce(0.0) { sum, r in
            let own =
                r.filesTotal == 0
                ? 1 : (r.durationSeconds > 0 ? min(1, r.loadedSeconds / r.durationSeconds) : Double(r.filesDone) / Double(r.filesTotal))
            let done = r.filesDone == r.filesTotal ? 1 : own
            return sum + done * Double(max(r.expectedBytes, 1)) / Double(totalWeight)
        }
        let elapsed = FileFetcher.seconds(since: started)
        let rate = elapsed > 0 ? Double(bytesThisRun) / elapsed : 0
        let expected = all.reduce(Int64(0)) { $0 + max($1.expectedBytes, $1.bytes) }
        let bytes = all.reduce(Int64(0)) { $0 + $1.bytes }
        let left: Double? = rate > 0 && fraction < 1 ? Double(max(0, expected - bytes)) / rate : nil
        events.yield(.progress(DownloadProgress(renditions: all, bytes: bytes, fraction: fraction, bytesPerSecond: rate, secondsLeft: left)))
    }
}

/// The files a run hashed and put in place, each with its identity then (``OfflinePackage/VerifiedFileRecords``).
private final class PlacedFiles: Sendable {
    private let entries = Mutex<[String: VerifiedFileRecords.Entry]>([:])

    func add(_ path: String, _ entry: VerifiedFileRecords.Entry) {
        entries.withLock { $0[path] = entry }
    }

    var all: [String: VerifiedFileRecords.Entry] { entries.withLock { $0 } }
}
