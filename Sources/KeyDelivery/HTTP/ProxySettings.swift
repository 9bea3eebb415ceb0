public import Foundation
public import StowageCore

/// The proxies Stowage's HTTP requests go through, as curl and yt-dlp read them: `--proxy URL` for every request, or
/// the environment (`HTTPS_PROXY` for https URLs, `HTTP_PROXY` for http ones, `ALL_PROXY` for both, each also in lower
/// case), with `NO_PROXY` naming the hosts reached directly.
///
/// A proxy is `http://[USER:PASSWORD@]HOST[:PORT]` (plain HTTP to the proxy; https origins are tunnelled with CONNECT,
/// so the proxy sees host names, never content), or `socks5://` / `socks5h://HOST[:PORT]`. The port defaults to 1080,
/// as curl's does. `NO_PROXY` is a comma-separated list of host names (each also matching its subdomains, with or
/// without a leading dot), IP addresses, or `*` for every host.
///
/// ```swift
/// let proxy = try ProxySettings(proxy: "http://proxy.example:3128", noProxy: "localhost,.internal")
/// proxy.server(for: URL(string: "https://cdn.example/master.m3u8")!)   // proxy.example:3128
/// proxy.server(for: URL(string: "http://keys.internal/v1/keys")!)      // nil: reached directly
/// ```
public struct ProxySettings: Sendable, Hashable {
    /// The proxy for `http://` URLs; nil: direct.
    public var http: ProxyServer?
    /// The proxy for `https://` URLs; nil: direct.
    public var https: ProxyServer?
    /// Hosts reached directly, lowercase; `*` for all.
    public var noProxy: [String]

    /// No proxy.
    public static let direct = ProxySettings(http: nil, https: nil, noProxy: [])

    public init(http: ProxyServer?, https: ProxyServer?, noProxy: [String]) {
        self.http = http
        self.https = https
        self.noProxy = noProxy
    }

    /// One proxy for every request (`--proxy`); an empty `proxy` means none (a direct connection, whatever the
    /// environment says).
    ///
    /// - Throws: ``ProxyError`` for a proxy URL Stowage cannot use.
    public init(proxy: String, noProxy: String? = nil) throws(ProxyError) {
        let server = proxy.isEmpty ? nil : try ProxyServer(parsing: proxy)
        self.init(http: server, https: server, noProxy: Self.hosts(noProxy ?? ""))
    }

    /// The proxies the environment names (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`; the lower-case
    /// names win, as in curl).
    ///
    /// - Throws: ``ProxyError`` naming the variable whose proxy URL Stowage cannot use.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(ProxyError) -> ProxySettings {
        func value(_ name: String) -> (name: String, value: String)? {
            for candidate in [name.lowercased(), name] {
                if let value = environment[candidate], !value.isEmpty { return (candidate, value) }
            }
            return nil
        }
        func server(_ name: String) throws(ProxyError) -> ProxyServer? {
            guard let (variable, text) = value(name) ?? value("ALL_PROXY") else { return nil }
            do {
                return try ProxyServer(parsing: text)
            } catch {
                throw ProxyError(proxy: error.proxy, variable: variable, reason: error.reason)
            }
        }
        return ProxySettings(http: try server("HTTP_PROXY"), https: try server("HTTPS_PROXY"), noProxy: hosts(value("NO_PROXY")?.value ?? ""))
    }

    /// The proxy a request for `url` goes through; nil: a direct connection.
    public func server(for url: URL) -> ProxyServer? {
        let server: ProxyServer? =
            switch url.scheme?.lowercased() {
            case "https": https
            case "http": http
            default: nil
            }
        guard let server, let host = url.host?.lowercased(), !bypasses(host) else { return nil }
        return server
    }

    /// Whether `NO_PROXY` names `host` (lowercase): `*`, the host itself, or a domain it is in.
    func bypasses(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        for entry in noProxy {
            if entry == "*" || entry == bare || bare.hasSuffix("." + entry) { return true }
        }
        return false
    }

    /// `NO_PROXY`'s entries: lowercase, without a leading dot, a port or IPv6 brackets.
    static func hosts(_ list: String) -> [String] {
        list.split(separator: ",").compactMap { entry in
            var host = entry.trimmingCharacters(in: .whitespaces).lowercased()
            if host.hasPrefix("[") {
                host = String(host.dropFirst().prefix { $0 != "]" })
            } else if host.filter({ $0 == ":" }).count == 1 {
                host = String(host.prefix { $0 != ":" })
            }
            while host.hasPrefix(".") { host.removeFirst() }
            return host.isEmpty ? nil : host
        }
    }
}

