public import Foundation

/// Extra request headers the user gave (`--header-file`), with where they may be sent: the origin of the playlist the
/// user asked for (its scheme, host and port), plus the hosts named with `--header-host`, and never in the clear when
/// the playlist was fetched over https. A hostile playlist that points a segment, a rendition or a key at another
/// host, another port of the same host, or plain http gets none of them.
///
/// On a redirect to another origin AsyncHTTPClient drops `Authorization`, `Cookie` and `Proxy-Authorization`, as
/// browsers do; other header names follow a redirect the allowed host itself chose to answer with.
///
/// ```swift
/// let headers = ScopedHeaders([("Cookie", "session=1")], playlistURL: url, extraHosts: ["cdn.example.com"])
/// for (name, value) in headers.for(segmentURL) { request.headers.add(name: name, value: value) }
/// ```
public struct ScopedHeaders: Sendable, Hashable {
    /// `[name, value]` pairs.
    public var pairs: [[String]]
    /// Lowercase host names the headers go to: the `--header-host` hosts (any port), and the playlist's host (on its
    /// own port only, ``playlistPort``).
    public var hosts: Set<String>
    /// The user agent, referer and cookies, each sent as its own rule says (``BrowserHeaders``).
    public var browser: BrowserHeaders
    /// The playlist's host and port (the scheme's default when it names none); nil without a remote playlist.
    public var playlistHost: String?
    public var playlistPort: Int?
    /// Whether the headers may go over plain http: only when the user's playlist itself was http.
    public var plainHTTPAllowed: Bool

    /// - Parameters:
    ///   - pairs: the headers.
    ///   - playlistURL: the playlist the user asked for; its host is allowed (nothing for a local file).
    ///   - extraHosts: more hosts the user allowed.
    ///   - browser: the user agent, referer and cookies.
    public init(_ pairs: [(String, String)], playlistURL: URL?, extraHosts: [String] = [], browser: BrowserHeaders = .none) {
        self.pairs = pairs.map { [$0.0, $0.1] }
        self.browser = browser
        self.hosts = Set(extraHosts.map { $0.lowercased() })
        if let playlistURL, !playlistURL.isFileURL, let host = playlistURL.host?.lowercased() {
            playlistHost = host
            playlistPort = Self.port(of: playlistURL)
        }
        plainHTTPAllowed = playlistURL?.scheme?.lowercased() == "http"
    }

    /// `url`'s port, or its scheme's default.
    static func port(of url: URL) -> Int? {
        url.port ?? (url.scheme?.lowercased() == "https" ? 443 : url.scheme?.lowercased() == "http" ? 80 : nil)
    }

    /// Whether the user's headers go to `url`: the playlist's own origin, or a `--header-host`, and over https unless
    /// the playlist itself was plain http.
    public func allows(_ url: URL) -> Bool {
        guard let host = url.host?.lowercased(), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http" else {
            return false
        }
        if scheme == "http", !plainHTTPAllowed { return false }
        if host == playlistHost, Self.port(of: url) == playlistPort { return true }
        return hosts.contains(host)
    }

    /// No headers at all.
    public static let none = ScopedHeaders([], playlistURL: nil)

    /// The headers to send with a request for `url`: the user's when its host is allowed, and what ``browser`` sends
    /// it (a name the user's headers already give is not sent twice).
    public func `for`(_ url: URL) -> [(String, String)] {
        var headers: [(String, String)] = []
        if allows(url) { headers = pairs.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil } }
        let given = Set(headers.map { $0.0.lowercased() })
        return headers + browser.headers(for: url).filter { !given.contains($0.0.lowercased()) }
    }
}
