public import Foundation
public import HTTPServing
import Hummingbird
public import Logging
import NIOCore
import NIOPosix
public import ServiceLifecycle
public import StowageCore

/// A loopback HLS origin: serves a directory over HTTP/1.1 with Range, ETag and Last-Modified support, and shapes
/// the link like Apple's Network Link Conditioner.
///
/// Tests, the demo and users' own experiments point a downloader at it. It binds 127.0.0.1 by default and an
/// OS-assigned port when `port` is 0; ``run(onListening:)`` reports the address once the socket is bound.
///
/// It answers GET and HEAD for regular files under the root (symbolic links are followed only while they stay under
/// it) and 404 for anything else; a single byte range gets 206, an unsatisfiable one 416, several ranges the whole
/// file. Unconditioned, bodies stream from the file in 256 KiB chunks as fast as the connection takes them; with
/// ``NetworkConditions`` they are slowed and broken as the conditions say, the same way for the same ``Configuration/seed``.
///
/// ```swift
/// let log = OriginRequestLog()
/// let origin = Origin(configuration: .init(root: "/srv/hls", conditions: .profile(named: "lossy")!, seed: 7, requestLog: log))
/// try await origin.run { address in print("listening on \(address.baseURL)") }
/// ```
public struct Origin: Sendable {
    /// Where and what to serve.
    public struct Configuration: Sendable {
        /// The directory served at `/`.
        public var root: String
        /// The address to bind; loopback by default.
        public var host: String
        /// 0 lets the OS pick a free port.
        public var port: Int
        /// How responses are slowed and broken; ``NetworkConditions/unconditioned`` by default.
        public var conditions: NetworkConditions
        /// Fixes which requests fault: the same seed and the same requests per path give the same faults.
        public var seed: UInt64
        /// Where every request is recorded, if anywhere.
        public var requestLog: OriginRequestLog?
        /// Serve complete media playlists as live streams (``LiveSimulation``); nil serves files as they are.
        public var live: LiveSimulation?
        /// The connection cap and request deadlines (``HTTPServing/ConnectionLimits/standard`` by default).
        public var connectionLimits: ConnectionLimits = .standard

        /// - Parameters:
        ///   - root: the directory served at `/`.
        ///   - host: the address to bind.
        ///   - port: the port to bind; 0 lets the OS pick.
        ///   - conditions: how responses are shaped.
        ///   - seed: which requests fault, for rates between 0 and 1.
        ///   - requestLog: where to record requests.
        ///   - live: serve complete media playlists as live streams.
        public init(
            root: String,
            host: String = "127.0.0.1",
            port: Int = 0,
            conditions: NetworkConditions = .unconditioned,
            seed: UInt64 = 0,
            requestLog: OriginRequestLog? = nil,
            live: LiveSimulation? = nil
        ) {
            self.live = live
            self.root = root
            self.host = host
            self.port = port
            self.conditions = conditions
            self.seed = seed
            self.requestLog = requestLog
        }
    }

    /// The address the origin listens on.
    public struct Address: Sendable, Hashable {
        /// The bound host, as configured.
        public var host: String
        /// The bound port.
        public var port: Int

        /// `http://HOST:PORT`
        public var baseURL: URL { URL(string: "http://\(host):\(port)")! }
    }

    /// What the origin serves and how.
    public let configuration: Configuration
    private let logger: Logger

    /// - Parameters:
    ///   - configuration: what to serve and where.
    ///   - logger: the server's logger; by default only warnings and errors are logged.
    public init(configuration: Configuration, logger: Logger? = nil) {
        self.configuration = configuration
        var fallback = Logger(label: "stowage.origin")
        fallback.logLevel = .warning
        self.logger = logger ?? fallback
    }

    /// Serves until the calling task is cancelled, then shuts down gracefully (open requests finish): for tests and
    /// programs that manage the origin as a task. Under a `ServiceGroup`, run an ``OriginService`` instead.
    /// - Parameter onListening: called once with the bound address (with the real port when 0 was asked for).
    /// - Throws: ``OriginError`` when the root is not a directory; the server's error when it cannot bind.
    public func run(onListening: @escaping @Sendable (Address) async -> Void) async throws {
        // A group of its own, in its own task, so that cancelling the caller becomes a graceful shutdown rather than
        // a cancellation of every open connection.
        let group = ServiceGroup(
            configuration: .init(services: [OriginService(self, onListening: onListening)], gracefulShutdownSignals: [], logger: logger)
        )
        let runner = Task { try await group.run() }
        try await withTaskCancellationHandler {
            try await runner.value
        } onCancel: {
            Task { await group.triggerGracefulShutdown() }
        }
    }

    /// Serves until the enclosing service group shuts down gracefully.
    func serve(onListening: @escaping @Sendable (Address) async -> Void) async throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: configuration.root, isDirectory: &isDirectory), isDirectory.boolValue,
            let resolvedRoot = ServedFile.realPath(configuration.root)
        else {
            throw OriginError.notADirectory(configuration.root)
        }
        let responder = FileResponder(
            resolvedRoot: resolvedRoot,
            conditions: configuration.conditions,
            seed: configuration.seed,
            requestLog: configuration.requestLog,
            threadPool: .singleton,
            live: configuration.live.map { LivePlaylists(simulation: $0) }
        )
        let host = configuration.host
        let app = Application(
            responder: responder,
            server: configuration.connectionLimits.server,
            configuration: configuration.connectionLimits.configuration(
                address: .hostname(host, port: configuration.port),
                serverName: "stowage-origin"
            ),
            onServerRunning: { channel in
                await onListening(Address(host: host, port: channel.localAddress?.port ?? 0))
            },
            logger: logger
        )
        try await app.run()
    }
}

/// The origin as a swift-service-lifecycle `Service`: `stowage origin` runs it in a `ServiceGroup` that turns SIGTERM
/// and SIGINT into a graceful shutdown.
public struct OriginService: Service {
    public let origin: Origin
    let onListening: @Sendable (Origin.Address) async -> Void

    /// - Parameter onListening: called once with the bound address (with the real port when 0 was asked for).
    public init(_ origin: Origin, onListening: @escaping @Sendable (Origin.Address) async -> Void = { _ in }) {
        self.origin = origin
        self.onListening = onListening
    }

    public func run() async throws {
        try await origin.serve(onListening: onListening)
    }
}

/// Why an origin cannot start.
public enum OriginError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The configured root does not exist or is not a directory.
    case notADirectory(String)

    /// What went wrong, for people.

    public var description: String {
        switch self {
        case .notADirectory(let path): "cannot serve \(path): it is not a directory"
        }
    }
}

extension OriginError: StowageError {
    public var code: ErrorCode {
        switch self {
        case .notADirectory: .originRootInvalid
        }
    }

    public var message: String {
        switch self {
        case .notADirectory(let path): "Cannot serve \(path): it is not a directory. Give the folder that holds the playlists."
        }
    }
}