/// One proxy server.
public struct ProxyServer: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// An HTTP proxy: absolute URIs for http, CONNECT tunnels for https.
        case http
        /// A SOCKS5 proxy; host names are resolved by the proxy.
        case socks5
    }

    public var kind: Kind
    public var host: String
    public var port: Int
    /// `Proxy-Authorization: Basic` credentials (HTTP proxies only).
    public var username: String?
    public var password: String?

    /// Parses `http://[USER:PASSWORD@]HOST[:PORT]`, `socks5://HOST[:PORT]`, `socks5h://HOST[:PORT]`, or `HOST:PORT`
    /// (an HTTP proxy, as curl reads it).
    ///
    /// - Throws: ``ProxyError`` for another scheme, no host, a bad port, or credentials on a SOCKS proxy.
    public init(parsing text: String) throws(ProxyError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let withScheme = trimmed.contains("://") ? trimmed : "http://" + trimmed
        guard let components = URLComponents(string: withScheme), let scheme = components.scheme?.lowercased() else {
            throw ProxyError(proxy: text, reason: "it is not a URL")
        }
        switch scheme {
        case "http": kind = .http
        case "socks5", "socks5h": kind = .socks5
        case "https":
            throw ProxyError(
                proxy: text,
                reason: "TLS to the proxy itself (https://) is not supported; https origins still go through an http:// proxy encrypted, by CONNECT"
            )
        default:
            throw ProxyError(proxy: text, reason: "the scheme \(scheme) is not one Stowage speaks (http, socks5, socks5h)")
        }
        guard let host = components.host, !host.isEmpty else { throw ProxyError(proxy: text, reason: "it names no host") }
        guard components.path.isEmpty || components.path == "/", components.query == nil else {
            throw ProxyError(proxy: text, reason: "a proxy URL has no path or query")
        }
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let port = components.port ?? 1080
        guard (1...65535).contains(port) else { throw ProxyError(proxy: text, reason: "the port \(port) is not between 1 and 65535") }
        self.port = port
        username = components.user?.removingPercentEncoding
        password = components.password?.removingPercentEncoding
        if kind == .socks5, username != nil {
            throw ProxyError(proxy: text, reason: "SOCKS proxies with a user name and password are not supported")
        }
    }

    /// `KIND://HOST:PORT`, without credentials.
    public var description: String { "\(kind == .http ? "http" : "socks5h")://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

/// A proxy URL that cannot be used.
public struct ProxyError: StowageError, Hashable {
    /// The proxy URL as given; credentials in it are never shown.
    public let proxy: String
    /// The environment variable it came from, if any.
    public var variable: String?
    public let reason: String

    public init(proxy: String, variable: String? = nil, reason: String) {
        self.proxy = proxy
        self.variable = variable
        self.reason = reason
    }

    public var code: ErrorCode { .invalidProxy }
    public var message: String {
        let source = variable.map { "the proxy in \($0) (\(shown))" } ?? "the proxy \(shown)"
        return "\(source) cannot be used: \(reason); give http://HOST:PORT or socks5://HOST:PORT"
    }
    public var description: String { message }

    /// The URL with any password replaced by `***`.
    private var shown: String {
        guard var components = URLComponents(string: proxy), components.password != nil else { return proxy }
        components.password = "***"
        return components.string ?? "(a proxy URL)"
    }
}
