public import AssetDownload
import AsyncHTTPClient
import Foundation
public import KeyDelivery
public import OfflinePackage
public import Playback

/// The offline library on one data directory: what a Swift program (and the `stowage` tool, which is only a face of
/// it) uses to download protected HLS, keep its keys under leases, check and play what is stored, and remove it.
///
/// It plays the parts of `AVAssetDownloadURLSession` (downloads, pending tasks, add media), `AVAssetCache` (what is
/// offline) and `AVContentKeySession` (leases: renew, return, sync) together, over the modules below it.
///
/// ```swift
/// let library = try OfflineLibrary()                       // $STOWAGE_HOME, else ~/.local/share/stowage
/// let task = try await library.download(DownloadRequest(url: "https://cdn.example/master.m3u8", assetId: "",
///                                                      keyServerURL: "https://keys.example", token: token))
/// for await event in task.events { print(event) }
/// let report = try await library.verify(assetId: task.assetId)
/// let playback = try await library.play(assetId: task.assetId)
/// print(playback.url)                                      // give it to any HLS player, once
/// await library.close()
/// ```
///
/// Opening a library records the clock's time in the key store and erases the key material of every lease whose
/// window has closed (docs/SECURITY.md). Call ``close()`` when done, once every task has ended.
public final class OfflineLibrary: Sendable {
    /// Where everything is kept.
    public let dataDirectory: DataDirectory
    /// The wall clock every lease decision is taken with.
    public let clock: any KeyDelivery.Clock
    /// The device's leases, keys, pins and audit journal.
    public let keyStore: KeyStore
    /// The machine ID the key store is bound to; nil reads the system's.
    let machineID: MachineID?
    let downloads: DownloadSession
    /// For key-server requests outside downloads (renew, sync).
    let keyHTTP: HTTPRoutes

    /// Opens (creating if needed, mode 0700) the library in `dataDirectory`.
    ///
    /// - Parameters:
    ///   - dataDirectory: `$STOWAGE_HOME`, else `$XDG_DATA_HOME/stowage`, else `~/.local/share/stowage` by default.
    ///   - clock: the wall clock (tests pass a `TestClock`).
    ///   - machineID: the machine the key store is bound to; nil reads `/etc/machine-id`.
    ///   - downloads: timeouts, retries and the session name of downloads.
    /// - Throws: ``KeyDelivery/PrivateFileError`` for an unsafe directory, ``KeyDelivery/KeyStoreError`` when the database
    ///   cannot be opened, ``AssetDownload/DownloadError`` for the download state.
    public init(
        dataDirectory: DataDirectory = .fromEnvironment(),
        clock: any KeyDelivery.Clock = SystemClock(),
        machineID: MachineID? = nil,
        downloads: DownloadSession.Configuration = DownloadSession.Configuration()
    ) throws {
        try dataDirectory.prepare()
        self.dataDirectory = dataDirectory
        self.clock = clock
        self.machineID = machineID
        self.keyStore = try KeyStore(dataDirectory: dataDirectory.url, machineID: machineID, clock: clock)
        self.downloads = try DownloadSession(dataDirectory: dataDirectory, configuration: downloads, clock: clock, machineID: machineID)
        var keys = HTTPClient.Configuration()
        keys.connectionPool.retryConnectionEstablishment = false  // a key server that is down is reported, not waited on
        try downloads.trust.apply(to: &keys)
        self.keyHTTP = HTTPRoutes(configuration: keys, proxy: downloads.proxy)
    }

    /// Records the clock's time in the key store of `dataDirectory` and erases expired key material, when that data
    /// directory exists; creates nothing otherwise. Best effort: every `stowage` command calls it first, so even a
    /// command that never reads a lease moves the clock-rollback mark forward (docs/SECURITY.md).
    public static func recordTime(in dataDirectory: DataDirectory = .fromEnvironment(), clock: any KeyDelivery.Clock = SystemClock()) {
        guard FileManager.default.fileExists(atPath: dataDirectory.databaseURL.path) else { return }
        // A second at most: a file another process holds locked is the command's to report (after the full busy
        // timeout, when it uses the file), and a command that does not, such as `inspect`, must not wait on it.
        _ = try? KeyStore(dataDirectory: dataDirectory.url, clock: clock, busyTimeout: 1)
    }

