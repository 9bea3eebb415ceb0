import AsyncHTTPClient
public import Foundation
import HLS
public import KeyDelivery
import NIOCore
public import OfflinePackage
public import StowageCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Downloads HLS assets into offline packages: the counterpart of `AVAssetDownloadURLSession` (a named session whose
/// tasks a new process can list and resume) with the robustness of Media3's `DownloadManager`.
///
/// ```swift
/// let session = try DownloadSession(dataDirectory: .fromEnvironment())
/// let task = try session.start(DownloadRequest(url: "https://cdn.example/master.m3u8", assetId: "movie-1"))
/// for await event in task.events { print(event) }
/// let manifest = try await task.result()
/// try await session.shutdown()
/// ```
public final class DownloadSession: Sendable {
    /// How downloads behave.
    public struct Configuration: Sendable {
        /// The session's name: tasks are listed and resumed per session.
        public var name: String
        public var retry: RetryPolicy
        /// Seconds allowed to connect.
        public var connectTimeout: Int64
        /// Seconds a response may stay silent before the attempt fails (a stalled body).
        public var readTimeout: Int64
        /// Seconds allowed for a response head.
        public var headTimeout: Int64
        /// Seconds allowed for the whole transfer of one file.
        public var transferTimeout: Int64
        /// Free bytes on the file system holding `url`; nil when unknown. Injectable for tests.
        public var freeSpace: @Sendable (URL) -> Int64?
        /// Space kept free on top of the estimate.
        public var storageMargin: Int64
        /// How long a download paused for lack of space waits for space to come back before it stops (0: stop at once).
        public var storageWaitSeconds: Double
        /// A rate every transfer of the session shares (a service's `--limit-rate`); nil: unlimited.
        public var bandwidth: TokenBucket?
        /// Whether a failure that may pass by itself (``DownloadError/isTransient``) pauses the task with its reason
        /// instead of failing it: a service resumes such tasks when the condition passes.
        public var pausesOnTransientFailure: Bool
        /// The CAs trusted for HTTPS origins and key servers: the system's, plus `STOWAGE_CA_FILE` by default.
        public var trust: TLSTrust
        /// The proxies requests go through (``KeyDelivery/ProxySettings``): none by default; the `stowage` tool and the
        /// download service pass `--proxy` or the environment's.
        public var proxy: ProxySettings
        /// The most bytes one file without a byte range may have; nil (the default) derives it from the rendition's
        /// BANDWIDTH: 16 times its average file, 256 MiB to 4 GiB. More is refused as `segment_too_large`.
        public var maximumFileBytes: Int64?

        public init(
            name: String = "default",
            retry: RetryPolicy = RetryPolicy(),
            connectTimeout: Int64 = 10,
            readTimeout: Int64 = 20,
            headTimeout: Int64 = 30,
            transferTimeout: Int64 = 600,
            freeSpace: @escaping @Sendable (URL) -> Int64? = DownloadSession.systemFreeSpace,
            storageMargin: Int64 = 32 << 20,
            storageWaitSeconds: Double = 0,
            bandwidth: TokenBucket? = nil,
            pausesOnTransientFailure: Bool = false,
            trust: TLSTrust = .fromEnvironment(),
            proxy: ProxySettings = .direct,
            maximumFileBytes: Int64? = nil
        ) {
            self.name = name
            self.retry = retry
            self.connectTimeout = connectTimeout
            self.readTimeout = readTimeout
            self.headTimeout = headTimeout
            self.transferTimeout = transferTimeout
            self.freeSpace = freeSpace
            self.storageMargin = storageMargin
            self.storageWaitSeconds = storageWaitSeconds
            self.bandwidth = bandwidth
            self.pausesOnTransientFailure = pausesOnTransientFailure
            self.trust = trust
            self.proxy = proxy
            self.maximumFileBytes = maximumFileBytes
        }
    }

    public let dataDirectory: DataDirectory
    public let configuration: Configuration
    public let store: DownloadStore
    /// Playlists, segments and identity keys.
    let http: HTTPRoutes
    /// Key servers.
    let keyHTTP: HTTPRoutes
    let clock: any KeyDelivery.Clock
    /// The machine the key store is bound to; nil reads the system's.
    let machineID: MachineID?

    /// Opens the session's state in `dataDirectory` (created 0700 if needed).
    public init(
        dataDirectory: DataDirectory,
        configuration: Configuration = Configuration(),
        clock: any KeyDelivery.Clock = SystemClock(),
        machineID: MachineID? = nil
    ) throws {
        try dataDirectory.prepare()
        self.dataDirectory = dataDirectory
        self.configuration = configuration
        self.clock = clock
        self.machineID = machineID
        let sealer = LazyDataSealer(dataDirectory: dataDirectory, machineID: machineID, clock: clock)
        self.store = try DownloadStore(databaseURL: dataDirectory.databaseURL, sealer: { try sealer.get() })
        // Tokens and headers a Stowage from before kept in the clear are sealed now.
        _ = try? store.sealClearSecrets()
        var http = HTTPClient.Configuration()
        http.timeout = .init(connect: .seconds(configuration.connectTimeout), read: .seconds(configuration.readTimeout))
        http.redirectConfiguration = .follow(max: 5, allowCycles: false)
        http.connectionPool = .init(idleTimeout: .seconds(60))
        // A failed connect fails the request at once: the retry policy decides (with its back-off and its grace for
        // a network that is down), rather than the client retrying silently until its connect timeout (10 s for a
        // refused connection to a mistyped port).
        http.connectionPool.retryConnectionEstablishment = false
        http.httpVersion = .http1Only
        try configuration.trust.apply(to: &http)
        // Socket reads of up to 256 KiB instead of NIO's 64 KiB: a segment body crosses from the event loop to the
        // writing task in a quarter of the chunks (each a wake-up, a write(2) and a hash update). Larger reads buy
        // little more and cost resident memory: every connection holds one read buffer.
        http.http1_1ConnectionDebugInitializer = { channel in
            let reads = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 64 << 10, maximum: 256 << 10)
            return channel.setOption(ChannelOptions.recvAllocator, value: reads)
        }
        self.http = HTTPRoutes(configuration: http, proxy: configuration.proxy)
        // Key requests get their own client: the segment read timeout is tuned to catch stalled bodies, not a key
        // server signing a lease.
        var keys = HTTPClient.Configuration()
        keys.timeout = .init(connect: .seconds(configuration.connectTimeout), read: .seconds(max(30, configuration.readTimeout)))
        keys.redirectConfiguration = .follow(max: 3, allowCycles: false)
        keys.connectionPool.retryConnectionEstablishment = false
        try configuration.trust.apply(to: &keys)
        self.keyHTTP = HTTPRoutes(configuration: keys, proxy: configuration.proxy)
    }

    /// Closes the HTTP client. Call once every task has ended.
    public func shutdown() async throws {
        try await keyHTTP.shutdown()
        try await http.shutdown()
    }

    deinit {
        // A session dropped without shutdown() (an error path) must not take the process down with it:
        // AsyncHTTPClient traps when a client is released open. Shutting down twice only throws, ignored.
        let clients = http.clients + keyHTTP.clients
        Task { for client in clients { try? await client.shutdown() } }
    }

    /// The free bytes of the file system holding `url` (statvfs), nil when unknown.
    public static func systemFreeSpace(_ url: URL) -> Int64? {
        var info = statvfs()
        var path = url
        while !FileManager.default.fileExists(atPath: path.path), path.pathComponents.count > 1 { path.deleteLastPathComponent() }
        guard statvfs(path.path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The key server a download's bearer token may go to (docs/SECURITY.md): the one named for the download, listed
    /// in the data directory, or advertised on the playlist's own host over https, when the user trusts it; nil when
    /// the playlist names none.
    ///
    /// - Throws: `untrusted_key_server` (``KeyDelivery/KeySessionError``) for one the user does not trust;
    ///   ``DownloadError`` `unsupported_uri` for a URL that cannot be parsed.
    public func keyServer(for request: DownloadRequest) throws -> URL? {
        let trust = try KeyServerTrust(configured: try TrustedKeyServers.load(from: dataDirectory.url) + request.trustedKeyServers)
        return try trust.choose(
            explicit: try request.keyServerURL.map { text in
                guard let url = URL(string: text) else { throw DownloadError.unsupportedURI(text) }
                return url
            },
            advertised: request.advertisedKeyServerURL.flatMap(URL.init(string:)),
            playlistURL: URL(string: request.url)
        )
    }

    /// The asset ID a download of `url` gets when none is given: the key server's asset named by the playlist's skd
    /// key URIs (so the lease and the package share one ID): the multivariant playlist's session keys, else those of
    /// its first variant's media playlist (a live packager announces no keys ahead); else, for a clear or
    /// identity-key source, one derived from the URL.
    ///
    /// Playlists are loaded with the download's retries: a failure is thrown rather than answered with the URL's
    /// ID, which would not match the asset the key server knows.
    /// - Throws: ``DownloadError`` `playlist_unreadable` and the other load errors, after retries.
    public func suggestedAssetID(for url: String, headers: ScopedHeaders = .none) async throws -> String {
        let fetcher = PlaylistFetcher(
            loader: PlaylistLoader(routes: http, headers: headers, timeoutSeconds: configuration.headTimeout),
            retry: configuration.retry.firstContact
        )
        func skdAsset(_ keys: [EncryptionKey]) -> String? {
            for key in keys where key.effectiveKeyFormat == PlaylistKeySelection.skdKeyFormat {
                if let uri = key.uri, let (asset, _) = try? PlaylistKeySelection.parseSKD(uri) { return asset }
            }
            return nil
        }
        let loaded = try await fetcher.load(PlaylistLoader.url(of: url))
        switch loaded.parsed.playlist {
        case .media(let media):
            if let asset = skdAsset(media.distinctKeys) { return asset }
        case .multivariant(let multivariant):
            if let asset = skdAsset(multivariant.sessionKeys) { return asset }
            if let first = multivariant.variants.first, let variantURL = PlaylistURI.resolve(first.uri, against: loaded.url) {
                let variant = try await fetcher.load(variantURL, importedVariables: loaded.parsed.playlist.variables, referrer: loaded.url)
                if case .media(let media) = variant.parsed.playlist, let asset = skdAsset(media.distinctKeys) { return asset }
            }
        }
        return DownloadRequest.assetID(for: url)
    }

    // MARK: - Tasks

    /// Starts downloading a new asset. The task runs at once; its events and result are on the returned handle.
    /// - Throws: ``DownloadError/alreadyExists(assetId:state:)`` when the asset has a task already.
    public func start(_ request: DownloadRequest) throws -> DownloadTask {
        let lock = try lockAsset(request.assetId)
        try record(request, priority: 0)
        return launch(assetId: request.assetId, mode: .start, lock: lock)
    }

    /// Records a new download as `queued` without running it: a service's queue runs it later with
    /// ``resume(assetId:)``.
    /// - Throws: ``DownloadError/alreadyExists(assetId:state:)`` when the asset has a task already.
    public func enqueue(_ request: DownloadRequest, priority: Int = 0) throws {
        let lock = try lockAsset(request.assetId)
        defer { lock.release() }
        try record(request, priority: priority)
    }

    private func record(_ request: DownloadRequest, priority: Int) throws {
        let package = try PackageDirectory(assetId: request.assetId, in: dataDirectory)
        if let existing = try store.task(request.assetId) {
            throw DownloadError.alreadyExists(assetId: request.assetId, state: existing.state.rawValue)
        }
        if FileManager.default.fileExists(atPath: package.url.path) {
            throw DownloadError.alreadyExists(assetId: request.assetId, state: "on disk")
        }
        try store.insert(request, session: configuration.name, priority: priority, at: clock.now)
    }

    /// Resumes a queued, paused or failed task, without fetching any completed file again.
    /// - Parameter endingRecording: a live recording ends as it resumes, as if stopped at once
    ///   (``DownloadTask/stopRecording()``): its playlists are not reloaded, what they list is fetched (a segment gone
    ///   from the server becomes a gap), and the package completes. No effect on other downloads.
    /// - Throws: `asset_busy` while another process (or task) runs it; ``DownloadError/invalidState(assetId:state:action:)``
    ///   for a completed task or one being removed.
    public func resume(assetId: String, endingRecording: Bool = false) throws -> DownloadTask {
        guard let record = try store.task(assetId) else { throw DownloadError.notFound(assetId: assetId) }
        _ = try DownloadStateMachine.next(from: record.state, on: .run, assetId: assetId)
        let lock = try lockAsset(assetId)
        return launch(assetId: assetId, mode: .resume, lock: lock, endingRecording: endingRecording)
    }

    /// Whether the asset's package is a live recording that has not ended: one that ``DownloadTask/stopRecording()``
    /// or ``resume(assetId:endingRecording:)`` can end. False when there is no package.
    ///
    /// - Throws: ``OfflinePackage/PackageError`` when the package's manifest cannot be read (damaged or edited): whether
    ///   it records is then unknown, and saying "not recording" would be a guess.
    public func isRecordingLive(assetId: String) throws -> Bool {
        let package = try PackageDirectory(assetId: assetId, in: dataDirectory)
        do {
            return !(try package.readManifest().recording?.hasEnded ?? true)
        } catch {
            if case .notFound = error { return false }
            throw error
        }
    }

    /// Adds media selections to a package (complete or not), as `AVAggregateAssetDownloadTask` does for a cached asset.
    public func addMedia(assetId: String, selection: MediaSelectionOptions) throws -> DownloadTask {
        guard let record = try store.task(assetId) else { throw DownloadError.notFound(assetId: assetId) }
        _ = try DownloadStateMachine.next(from: record.state, on: .addMedia, assetId: assetId)
        let lock = try lockAsset(assetId)
        return launch(assetId: assetId, mode: .addMedia(selection), lock: lock)
    }

    /// Marks a task that is not running as paused by the user (a service leaves it alone until it is resumed).
    /// - Throws: `asset_busy` while it runs (pause the running task instead: ``DownloadTask/pause()``).
    public func markPaused(assetId: String) throws {
        let lock = try lockAsset(assetId)
        defer { lock.release() }
        try store.transition(assetId, .pause, at: clock.now)
    }

    /// Tasks of this session that have not completed: what `restorePendingDownloads` gives on iOS.
    public func pendingTasks() throws -> [DownloadTaskRecord] {
        try store.tasks(session: configuration.name).filter { $0.state != .completed }
    }

    /// Cancels a download that has not completed: its partial files and its state are removed, and keys already
    /// obtained are erased with their release queued (``PackageDeletion``), so a cancelled download holds no device
    /// slot. Completed packages are removed with `stowage delete`.
    public func cancel(assetId: String) throws {
        guard try store.task(assetId) != nil else { throw DownloadError.notFound(assetId: assetId) }
        let lock = try lockAsset(assetId)
        defer { lock.release() }
        try store.transition(assetId, .remove, at: clock.now)
        do {
            let keyStore = try KeyStore(dataDirectory: dataDirectory.url, machineID: machineID, clock: clock)
            _ = try PackageDeletion(dataDirectory: dataDirectory, store: keyStore).delete(assetId: assetId, at: clock.now, holding: lock)
        } catch {
            throw DownloadError.storage(
                "cannot remove the partial package of \(assetId): \((error as? any StowageError)?.message ?? FileErrorText.describe(error))"
            )
        }
        try store.remove(assetId)
    }

    /// The asset's lock for a download.
    func lockAsset(_ assetId: String) throws -> AssetLock {
        try AssetLock.acquire(assetId: assetId, in: dataDirectory, purpose: "a download")
    }

    enum Mode: Sendable {
        case start, resume
        case addMedia(MediaSelectionOptions)
    }

    private func launch(assetId: String, mode: Mode, lock: AssetLock, endingRecording: Bool = false) -> DownloadTask {
        let (events, continuation) = AsyncStream.makeStream(of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(1024))
        let reason = StopReason()
        let control = RecordingControl(stopRequested: endingRecording)
        let runner = DownloadRunner(
            session: self,
            assetId: assetId,
            mode: mode,
            events: continuation,
            stopReason: reason,
            recordingControl: control
        )
        let task = Task {
            defer { lock.release() }
            return try await runner.run()
        }
        return DownloadTask(assetId: assetId, events: events, task: task, stopReason: reason, recording: control)
    }
}

/// A running download: its events, its result, and pause.
public struct DownloadTask: Sendable {
    public let assetId: String
    /// Events until the task ends; the sequence finishes after `finished`, `failed` or `paused`.
    public let events: AsyncStream<DownloadEvent>
    let task: Task<PackageManifest, any Error>
    let stopReason: StopReason
    let recording: RecordingControl

    /// Waits for the task: the complete package's manifest, or the error that stopped it (`CancellationError` after
    /// ``pause()``).
    public func result() async throws -> PackageManifest { try await task.value }

    /// Pauses: open transfers stop, partial files stay for a later resume. The task stays paused until resumed.
    public func pause() { task.cancel() }

    /// Ends a live recording here and keeps it: the playlists stop being reloaded, the segments already listed are
    /// fetched, and the package completes with what was recorded (EXT-X-ENDLIST added). Returns false when the task
    /// does not record a live stream (or was already asked to stop).
    @discardableResult
    public func stopRecording() -> Bool { recording.requestStop() }

    /// What Ctrl-C does: stops a live recording the first time (keeping it), pauses otherwise (a VOD download, or a
    /// recording already asked to stop: a second Ctrl-C).
    public func interrupt() {
        if !stopRecording() { pause() }
    }

    /// Stops the task because of a condition that may pass (no network, disk below its floor, outside the time
    /// window): it is recorded as paused with `reason`, and a service resumes it when the condition passes.
    public func suspend(because reason: DownloadError) {
        stopReason.set(reason)
        task.cancel()
    }
}

/// Why a task was stopped by ``DownloadTask/suspend(because:)``; nil for a plain pause.
final class StopReason: Sendable {
    private let reason = Mutex<DownloadError?>(nil)

    var value: DownloadError? { reason.withLock { $0 } }

    func set(_ error: DownloadError) { reason.withLock { $0 = error } }
}

/// The key store's ``KeyDelivery/DataSealer``, opened once on first use (opening the key store purges expired leases,
/// more than reading a task needs every time).
final class LazyDataSealer: Sendable {
    private let dataDirectory: DataDirectory
    private let machineID: MachineID?
    private let clock: any KeyDelivery.Clock
    private let sealer = Mutex<DataSealer?>(nil)

    init(dataDirectory: DataDirectory, machineID: MachineID?, clock: any KeyDelivery.Clock) {
        self.dataDirectory = dataDirectory
        self.machineID = machineID
        self.clock = clock
    }

    func get() throws -> DataSealer {
        if let known = sealer.withLock({ $0 }) { return known }
        let opened = try KeyStore(dataDirectory: dataDirectory.url, machineID: machineID, clock: clock).dataSealer()
        sealer.withLock { $0 = opened }
        return opened
    }
}
