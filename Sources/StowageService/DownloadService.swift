import Foundation
import Hummingbird
public import Logging
import NIOCore
import OfflinePackage
public import ServiceLifecycle
import StowageCore
public import StowageLibrary

#if canImport(Glibc)
import Glibc
#endif

/// The background download service (`stowage service run`): what iOS's background `URLSession` daemon is to an app.
/// It keeps downloads going when no terminal is open, and keeps leases healthy while the device is online.
///
/// - **Socket**: HTTP+JSON on `service.sock` in the data directory (``ServiceRoutes``), mode 0600 in a 0700 directory:
///   only the owner can talk to it. One service per data directory (`service.lock`).
/// - **Queue** (``DownloadScheduler``): at most ``ServiceConfiguration/maxDownloads`` at once, by priority; a shared
///   rate cap; no download below the free-space floor or outside the time window; network failures waited out with
///   back-off. Everything is read from `stowage.sqlite`, so after a crash (even SIGKILL) the next start continues every
///   pending download without fetching complete files again.
/// - **Lease upkeep** every ``ServiceConfiguration/upkeepInterval``: expired keys erased, queued releases and first-play
///   reports sent, due leases renewed (``OfflineLibrary/upkeepLeases(policy:initiatedBy:skip:token:)``), all journaled.
///
/// It is a swift-service-lifecycle `Service`: run it in a `ServiceGroup`, which turns SIGTERM/SIGINT into a graceful
/// shutdown (running downloads are stopped so that the next start continues them).
///
/// ```swift
/// let service = try DownloadService(library: try OfflineLibrary(), configuration: .init(maxDownloads: 2))
/// try await ServiceGroup(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger).run()
/// ```
public final class DownloadService: Service, Sendable {
    public let library: OfflineLibrary
    public let configuration: ServiceConfiguration
    public let endpoint: ServiceEndpoint
    let scheduler: DownloadScheduler
    let upkeep: LeaseUpkeepLoop
    let startedAt: Int64
    private let logger: Logger
    private let onListening: (@Sendable (_ socketPath: String) -> Void)?

    /// A service over `library`. Open the library with the service's download rules (its rate, free-space floor and
    /// pausing on transient failures), as ``open(dataDirectory:configuration:clock:logger:onListening:)`` does.
    ///
    /// - Parameter onListening: called once the service holds its lock and answers on its socket (a command line's
    ///   "download service on ..."), never for a service that is refused.
    public init(
        library: OfflineLibrary,
        configuration: ServiceConfiguration,
        logger: Logger? = nil,
        onListening: (@Sendable (_ socketPath: String) -> Void)? = nil
    ) {
        self.onListening = onListening
        var fallback = Logger(label: "stowage.service")
        fallback.logLevel = .notice
        self.logger = logger ?? fallback
        self.library = library
        self.configuration = configuration
        self.endpoint = ServiceEndpoint(dataDirectory: library.dataDirectory)
        self.scheduler = DownloadScheduler(library: library, configuration: configuration, logger: self.logger)
        self.upkeep = LeaseUpkeepLoop(library: library, configuration: configuration, logger: self.logger)
        self.startedAt = library.clock.now
    }

    /// Opens the library on `dataDirectory` with the service's download rules and makes the service.
    public static func open(
        dataDirectory: DataDirectory = .fromEnvironment(),
        configuration: ServiceConfiguration,
        clock: any Clock = SystemClock(),
        logger: Logger? = nil,
        onListening: (@Sendable (_ socketPath: String) -> Void)? = nil
    ) throws -> DownloadService {
        // Before anything is opened or announced: a data directory too deep for a socket can never serve.
        try ServiceEndpoint(dataDirectory: dataDirectory).checkSocketPath()
        let library = try OfflineLibrary(dataDirectory: dataDirectory, clock: clock, downloads: configuration.sessionConfiguration)
        return DownloadService(library: library, configuration: configuration, logger: logger, onListening: onListening)
    }

