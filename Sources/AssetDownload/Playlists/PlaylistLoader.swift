public import AsyncHTTPClient
public import Foundation
public import HLS
public import KeyDelivery
import NIOCore
import NIOHTTP1
public import StowageCore

/// Playlist text as received, with the URL it finally came from (after redirects), against which its relative URIs
/// resolve (RFC 8216bis 4.1).
public struct LoadedPlaylist: Sendable {
    public var url: URL
    public var parsed: ParsedPlaylist
}

/// Loads and parses playlists from local files or over HTTP(S) with AsyncHTTPClient.
///
/// Bodies are read with a size bound (``PlaylistParser/maximumSize``) so a hostile server cannot exhaust memory.
public struct PlaylistLoader: Sendable {
    private let routes: HTTPRoutes
    private let headers: ScopedHeaders
    private let timeout: TimeAmount
    private let strict: Bool

    /// - Parameters:
    ///   - client: the HTTP client; the caller owns it and shuts it down.
    ///   - headers: extra request headers (authorization, cookies), sent only to the hosts they are scoped to.
    ///   - timeout: bound on the whole transfer of one playlist.
    ///   - strict: refuse any deviation from RFC 8216bis (`inspect --strict`) instead of reading it as players do,
    ///     with a warning.
    public init(client: HTTPClient, headers: ScopedHeaders = .none, timeoutSeconds: Int64 = 30, strict: Bool = false) {
        self.init(routes: HTTPRoutes(client), headers: headers, timeoutSeconds: timeoutSeconds, strict: strict)
    }

    /// Loads each playlist through the client `routes` choose for its URL (a proxy, or direct).
    public init(routes: HTTPRoutes, headers: ScopedHeaders = .none, timeoutSeconds: Int64 = 30, strict: Bool = false) {
        self.routes = routes
        self.headers = headers
        self.timeout = .seconds(timeoutSeconds)
        self.strict = strict
    }

    /// Whether a URI that a playlist at `referrer` names may be fetched: `http(s)` always; `file:` only when the
    /// playlist itself is a local file, so a remote playlist can never make Stowage read (or block on) a local file
    /// such as `/etc/passwd` or `/dev/zero`.
    public static func isFetchable(_ url: URL, referrer: URL) -> Bool {
        switch url.scheme?.lowercased() {
        case "http", "https": url.host != nil
        case "file": referrer.isFileURL
        default: false
        }
    }

    /// Loads the playlist at a path or an `http(s)`/`file` URL and parses it.
    /// - Parameter importedVariables: the variables of the multivariant playlist that named this one.
    public func load(_ location: String, importedVariables: [String: String] = [:]) async throws(PlaylistLoadError) -> LoadedPlaylist {
        try await load(Self.url(of: location), importedVariables: importedVariables)
    }

    /// The URL a user's playlist location means: itself when it names a scheme (http, https, file or any other, which
    /// is refused later), else a path on this machine.
    public static func url(of location: String) -> URL {
        if let parsed = URL(string: location), let scheme = parsed.scheme, !scheme.isEmpty, !location.hasPrefix("/") { return parsed }
        return URL(fileURLWithPath: location).standardizedFileURL
    }

    /// Loads the playlist at a URL and parses it.
    ///
    /// - Parameter referrer: the playlist that names this one; when it is remote, only http(s) URLs are loaded
    ///   (``isFetchable(_:referrer:)``), refused before anything is read.
    public func load(_ url: URL, importedVariables: [String: String] = [:], referrer: URL? = nil) async throws(PlaylistLoadError) -> LoadedPlaylist {
        if let referrer, !Self.isFetchable(url, referrer: referrer) { throw .unsupportedScheme(url: url) }
        let (bytes, finalURL) = try await fetch(url)
        do {
            let parsed = try PlaylistParser.parse(bytes, url: finalURL, importedVariables: importedVariables, strict: strict)
            return LoadedPlaylist(url: finalURL, parsed: parsed)
        } catch {
            throw .invalidPlaylist(url: finalURL, error)
        }
    }

