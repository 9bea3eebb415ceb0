public import AsyncHTTPClient
public import Foundation

/// The HTTP clients one purpose (segments, keys) uses, a request's URL choosing among them: a direct one and, when
/// ``ProxySettings`` name proxies, one per proxy. AsyncHTTPClient sets its proxy per client, not per request, and
/// `NO_PROXY` is per host, so a route is a client.
///
/// ```swift
/// let routes = try HTTPRoutes(configuration: configuration, proxy: .fromEnvironment())
/// let response = try await routes.client(for: url).execute(request, timeout: .seconds(30))
/// try await routes.shutdown()
/// ```
public struct HTTPRoutes: Sendable {
    /// The client for requests that go to their host directly.
    public let direct: HTTPClient
    /// Where requests go.
    public let proxy: ProxySettings
    private let proxied: [ProxyServer: HTTPClient]

    /// Routes every request through `client` (no proxy). The caller owns `client` and shuts it down.
    public init(_ client: HTTPClient) {
        direct = client
        proxy = .direct
        proxied = [:]
    }

    /// Makes the clients: one with `configuration`, and one more per proxy `proxy` names (the same configuration with
    /// the proxy set). Shut them down with ``shutdown()``.
    public init(configuration: HTTPClient.Configuration, proxy: ProxySettings) {
        direct = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.proxy = proxy
        var proxied: [ProxyServer: HTTPClient] = [:]
        for server in [proxy.http, proxy.https].compactMap({ $0 }) where proxied[server] == nil {
            var through = configuration
            switch server.kind {
            case .http:
                let authorization = server.username.map { HTTPClient.Authorization.basic(username: $0, password: server.password ?? "") }
                through.proxy = .server(host: server.host, port: server.port, authorization: authorization)
            case .socks5:
                through.proxy = .socksServer(host: server.host, port: server.port)
            }
            proxied[server] = HTTPClient(eventLoopGroupProvider: .singleton, configuration: through)
        }
        self.proxied = proxied
    }

    /// The client a request for `url` goes through.
    public func client(for url: URL) -> HTTPClient {
        proxy.server(for: url).flatMap { proxied[$0] } ?? direct
    }

    /// The client a request for the URL `text` goes through (the direct one when it does not parse).
    public func client(for text: String) -> HTTPClient {
        URL(string: text).map { client(for: $0) } ?? direct
    }

    /// Every client, the direct one first.
    public var clients: [HTTPClient] { [direct] + proxied.values }

    /// Shuts every client down.
    public func shutdown() async throws {
        for client in clients { try await client.shutdown() }
    }
}
