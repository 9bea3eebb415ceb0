public import Hummingbird
public import HummingbirdCore
import NIOCore

/// The limits every Stowage HTTP server puts on its clients, so that slow or idle connections cannot take a server
/// from the others (docs/RELIABILITY.md, "Hostile peers"):
///
/// - at most ``maxConnections`` connections at once; past it, new ones wait in the listen backlog until one closes;
/// - a request's head must arrive whole within ``headTimeout`` of the connection opening or of the previous response
///   ending (a client that sends a byte every few seconds, or connects and says nothing, is closed then);
/// - a request's body must arrive whole within ``bodyTimeout`` of its head;
/// - a connection on which nothing is read for ``idleTimeout`` is closed (Hummingbird's idle handler).
///
/// A response is never cut short by these limits: a player reading a long segment slowly keeps its connection.
///
/// ```swift
/// let limits = ConnectionLimits.standard
/// let app = Application(router: router, server: limits.server, configuration: limits.configuration(address: address, serverName: "x"))
/// ```
public struct ConnectionLimits: Sendable, Hashable {
    /// The most connections served at once.
    public var maxConnections: Int
    /// The longest a request's head may take to arrive.
    public var headTimeout: Duration
    /// The longest a request's body may take to arrive after its head.
    public var bodyTimeout: Duration
    /// The longest a connection may stay without reading anything.
    public var idleTimeout: Duration

    public init(
        maxConnections: Int = 1024,
        headTimeout: Duration = .seconds(15),
        bodyTimeout: Duration = .seconds(30),
        idleTimeout: Duration = .seconds(60)
    ) {
        self.maxConnections = maxConnections
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
        self.idleTimeout = idleTimeout
    }

    /// 1,024 connections, 15 s for a head, 30 s for a body, 60 s idle.
    public static let standard = ConnectionLimits()

    /// The HTTP/1.1 server with these limits, for `Application(server:)`.
    public var server: HTTPServerBuilder {
        let head = TimeAmount(headTimeout)
        let body = TimeAmount(bodyTimeout)
        return .http1(
            configuration: .init(
                additionalChannelHandlers: [RequestDeadlineHandler(headTimeout: head, bodyTimeout: body)],
                idleTimeout: TimeAmount(idleTimeout)
            )
        )
    }

    /// The application configuration with the connection cap.
    public func configuration(address: BindAddress, serverName: String) -> ApplicationConfiguration {
        ApplicationConfiguration(
            address: address,
            serverName: serverName,
            availableConnectionsDelegate: MaximumAvailableConnections(maxConnections)
        )
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