    /// Shuts the library's HTTP clients down. Call once every download task and playback has ended.
    public func close() async {
        try? await downloads.shutdown()
        try? await keyHTTP.shutdown()
    }

    deinit {
        // A library dropped without close() (an error path) must not take the process down: AsyncHTTPClient traps when
        // a client is released open. Shutting down twice only throws, ignored.
        let clients = keyHTTP.clients
        Task { for client in clients { try? await client.shutdown() } }
    }

    /// This device's identity (created on first use).
    public func device() throws -> DeviceIdentity {
        try DeviceIdentity.loadOrCreate(in: dataDirectory.url)
    }

    // MARK: - Downloads

    /// Starts downloading an asset; the task runs at once, its events and result are on the handle. An empty
    /// `request.assetId` is filled with the key server's asset named by the playlist's skd keys, else one derived
    /// from the URL.
    ///
    /// - Throws: ``AssetDownload/DownloadError`` `download_exists` when the asset has a task or a package already.
    public func download(_ request: DownloadRequest) async throws -> DownloadTask {
        var request = request
        if request.assetId.isEmpty { request.assetId = try await downloads.suggestedAssetID(for: request.url, headers: request.scopedHeaders) }
        return try downloads.start(request)
    }

    /// Records a download as `queued` without running it, for a queue that runs it later with ``resume(assetId:)``
    /// (the download service). An empty `request.assetId` is filled as ``download(_:)`` does.
    ///
    /// - Returns: the asset ID.
    /// - Throws: ``AssetDownload/DownloadError`` `download_exists` when the asset has a task or a package already.
    public func enqueue(_ request: DownloadRequest, priority: Int = 0) async throws -> String {
        var request = request
        if request.assetId.isEmpty { request.assetId = try await downloads.suggestedAssetID(for: request.url, headers: request.scopedHeaders) }
        try downloads.enqueue(request, priority: priority)
        return request.assetId
    }

    /// Resumes a paused, failed or interrupted download without fetching complete files again.
    /// - Parameter endingRecording: a live recording ends as it resumes and is kept: its playlists are not reloaded,
    ///   what they list is fetched, and the package completes (`stowage stop`).
    public func resume(assetId: String, endingRecording: Bool = false) throws -> DownloadTask {
        try downloads.resume(assetId: assetId, endingRecording: endingRecording)
    }

    /// Whether the asset is a live recording that has not ended (`stowage stop` can end it).
    public func isRecordingLive(assetId: String) throws -> Bool {
        try downloads.isRecordingLive(assetId: assetId)
    }

    /// The error for `stowage stop` on an asset that is not a live recording still going on.
    public func notRecording(assetId: String) -> DownloadError {
        DownloadError.package(
            code: .notRecording,
            message:
                "\(assetId) is not a live recording that is still going on (its recording ended, or it never recorded), so there "
                + "is nothing to stop; `stowage resume \(assetId)` fetches what a download still lacks, `stowage pause \(assetId)` "
                + "pauses one, and `stowage info \(assetId)` shows its state"
        )
    }

    /// Puts a paused or failed download back in the queue (`queued`), optionally at another priority, without running
    /// it: the download service's `resume`.
    /// - Throws: ``AssetDownload/DownloadError`` `download_not_found`, `download_invalid_state` (completed, being removed).
    public func requeue(assetId: String, priority: Int? = nil) throws {
        try downloads.store.transition(assetId, .enqueue, at: clock.now)
        if let priority { try downloads.store.setPriority(assetId, priority, at: clock.now) }
    }

    /// Marks a download that is not running as paused by the user: a queue leaves it alone until it is resumed.
    /// - Throws: `asset_busy` while it runs in another process: pause it there.
    public func markPaused(assetId: String) throws {
        try downloads.markPaused(assetId: assetId)
    }

    /// The stored download task of an asset, if any.
    public func downloadRecord(assetId: String) throws -> DownloadTaskRecord? {
        try downloads.store.task(assetId)
    }

    /// Adds audio or subtitle renditions to an asset (complete or not).
    public func addMedia(assetId: String, selection: MediaSelectionOptions) throws -> DownloadTask {
        try downloads.addMedia(assetId: assetId, selection: selection)
    }

