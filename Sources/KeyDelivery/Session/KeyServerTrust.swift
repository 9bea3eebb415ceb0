public import Foundation

/// Which key server a download may send its entitlement token to (docs/SECURITY.md, "whom to trust").
///
/// Keys are requested only from a key server the user configured (`--key-server`, `--trust-key-server`, or
/// `key-servers.json` in the data directory) or, when the playlist advertises one with `EXT-X-SESSION-DATA
/// com.stowage.key-server`, only if it is on the same host as the playlist the user asked for and uses `https` (plain
/// `http` only when that host is a loopback address). Anything else is refused with `untrusted_key_server` before a
/// single request is sent, so a hostile playlist cannot collect the bearer token or get its own signing key pinned.
///
/// ```swift
/// let trust = try KeyServerTrust(configured: ["https://keys.example.com"])
/// let server = try trust.choose(explicit: nil, advertised: plan.advertisedKeyServer, playlistURL: url)
/// ```
public struct KeyServerTrust: Sendable, Hashable {
    /// The normalized URLs the user trusts.
    public var configured: Set<String>

    /// - Parameter configured: URLs the user trusts; each must be `https`, or `http` on a loopback address.
    /// - Throws: ``KeySessionError`` `insecure_key_server`, `invalid_request` for a URL that is not http(s).
    public init(configured: [String] = []) throws {
        var normalized: Set<String> = []
        for text in configured {
            guard let url = URL(string: text), let key = KeyServerURL.normalized(url) else {
                throw KeySessionError.invalidRequest("\(text) is not an http(s) key server URL")
            }
            try Self.requireSecureTransport(url)
            normalized.insert(key)
        }
        self.configured = normalized
    }

    /// The key server to use.
    ///
    /// - Parameters:
    ///   - explicit: the URL the user named for this download (`--key-server`); always used (after the transport
    ///     check).
    ///   - advertised: the URL the multivariant playlist advertises, if any.
    ///   - playlistURL: the playlist URL the user asked for.
    /// - Returns: nil when neither names a server.
    /// - Throws: ``KeySessionError`` `untrusted_key_server`, `insecure_key_server`.
    public func choose(explicit: URL?, advertised: URL?, playlistURL: URL?) throws -> URL? {
        if let explicit {
            try Self.requireSecureTransport(explicit)
            return explicit
        }
        guard let advertised else { return nil }
        guard let key = KeyServerURL.normalized(advertised) else {
            throw KeySessionError.untrustedKeyServer(advertised.absoluteString, reason: "is not an http(s) URL")
        }
        if configured.contains(key) {
            try Self.requireSecureTransport(advertised)
            return advertised
        }
        let host = advertised.host?.lowercased() ?? ""
        guard let playlistHost = playlistURL?.host?.lowercased(), playlistHost == host else {
            throw KeySessionError.untrustedKeyServer(
                advertised.absoluteString,
                reason: "is not on the playlist's host \(playlistURL?.host ?? "(a local file)")"
            )
        }
        let scheme = advertised.scheme?.lowercased()
        guard scheme == "https" || (scheme == "http" && KeyServerURL.isLoopback(host: host)) else {
            throw KeySessionError.untrustedKeyServer(advertised.absoluteString, reason: "uses plain http on a network address")
        }
        return advertised
    }

    /// Refuses plain `http` to anything but a loopback address: the token and the requests would cross the network
    /// in the clear.
    ///
    /// - Throws: ``KeySessionError`` `insecure_key_server`; `invalid_request` for a URL that is not http(s).
    public static func requireSecureTransport(_ url: URL) throws {
        switch url.scheme?.lowercased() {
        case "https": return
        case "http":
            guard KeyServerURL.isLoopback(host: url.host ?? "") else { throw KeySessionError.insecureKeyServer(url.absoluteString) }
        default:
            throw KeySessionError.invalidRequest("\(url.absoluteString) is not an http(s) key server URL")
        }
    }
}

/// The key servers the user trusts on this device: `key-servers.json` in the data directory (`{"trusted": [URL...]}`),
/// written by `stowage keys trust URL`.
public enum TrustedKeyServers {
    public static let fileName = "key-servers.json"

    private struct File: Codable {
        var trusted: [String]
    }

    /// The trusted URLs; empty when the file does not exist.
    ///
    /// - Throws: ``KeySessionError`` `invalid_request` for a file that is not of this form.
    public static func load(from dataDirectory: URL) throws -> [String] {
        let path = dataDirectory.appendingPathComponent(fileName).path
        guard let bytes = try PrivateFile.readSmall(path, limit: 1 << 20) else { return [] }
        guard let file = try? JSONDecoder().decode(File.self, from: Data(bytes)) else {
            throw KeySessionError.invalidRequest("\(path) is not of the form {\"trusted\": [\"https://...\"]}; fix or delete it")
        }
        return file.trusted
    }

    /// Adds (or, with `remove`, removes) `url`, normalized; returns the list as saved.
    @discardableResult
    public static func update(_ url: URL, remove: Bool = false, in dataDirectory: URL) throws -> [String] {
        guard let key = KeyServerURL.normalized(url) else { throw KeySessionError.invalidRequest("\(url) is not an http(s) URL") }
        if !remove { try KeyServerTrust.requireSecureTransport(url) }
        var list = try load(from: dataDirectory).filter { $0 != key }
        if !remove { list.append(key) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try PrivateFile.prepareDirectory(dataDirectory.path)
        try PrivateFile.replaceAtomically(
            dataDirectory.appendingPathComponent(fileName).path,
            contents: Array(try encoder.encode(File(trusted: list))) + [0x0a]
        )
        return list
    }
}
