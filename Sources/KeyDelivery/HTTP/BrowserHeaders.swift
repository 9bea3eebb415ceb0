public import Foundation
public import StowageCore

/// What a user brings from a browser session to reach a stream, as with yt-dlp and N_m3u8DL-RE: a `User-Agent`, a
/// `Referer`, and cookies from a Netscape cookie file (`--cookies FILE`, the format curl, wget, yt-dlp and the
/// browsers' cookie export extensions write).
///
/// The user agent and referer go with every request of the download; each cookie only to the hosts its line names
/// (the domain, and its subdomains when the line says so), under its path, and over https only when marked secure,
/// as a browser sends it. A hostile playlist that points a segment or a key at another host gets no cookie.
///
/// ```swift
/// let browser = BrowserHeaders(userAgent: "Mozilla/5.0", referer: "https://site.example/watch",
///                              cookies: try BrowserHeaders.cookies(inFile: "cookies.txt", at: Date()))
/// browser.headers(for: URL(string: "https://cdn.site.example/v/1.ts")!)
/// ```
public struct BrowserHeaders: Sendable, Hashable, Codable {
    public var userAgent: String?
    public var referer: String?
    public var cookies: [Cookie]

    public init(userAgent: String? = nil, referer: String? = nil, cookies: [Cookie] = []) {
        self.userAgent = userAgent?.isEmpty == false ? userAgent : nil
        self.referer = referer?.isEmpty == false ? referer : nil
        self.cookies = cookies
    }

    /// None at all.
    public static let none = BrowserHeaders()

    public var isEmpty: Bool { self == .none }

    /// One line of a cookie file.
    public struct Cookie: Sendable, Hashable, Codable {
        /// Lowercase, without a leading dot.
        public var domain: String
        /// Whether subdomains of ``domain`` get it too.
        public var includeSubdomains: Bool
        public var path: String
        /// Sent over https only.
        public var secure: Bool
        /// When it expires; nil for a session cookie.
        public var expires: Date?
        public var name: String
        public var value: String

        /// Whether a request for `url` carries this cookie (RFC 6265 section 5.4: domain, path and secure match).
        public func matches(_ url: URL) -> Bool {
            guard let host = url.host?.lowercased(), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                return false
            }
            guard host == domain || (includeSubdomains && host.hasSuffix("." + domain)) else { return false }
            if secure && scheme != "https" { return false }
            let requestPath = url.path.isEmpty ? "/" : url.path
            guard requestPath.hasPrefix(path) else { return false }
            return requestPath.count == path.count || path.hasSuffix("/") || requestPath.dropFirst(path.count).first == "/"
        }
    }

    /// The headers a request for `url` carries: `User-Agent`, `Referer`, and one `Cookie` with every matching cookie.
    public func headers(for url: URL) -> [(String, String)] {
        var headers: [(String, String)] = []
        if let userAgent { headers.append(("User-Agent", userAgent)) }
        if let referer { headers.append(("Referer", referer)) }
        let matching = cookies.filter { $0.matches(url) }
        if !matching.isEmpty { headers.append(("Cookie", matching.map { "\($0.name)=\($0.value)" }.joined(separator: "; "))) }
        return headers
    }

    /// Reads a Netscape cookie file: `#` comments and blank lines aside (a `#HttpOnly_` prefix is part of the domain
    /// field, as curl writes it), each line is seven tab-separated fields: domain, include-subdomains (`TRUE` or
    /// `FALSE`), path, secure, expiry (Unix seconds, 0 for a session cookie), name, value. Cookies that expired
    /// before `now` are left out.
    ///
    /// - Throws: ``CookieFileError`` `invalid_cookie_file` for an unreadable file, a line of another shape (naming
    ///   it), or a file with no cookie left to send.
    public static func cookies(inFile path: String, at now: Date) throws(CookieFileError) -> [Cookie] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CookieFileError(path: path, reason: "it cannot be read (\(FileErrorText.describe(error)))")
        }
        guard data.count <= 16 << 20 else { throw CookieFileError(path: path, reason: "it is larger than 16 MB") }
        guard let text = String(data: data, encoding: .utf8) else { throw CookieFileError(path: path, reason: "it is not UTF-8 text") }
        var cookies: [Cookie] = []
        var expired: Date?
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).enumerated() {
            var line = Substring(raw)
            if line.hasSuffix("\r") { line = line.dropLast() }
            if line.hasPrefix("#HttpOnly_") {
                line = line.dropFirst("#HttpOnly_".count)
            } else if line.hasPrefix("#") || line.allSatisfy(\.isWhitespace) {
                continue
            }
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            func refuse(_ what: String) -> CookieFileError {
                CookieFileError(
                    path: path,
                    reason:
                        "line \(index + 1) \(what); a cookie line is 7 tab-separated fields (domain, TRUE/FALSE, path, TRUE/FALSE, expiry, name, value)"
                )
            }
            guard fields.count == 7 else { throw refuse("has \(fields.count) field\(fields.count == 1 ? "" : "s")") }
            let flags = [fields[1], fields[3]].map { $0.uppercased() }
            guard flags.allSatisfy({ $0 == "TRUE" || $0 == "FALSE" }) else { throw refuse("has a flag that is neither TRUE nor FALSE") }
            guard let seconds = Int64(fields[4]), seconds >= 0 else { throw refuse("has an expiry that is not a whole number of seconds") }
            let name = String(fields[5])
            let value = String(fields[6])
            let forbidden: (Character) -> Bool = { $0 == ";" || $0 == "\r" || $0 == "\n" || $0 == "\0" }
            guard !name.isEmpty, !name.contains(where: { forbidden($0) || $0 == "=" || $0.isWhitespace }), !value.contains(where: forbidden) else {
                throw refuse("has a cookie name or value that cannot go in a Cookie header")
            }
            var domain = fields[0].lowercased()
            let leadingDot = domain.hasPrefix(".")
            while domain.hasPrefix(".") { domain.removeFirst() }
            guard !domain.isEmpty else { throw refuse("names no domain") }
            let expires = seconds == 0 ? nil : Date(timeIntervalSince1970: TimeInterval(seconds))
            if let expires, expires <= now {
                expired = max(expired ?? expires, expires)
                continue
            }
            let path = fields[2].isEmpty ? "/" : String(fields[2])
            cookies.append(
                Cookie(
                    domain: domain,
                    includeSubdomains: flags[0] == "TRUE" || leadingDot,
                    path: path,
                    secure: flags[1] == "TRUE",
                    expires: expires,
                    name: name,
                    value: value
                )
            )
        }
        guard !cookies.isEmpty else {
            if let expired {
                throw CookieFileError(
                    path: path,
                    reason:
                        "every cookie in it has expired, the last on \(HumanTime.date(Int64(expired.timeIntervalSince1970))); export them again from the browser"
                )
            }
            throw CookieFileError(path: path, reason: "it holds no cookie lines")
        }
        return cookies
    }
}

/// A cookie file that cannot be used.
public struct CookieFileError: StowageError, Hashable {
    public let path: String
    public let reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var code: ErrorCode { .invalidCookieFile }
    public var message: String { "the cookie file \(path) cannot be used: \(reason)" }
    public var subject: ErrorSubject { ErrorSubject(path: path) }
    public var description: String { message }
}
