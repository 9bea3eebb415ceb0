public import Foundation
public import HTTPServing
public import Hummingbird
public import Logging
import NIOCore
public import ServiceLifecycle
public import StowageCrypto

/// The key server: the Stowage Key Delivery Protocol (docs/key-protocol.md) over HTTP, on Hummingbird 2.
///
/// It binds 127.0.0.1 by default and an OS-assigned port when `port` is 0; ``run(host:port:onListening:)`` reports the
/// address once the socket is bound and serves until the calling task is cancelled, then shuts down gracefully.
///
/// ```swift
/// let directory = try KeyServerDataDirectory.initialize(at: "/var/lib/stowage-keys")
/// let server = try await KeyServerApplication(dataDirectory: directory)
/// try await server.run { address in print("listening on \(address.baseURL)") }
/// ```
public struct KeyServerApplication: Sendable {
    /// The address the server listens on.
    public struct Address: Sendable, Hashable {
        public var host: String
        public var port: Int

        /// `http://HOST:PORT`
        public var baseURL: URL { URL(string: "http://\(host):\(port)")! }
    }

    let service: KeyService
    let metrics = KeyServerMetrics()
    /// The bearer token `GET /metrics` requires; nil: `/metrics` is refused.
    let metricsToken: SecretBytes?
    /// The connection cap and request deadlines (``HTTPServing/ConnectionLimits/standard`` by default): a slow or idle
    /// client is closed instead of holding a connection.
    public var connectionLimits: ConnectionLimits = .standard
    private let logger: Logger
    /// The store this server opened itself (from a data directory), closed by ``close()``.
    private var ownedStore: (any KeyServerStore)?

    /// Opens a data directory made by ``KeyServerDataDirectory/initialize(at:)``: its keys, `config.json` and database
    /// (the directory's SQLite file, or the PostgreSQL database it names, whose schema must be current). Call
    /// ``close()`` when done with the server to close that database's connections.
    ///
    /// - Parameters:
    ///   - dataDirectory: The key server's data directory.
    ///   - clock: Where the server reads the time; tests pass a clock they can move.
    ///   - logger: The server's logger; by default only warnings and errors are logged.
    /// - Throws: ``KeyServerSetupError`` when a file is missing, unreadable, too open or invalid, or the database is
    ///   unreachable or its schema old; the database's error.
    public init(dataDirectory: KeyServerDataDirectory, clock: KeyServerClock = .system, logger: Logger? = nil) async throws {
        // The configuration and keys first: they say "not initialized" when the directory is not a key server's.
        let configuration = try dataDirectory.loadConfiguration()
        let signingKey = try dataDirectory.loadSigningKey()
        let masterKeys = try MasterKeyRing(directory: dataDirectory)
        let tokenSecret = try dataDirectory.loadTokenSecret()
        let metricsToken = try dataDirectory.loadMetricsToken()
        let store = try await dataDirectory.connect()
        do {
            try await self.init(
                store: store,
                configuration: configuration,
                signingKey: signingKey,
                masterKeys: masterKeys,
                tokenSecret: tokenSecret,
                metricsToken: metricsToken,
                clock: clock,
                logger: logger
            )
        } catch {
            await store.close()
            throw error
        }
        ownedStore = store
    }

    /// A server over any store and explicit secrets (for another database, or tests).
    ///
    /// - Parameters:
    ///   - store: Where assets, devices, leases, nonces and the audit log live.
    ///   - configuration: Policies, rate limit, request size limit.
    ///   - signingKey: The Ed25519 key that signs lease payloads.
    ///   - masterKey: The 32-byte key content keys are sealed under in `store`.
    ///   - tokenSecret: The HS256 key of entitlement tokens.
    ///   - metricsToken: The bearer token `GET /metrics` requires; nil refuses every scrape.
    ///   - clock: Where the server reads the time.
    ///   - logger: The server's logger.
    /// - Throws: ``KeyServerSetupError`` for an invalid configuration or master key.
    public init(
        store: any KeyServerStore,
        configuration: KeyServerConfiguration,
        signingKey: Ed25519.PrivateKey,
        masterKey: SecretBytes,
        tokenSecret: SecretBytes,
        metricsToken: SecretBytes? = nil,
        clock: KeyServerClock = .system,
        logger: Logger? = nil
    ) async throws {
        let masterKeys: MasterKeyRing
        do {
            masterKeys = try MasterKeyRing(keys: [masterKey])
        } catch {
            throw KeyServerSetupError.invalidKeyFile(KeyServerDataDirectory.masterKeyFile, "the master key must be 32 bytes")
        }
        try await self.init(
            store: store,
            configuration: configuration,
            signingKey: signingKey,
            masterKeys: masterKeys,
            tokenSecret: tokenSecret,
            metricsToken: metricsToken,
            clock: clock,
            logger: logger
        )
    }

