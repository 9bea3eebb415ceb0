public import Foundation
import Hummingbird
public import Logging
import NIOCore
import ServiceLifecycle

/// A loopback HLS origin: serves a directory over HTTP/1.1 with Range, ETag and Last-Modified support.
///
/// Tests, the demo and users' own experiments point a downloader at it. It binds 127.0.0.1 by default and an
/// OS-assigned port when `port` is 0; ``run(onListening:)`` reports the address once the socket is bound.
///
/// ```swift
/// let origin = Origin(configuration: .init(root: "/srv/hls"))
/// try await origin.run { address in print("listening on \(address.baseURL)") }
/// ```
public struct Origin: Sendable {
    /// Where and what to serve.
    public struct Configuration: Sendable {
        /// The directory served at `/`.
        public var root: String
        public var host: String
        /// 0 lets the OS pick a free port.
        public var port: Int

        public init(root: String, host: String = "127.0.0.1", port: Int = 0) {
            self.root = root
            self.host = host
            self.port = port
        }
    }

    /// The address the origin listens on.
    public struct Address: Sendable, Hashable {
        public var host: String
        public var port: Int

        /// `http://HOST:PORT`
        public var baseURL: URL { URL(string: "http://\(host):\(port)")! }
    }

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

    /// Serves until the calling task is cancelled, then shuts down gracefully (open requests finish).
    /// - Parameter onListening: called once with the bound address (with the real port when 0 was asked for).
    /// - Throws: ``OriginError`` when the root is not a directory; the server's error when it cannot bind.
    public func run(onListening: @escaping @Sendable (Address) async -> Void) async throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: configuration.root, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw OriginError.notADirectory(configuration.root)
        }
        let router = Router()
        router.add(middleware: FileMiddleware(configuration.root, searchForIndexHtml: false, logger: logger))
        let host = configuration.host
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: configuration.port), serverName: "stowage-origin"),
            onServerRunning: { channel in
                await onListening(Address(host: host, port: channel.localAddress?.port ?? 0))
            },
            logger: logger
        )
        // The service group runs in its own task so that cancelling the caller becomes a graceful shutdown rather
        // than a cancellation of every open connection.
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        let runner = Task { try await group.run() }
        try await withTaskCancellationHandler {
            try await runner.value
        } onCancel: {
            Task { await group.triggerGracefulShutdown() }
        }
    }
}

/// Why an origin cannot start.
public enum OriginError: Error, Hashable, Sendable, CustomStringConvertible {
    case notADirectory(String)

    public var description: String {
        switch self {
        case .notADirectory(let path): "cannot serve \(path): it is not a directory"
        }
    }
}
