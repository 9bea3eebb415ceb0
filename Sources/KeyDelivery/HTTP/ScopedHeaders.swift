public import Foundation

/// Extra request headers the user gave (`--header 'Cookie: ...'`), with the hosts they may be sent to: the host of the
/// playlist the user asked for, plus the hosts named with `--header-host`. A hostile playlist that points a segment,
/// a rendition or a key at another host gets none of them.
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
    /// Lowercase host names the headers go to.
    public var hosts: Set<String>
    /// The user agent, referer and cookies, each sent as its own rule says (``BrowserHeaders``).
    public var browser: BrowserHeaders

    /// - Parameters:
    ///   - pairs: the headers.
    ///   - playlistURL: the playlist the user asked for; its host is allowed (nothing for a local file).
    ///   - extraHosts: more hosts the user allowed.
    ///   - browser: the user agent, referer and cookies.
    public init(_ pairs: [(String, String)], playlistURL: URL?, extraHosts: [String] = [], browser: BrowserHeaders = .none) {
        self.pairs = pairs.map { [$0.0, $0.1] }
        self.browser = browser
        var hosts = Set(extraHosts.map { $0.lowercased() })
        if let host = playlistURL?.host?.lowercased(), playlistURL?.isFileURL == false { hosts.insert(host) }
        self.hosts = hosts
    }

    /// No headers at all.
    public static let none = ScopedHeaders([], playlistURL: nil)

    /// The headers to send with a request for `url`: the user's when its host is allowed, and what ``browser`` sends
    /// it (a name the user's headers already give is not sent twice).
    public func `for`(_ url: URL) -> [(String, String)] {
        var headers: [(String, String)] = []
        if let host = url.host?.lowercased(), hosts.contains(host) { headers = pairs.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil } }
        let given = Set(headers.map { $0.0.lowercased() })
        return headers + browser.headers(for: url).filter { !given.contains($0.0.lowercased()) }
    }
}