    private init(
        store: any KeyServerStore,
        configuration: KeyServerConfiguration,
        signingKey: Ed25519.PrivateKey,
        masterKeys: MasterKeyRing,
        tokenSecret: SecretBytes,
        metricsToken: SecretBytes?,
        clock: KeyServerClock,
        logger: Logger?
    ) async throws {
        try configuration.validate()
        self.metricsToken = metricsToken
        var fallback = Logger(label: "stowage.keyserver")
        fallback.logLevel = .warning
        let logger = logger ?? fallback
        self.logger = logger
        self.service = KeyService(
            store: CachingKeyServerStore(store, clock: clock),
            configuration: configuration,
            signingKey: signingKey,
            masterKeys: masterKeys,
            entitlement: await EntitlementVerifier(secret: tokenSecret, configuration: configuration),
            rateLimiter: RequestRateLimiter(configuration.rateLimit),
            sourceLimiter: RequestRateLimiter(configuration.sourceRateLimit),
            refusals: RefusalLog(),
            clock: clock,
            logger: logger
        )
    }

    /// The public key clients pin to verify lease payloads (also served at `GET /v1/server-key`).
    public var serverPublicKey: Ed25519.PublicKey { service.signingKey.publicKey }

    /// The protocol's routes, for running in another Hummingbird application or in `HummingbirdTesting`.
    public func makeRouter() -> Router<KeyServerRequestContext> {
        KeyServerRoutes.makeRouter(service: service, metrics: metrics, metricsToken: metricsToken)
    }

    /// Closes the database connections of a server opened from a data directory (a server given its store leaves it to
    /// the caller). Nothing is served after.
    public func close() async {
        await ownedStore?.close()
    }

    /// Deletes the nonces that left the replay window (the server does this every 30 seconds); returns how many.
    @discardableResult
    public func forgetExpiredNonces() async -> Int {
        await service.forgetExpiredNonces()
    }

    /// Writes every refusal counted so far to the audit log (the server does this each minute and when it stops).
    public func flushAudit() async {
        await service.flushRefusals(everything: true)
    }

    /// Serves until the calling task is cancelled, then shuts down gracefully (open requests finish): for tests and
    /// programs that manage the server as a task. Under a `ServiceGroup`, run a ``KeyServerService`` instead.
    ///
    /// - Parameters:
    ///   - host: The address to bind; loopback by default (plain HTTP belongs on loopback only: put TLS in front
    ///     otherwise).
    ///   - port: The port; 0 lets the OS pick a free one.
    ///   - onListening: Called once with the bound address (with the real port when 0 was asked for).
    /// - Throws: The server's error when it cannot bind.
    public func run(
        host: String = "127.0.0.1",
        port: Int = 0,
        onListening: @escaping @Sendable (Address) async -> Void = { _ in }
    ) async throws {
        // A group of its own, in its own task, so that cancelling the caller becomes a graceful shutdown rather than a
        // cancellation of every open connection.
        let service = KeyServerService(self, host: host, port: port, onListening: onListening)
        let group = ServiceGroup(configuration: .init(services: [service], gracefulShutdownSignals: [], logger: logger))
        let runner = Task { try await group.run() }
        try await withTaskCancellationHandler {
            try await runner.value
        } onCancel: {
            Task { await group.triggerGracefulShutdown() }
        }
    }

    /// Serves until the enclosing service group shuts down gracefully; then flushes the refusal counts.
    func serve(host: String, port: Int, onListening: @escaping @Sendable (Address) async -> Void) async throws {
        let app = Application(
            router: makeRouter(),
            server: connectionLimits.server,
            configuration: connectionLimits.configuration(address: .hostname(host, port: port), serverName: "stowage-keyserver"),
            onServerRunning: { channel in
                await onListening(Address(host: host, port: channel.localAddress?.port ?? 0))
            },
            logger: logger
        )
        // Refusals are aggregated in memory and written once a minute, not one write per refused request.
        let service = self.service
        let flusher = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(60))
                await service.flushRefusals()
            }
        }
        // The replay window's nonces are forgotten every 30 seconds, off the requests' path.
        let cleaner = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(30))
                if !Task.isCancelled { await service.forgetExpiredNonces() }
            }
        }
        defer {
            flusher.cancel()
            cleaner.cancel()
        }
        var failure: (any Error)?
        do {
            try await app.run()
        } catch {
            failure = error
        }
        // In a task of its own: the caller's task may be cancelled by now, and the store refuses work from a cancelled
        // task.
        await Task { await service.flushRefusals(everything: true) }.value
        if let failure { throw failure }
    }
}

/// The key server as a swift-service-lifecycle `Service`: `stowage keyserver run` runs it in a `ServiceGroup` that
/// turns SIGTERM and SIGINT into a graceful shutdown (open requests finish, refusal counts are written).
///
/// ```swift
/// let server = try await KeyServerApplication(dataDirectory: KeyServerDataDirectory(path: "/srv/keys"))
/// let group = ServiceGroup(services: [KeyServerService(server, port: 8443)], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public struct KeyServerService: Service {
    public let application: KeyServerApplication
    public let host: String
    public let port: Int
    let onListening: @Sendable (KeyServerApplication.Address) async -> Void

    /// - Parameter onListening: called once with the bound address (with the real port when 0 was asked for).
    public init(
        _ application: KeyServerApplication,
        host: String = "127.0.0.1",
        port: Int = 0,
        onListening: @escaping @Sendable (KeyServerApplication.Address) async -> Void = { _ in }
    ) {
        self.application = application
        self.host = host
        self.port = port
        self.onListening = onListening
    }

    public func run() async throws {
        try await application.serve(host: host, port: port, onListening: onListening)
    }
}