    /// Serves until a graceful shutdown (or cancellation): takes `service.lock`, binds the socket, runs the queue and
    /// lease upkeep; on the way out stops running downloads so the next start continues them, and removes the socket.
    ///
    /// - Throws: ``ServiceSetupError`` `service_already_running` when another service holds the data directory,
    ///   `socket_path_too_long`; the server's error when it cannot bind.
    public func run() async throws {
        try endpoint.checkSocketPath()
        try library.dataDirectory.prepare()
        let attempt = try AssetLock.tryAcquire(file: endpoint.lockURL, name: "service", purpose: "the download service")
        guard let lock = attempt.lock else {
            throw ServiceSetupError(
                code: .serviceAlreadyRunning,
                message: "a download service already runs on \(library.dataDirectory.url.path) (\(attempt.holder ?? "another process")); "
                    + "`stowage service status` shows it"
            )
        }
        defer { lock.release() }
        // Holding the lock, any socket file left is a dead service's.
        unlink(endpoint.socketURL.path)
        let socketPath = endpoint.socketURL.path
        let ready = AsyncStream.makeStream(of: Void.self)
        let onListening = self.onListening
        let app = Application(
            router: ServiceRoutes.makeRouter(service: self),
            configuration: .init(address: .unixDomainSocket(path: socketPath), serverName: "stowage-service"),
            onServerRunning: { _ in
                chmod(socketPath, 0o600)
                onListening?(socketPath)
                ready.continuation.yield()
                ready.continuation.finish()
            },
            logger: logger
        )
        let scheduler = self.scheduler
        let upkeep = self.upkeep
        let tick = configuration.tickInterval
        logger.notice("download service on \(socketPath)")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            group.addTask {
                for await _ in ready.stream {}
                // The queue and the upkeep run until shutdown; the app stops on its own at graceful shutdown.
                await cancelWhenGracefulShutdown {
                    await withTaskGroup(of: Void.self) { loops in
                        loops.addTask {
                            while !Task.isCancelled {
                                await scheduler.schedule()
                                try? await Task.sleep(for: tick)
                            }
                        }
                        loops.addTask { await upkeep.run() }
                    }
                }
                await scheduler.shutdown()
            }
            // A server that fails (its socket cannot be bound) ends the service rather than leaving the queue running
            // without it: the first error leaves the group, which cancels the other task.
            while try await group.next() != nil {}
        }
        unlink(socketPath)
    }

    func status() async throws -> ServiceStatus {
        ServiceStatus(
            pid: getpid(),
            dataDirectory: library.dataDirectory.url.path,
            startedAt: startedAt,
            maxDownloads: configuration.maxDownloads,
            bytesPerSecond: configuration.bytesPerSecond,
            keepFreeBytes: configuration.keepFreeBytes,
            window: configuration.window?.description,
            downloads: try await scheduler.downloads(),
            runs: await scheduler.recentRuns(),
            lastUpkeep: await upkeep.lastReport
        )
    }

    func upkeepNow() async -> LeaseUpkeepReport {
        await upkeep.runOnce()
    }
}

/// Lease upkeep on a timer, with back-off per lease after failed renewals.
actor LeaseUpkeepLoop {
    let library: OfflineLibrary
    let configuration: ServiceConfiguration
    let logger: Logger
    private(set) var lastReport: LeaseUpkeepReport?
    private var failures: [String: (count: Int, notBefore: ContinuousClock.Instant)] = [:]
    private var inFlight: Task<LeaseUpkeepReport, Never>?

    init(library: OfflineLibrary, configuration: ServiceConfiguration, logger: Logger) {
        self.library = library
        self.configuration = configuration
        self.logger = logger
    }

    func run() async {
        while !Task.isCancelled {
            _ = await runOnce()
            try? await Task.sleep(for: configuration.upkeepInterval)
        }
    }

    /// Runs upkeep now. Runs never overlap: a request made while one runs waits for it and then runs afresh (the run in
    /// flight may have looked at the leases before the request's reason to ask arose).
    func runOnce() async -> LeaseUpkeepReport {
        while let running = inFlight {
            _ = await running.value
            if inFlight == running { inFlight = nil }
        }
        let run = Task { await self.perform() }
        inFlight = run
        let report = await run.value
        if inFlight == run { inFlight = nil }
        return report
    }

    private func perform() async -> LeaseUpkeepReport {
        let now = ContinuousClock.now
        let skip = Set(failures.filter { $0.value.notBefore > now }.keys)
        let tokens = TokenSource(library: library, command: configuration.tokenCommand)
        let report = await library.upkeepLeases(policy: configuration.upkeepPolicy, initiatedBy: "service", skip: skip) { lease in
            try await tokens.token(for: lease)
        }
        for lease in report.renewed { failures[lease] = nil }
        for lease in report.renewalFailures.keys {
            let count = (failures[lease]?.count ?? 0) + 1
            // Each failure waits twice as many upkeep intervals before the next try, at most 6 hours.
            let wait = Backoff(initial: configuration.upkeepInterval, maximum: .seconds(6 * 3600)).delay(afterFailures: count)
            failures[lease] = (count, now + wait)
        }
        if let failure = report.storeFailure { logger.error("\(failure.message) [\(failure.code)]") }
        lastReport = report
        return report
    }
}

extension DownloadService {
    /// Runs one pass of the queue now, as the service does every ``ServiceConfiguration/tickInterval``: conditions
    /// checked, downloads suspended or started. A test awaits passes instead of sleeping through ticks.
    public func schedulingPass() async { await scheduler.schedule() }
}