    /// Cancels a download that has not completed: partial files, state and keys go (the release is queued).
    public func cancel(assetId: String) throws {
        try downloads.cancel(assetId: assetId)
    }

    /// The downloads not completed, of every session: what a new process resumes (`restorePendingDownloads`).
    public func pendingDownloads() throws -> [DownloadTaskRecord] {
        try downloads.store.tasks().filter { $0.state != .completed }
    }

    // MARK: - What is stored

    /// Every asset: the packages on disk joined with the downloads, each with its state, size, renditions and lease.
    public func assets() throws -> [AssetSummary] {
        let entries = try PackageCatalog(dataDirectory: dataDirectory, store: keyStore).entries(at: clock.now)
        let tasks = try downloads.store.tasks()
        var summaries = entries.map { entry in AssetSummary(entry: entry, task: tasks.first { $0.assetId == entry.assetId }) }
        for task in tasks where !entries.contains(where: { $0.assetId == task.assetId }) {
            summaries.append(AssetSummary(task: task))
        }
        return summaries
    }

    /// Which media selections of an asset play offline and which only online.
    ///
    /// - Throws: ``OfflinePackage/PackageError`` `package_not_found`.
    public func info(assetId: String) throws -> PackageInfo {
        try PackageInfo.load(assetId: assetId, dataDirectory: dataDirectory, store: keyStore, device: try device(), at: clock.now)
    }

    /// Checks that an asset will play offline: files, keys, lease (for `options.duration` if given), trial decryption.
    public func verify(assetId: String, options: PackageVerifier.Options = .init()) async throws -> VerificationReport {
        let package = try PackageDirectory(assetId: assetId, in: dataDirectory)
        return try await PackageVerifier(store: keyStore, device: try device(), clock: clock, options: options).verify(package)
    }

    /// Deletes an asset: files removed, key material erased, releases queued (sent with ``syncLeases()``), its download
    /// state forgotten. Works offline; deleting twice is not an error; a playback of the asset ends.
    /// - Throws: `asset_busy` (``OfflinePackage/PackageError/busy(assetId:holder:)``) while a download of the asset runs
    ///   in this or another process: pause or cancel it first.
    public func delete(assetId: String) throws -> AssetDeletion {
        let lock = try AssetLock.acquire(assetId: assetId, in: dataDirectory, purpose: "a deletion")
        defer { lock.release() }
        let report = try PackageDeletion(dataDirectory: dataDirectory, store: keyStore).delete(assetId: assetId, at: clock.now, holding: lock)
        let hadDownload = try downloads.store.task(assetId) != nil
        try downloads.store.remove(assetId)
        return AssetDeletion(report: report, hadDownload: hadDownload)
    }

    // MARK: - Playback

    /// Authorizes playback through the gate (package complete, lease valid and intact, clock not set back; the first
    /// play starts the playback window) and serves the asset decrypted on 127.0.0.1.
    ///
    /// An asset that is still downloading (or paused or failed part-way) plays too, as AVPlayer plays a download
    /// task's asset: its keys must be stored (the download fetches them first), what has landed is served, and a file
    /// not there yet waits for the running download (at most `downloadWait`, then `503`) or, when none runs, is `404`.
    ///
    /// - Parameters:
    ///   - player: a player to start on the URL (the session ends when it exits); nil: serve until ``PlaybackHandle/stop()``.
    ///   - port: the port on 127.0.0.1; 0 picks a free one.
    ///   - fileCheck: sizes (the server hashes while streaming) or every checksum up front.
    ///   - downloadWait: how long a request for a file the running download has not brought yet waits for it.
    ///   - onRequest: told of every request served (bytes, time taken, time to first byte, time waited).
    ///   - online: offer what the source has beyond the package when it is reachable (``PlaybackHandle/onlineRenditions``);
    ///     false (`--offline`): only what is stored.
    /// - Returns: the one-time URL to give a player and the handle that stops the session.
    /// - Throws: ``Playback/PlaybackError`` with the gate's refusal.
    public func play(
        assetId: String,
        player: PlaybackPlayer? = nil,
        port: Int = 0,
        fileCheck: PlaybackGate.FileCheck = .sizes,
        downloadWait: Duration = .seconds(20),
        onRequest: (@Sendable (PlaybackRequestEvent) -> Void)? = nil,
        online: Bool = true
    ) async throws -> PlaybackHandle {
        let gate = PlaybackGate(dataDirectory: dataDirectory, store: keyStore, device: try device(), clock: clock, fileCheck: fileCheck)
        // An asset with a download task (running, paused or failed part-way) plays from what has landed so far.
        let download: DownloadFiles? =
            try downloads.store.task(assetId) == nil
            ? nil : DownloadFiles(downloads: downloads, assetId: assetId, dataDirectory: dataDirectory, fetchesFromSource: online)
        var authorization = try gate.authorize(assetId: assetId, download: download)
        if online, let offer = await onlineRenditions(for: authorization) { authorization = authorization.addingOnline(offer) }
        let server = try PlaybackServer(
            authorization: authorization,
            gate: gate,
            configuration: .init(port: port, downloadWait: downloadWait, onRequest: onRequest)
        )
        return try await PlaybackHandle.start(server, player: player)
    }
}