    private func fetch(_ url: URL) async throws(PlaylistLoadError) -> ([UInt8], URL) {
        if url.isFileURL {
            do {
                let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
                // Only regular files: a device or a FIFO (/dev/zero, /dev/stdin) would be read forever or block.
                guard attributes[.type] as? FileAttributeType == .typeRegular else {
                    throw PlaylistLoadError.unreadable(url: url, reason: "it is not a regular file")
                }
                if let size = attributes[.size] as? Int, size > PlaylistParser.maximumSize { throw PlaylistLoadError.tooLarge(url: url) }
                let handle = try FileHandle(forReadingFrom: url)
                defer { try? handle.close() }
                let data = try handle.read(upToCount: PlaylistParser.maximumSize + 1) ?? Data()
                guard data.count <= PlaylistParser.maximumSize else { throw PlaylistLoadError.tooLarge(url: url) }
                return (Array(data), url)
            } catch let error as PlaylistLoadError {
                throw error
            } catch {
                throw .unreadable(url: url, reason: FileErrorText.describe(error))
            }
        }
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw .unsupportedScheme(url: url)
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        for (name, value) in headers.for(url) { request.headers.add(name: name, value: value) }
        do {
            let response = try await routes.client(for: url).execute(request, timeout: timeout)
            guard response.status == .ok else { throw PlaylistLoadError.httpStatus(url: url, status: Int(response.status.code)) }
            let body = try await response.body.collect(upTo: PlaylistParser.maximumSize)
            return (Array(buffer: body), response.url ?? url)
        } catch let error as PlaylistLoadError {
            throw error
        } catch let error as NIOTooManyBytesError {
            _ = error
            throw .tooLarge(url: url)
        } catch {
            if NetworkErrorText.isUntrustedCertificate(error) { throw .untrustedCertificate(url: url, reason: NetworkErrorText.describe(error)) }
            throw .network(url: url, reason: NetworkErrorText.describe(error), hostUnreachable: NetworkErrorText.isNetworkDown(error))
        }
    }
}

/// Why a playlist could not be loaded.
public enum PlaylistLoadError: Error, Sendable, CustomStringConvertible {
    case unreadable(url: URL, reason: String)
    case httpStatus(url: URL, status: Int)
    /// `hostUnreachable`: the host could not be reached at all (refused, no route, connect timeout).
    case network(url: URL, reason: String, hostUnreachable: Bool)
    /// The server's TLS certificate was refused: it does not pass by itself, so it is not a network error to wait out.
    case untrustedCertificate(url: URL, reason: String)
    case tooLarge(url: URL)
    case invalidPlaylist(url: URL, PlaylistError)
    /// A URI that is neither http(s) nor (from a local playlist) a local file, or a local file named by a remote one.
    case unsupportedScheme(url: URL)

    /// A stable snake_case code.
    public var code: ErrorCode {
        switch self {
        case .unreadable: .playlistUnreadable
        case .httpStatus: .playlistHTTPStatus
        case .network: .playlistNetworkError
        case .untrustedCertificate: .untrustedCertificate
        case .tooLarge: .playlistTooLarge
        case .unsupportedScheme: .unsupportedURI
        case .invalidPlaylist(_, let error): error.code
        }
    }

    public var description: String {
        switch self {
        case .unreadable(let url, let reason): "cannot read \(url.path): \(reason); give an http(s) URL or the path of a playlist on this machine"
        case .httpStatus(let url, let status): "\(url.absoluteString) answered HTTP \(status); check the URL and any required headers"
        case .network(let url, let reason, _): "cannot fetch \(url.absoluteString): \(reason); check the URL and the network"
        case .untrustedCertificate(let url, let reason): "cannot fetch \(url.absoluteString): \(reason)"
        case .tooLarge(let url):
            "\(url.absoluteString) is larger than \(PlaylistParser.maximumSize >> 20) MiB; it is not a playlist Stowage will read"
        case .invalidPlaylist(let url, let error): "\(url.absoluteString) is not a valid playlist: \(error.message)"
        case .unsupportedScheme(let url):
            "\(url.absoluteString) is not fetched: Stowage reads http(s) URLs, and local files only from a local playlist, so "
                + "nothing was read; give an http(s) URL or a path on this machine"
        }
    }
}

extension PlaylistLoadError: StowageError {
    public var message: String { description }
}