extension OfflineLibrary {
    /// What the source offers beyond the package, when it answers now (a few seconds at most); nil offline or when it
    /// offers nothing more.
    func onlineRenditions(for authorization: PlaybackAuthorization) async -> OnlineRenditions? {
        guard let plan = try? await downloads.onlinePlan(for: authorization.manifest), let device = try? device() else { return nil }
        let request = (try? downloads.store.task(authorization.assetId))?.request
        let keys = OnlineKeys(
            downloads: downloads,
            keyStore: keyStore,
            device: device,
            http: keyHTTP,
            clock: clock,
            request: request,
            // The package's asset ID is its key server asset when it has skd keys (a download takes it from the skd URIs).
            leaseAsset: authorization.assetId,
            onlineKeys: plan.keys.filter { !authorization.heldKeyIds.contains($0.keyId) },
            inlineKeys: plan.inlineKeys,
            mustHoldLease: authorization.needsLease
        )
        return OnlineRenditions(
            plan: plan,
            source: OnlineStreaming(downloads: downloads, assetId: authorization.assetId, keys: keys)
        )
    }
}

/// The download engine's view of a package in progress, for playback (``Playback/DownloadInProgress``): the files it
/// recorded as complete in `stowage.sqlite`, whether a task holds the asset's lock now (in any process), and, when none
/// does, a file fetched from the source into the package for a waiting player.
struct DownloadFiles: DownloadInProgress {
    let downloads: DownloadSession
    let assetId: String
    let dataDirectory: DataDirectory
    /// False for `play --offline`: a file not downloaded is `404` rather than fetched.
    let fetchesFromSource: Bool

    func completedFile(_ path: String) -> (size: Int64, sha256: String)? {
        guard let done = try? downloads.store.completedFile(assetId, path: path) else { return nil }
        return (done.size, done.sha256)
    }

    func isRunning() -> Bool {
        AssetLock.isHeld(assetId: assetId, in: dataDirectory)
    }

    func want(_ path: String) {
        try? downloads.store.want(assetId, path: path)
    }

    func partialFile(_ path: String) -> URL? {
        guard let package = try? PackageDirectory(assetId: assetId, in: dataDirectory),
            let destination = try? package.url(forRelativePath: path)
        else { return nil }
        let part = DownloadSession.partFile(of: destination, forPlayer: !isRunning())
        return FileManager.default.fileExists(atPath: part.path) ? part : nil
    }

    func fetchFromSource(_ path: String) async throws(PlaybackError) -> (size: Int64, sha256: String) {
        guard fetchesFromSource else { throw .segmentNotDownloaded(assetId: assetId, path: path, why: .offline) }
        do {
            let done = try await downloads.fetchForPlayer(path: path, assetId: assetId)
            return (done.size, done.sha256)
        } catch {
            throw .segmentNotDownloaded(assetId: assetId, path: path, why: .sourceFailed(error.message))
        }
    }
}

/// What ``OfflineLibrary/delete(assetId:)`` did.
public struct AssetDeletion: Sendable, Hashable, Codable {
    /// Files, bytes, keys and leases.
    public var report: PackageDeletionReport
    /// Whether a download task (complete or not) was forgotten too.
    public var hadDownload: Bool

    /// Nothing was there to delete.
    public var nothingToDelete: Bool { report.nothingToDelete && !hadDownload }
}
