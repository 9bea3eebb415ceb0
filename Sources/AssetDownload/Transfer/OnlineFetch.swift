import AsyncHTTPClient
public import Foundation
import KeyDelivery
import NIOCore
import NIOHTTP1
public import OfflinePackage

extension DownloadSession {
    /// The key server a download's bearer token may go to (docs/SECURITY.md): the one named for the download, listed
    /// in the data directory, or advertised on the playlist's own host over https, when the user trusts it; nil when
    /// the playlist names none.
    ///
    /// - Throws: `untrusted_key_server` (``KeyDelivery/KeySessionError``) for one the user does not trust;
    ///   ``DownloadError`` `unsupported_uri` for a URL that cannot be parsed.
    public func keyServer(for request: DownloadRequest) throws -> URL? {
        let trust = try KeyServerTrust(configured: try TrustedKeyServers.load(from: dataDirectory.url) + request.trustedKeyServers)
        return try trust.choose(
            explicit: try request.keyServerURL.map { text in
                guard let url = URL(string: text) else { throw DownloadError.unsupportedURI(text) }
                return url
            },
            advertised: request.advertisedKeyServerURL.flatMap(URL.init(string:)),
            playlistURL: URL(string: request.url)
        )
    }

    /// The largest file ``fetchOnline(_:assetId:)`` holds in memory.
    public static let maximumOnlineFileBytes = 64 << 20

    /// Plans what the source of `manifest` offers beyond the package (``OnlinePlan``), for `stowage play` while online,
    /// loading its playlists with the download's headers and `timeoutSeconds` each, without retries: an origin that
    /// does not answer at once means offline.
    ///
    /// - Returns: nil when the source is a lone media playlist or offers nothing the package lacks.
    /// - Throws: ``DownloadError`` when the source's multivariant playlist cannot be loaded.
    public func onlinePlan(for manifest: PackageManifest, timeoutSeconds: Int64 = 5) async throws -> OnlinePlan? {
        let headers = (try? store.task(manifest.assetId))?.request.scopedHeaders ?? .none
        let loader = PlaylistLoader(client: http, headers: headers, timeoutSeconds: timeoutSeconds)
        let planner = DownloadPlanner(loader: PlaylistFetcher(loader: loader, retry: RetryPolicy(maximumAttempts: 1, networkDownGrace: 0)))
        return try await planner.planOnline(existing: manifest)
    }

    /// The bytes of a file not in the package, from its source, in memory (at most ``maximumOnlineFileBytes``): for a
    /// player streaming an online rendition. Uses the download's headers (scoped to their hosts), asks for the file's
    /// byte range, and tries three times on network errors, 5xx and 429.
    ///
    /// - Throws: ``DownloadError`` `segment_fetch_failed` (HTTP status, size), `network_unreachable`.
    public func fetchOnline(_ file: PackageFile, assetId: String, timeoutSeconds: Int64 = 30) async throws -> [UInt8] {
        guard let url = URL(string: file.sourceURL), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
            throw DownloadError.unsupportedURI(file.sourceURL)
        }
        let headers = (try? store.task(assetId))?.request.scopedHeaders ?? .none
        var request = HTTPClientRequest(url: url.absoluteString)
        for (name, value) in headers.for(url) { request.headers.add(name: name, value: value) }
        if let range = file.byteRange {
            request.headers.add(name: "Range", value: "bytes=\(range.offset)-\(range.offset + range.length - 1)")
        }
        var attempt = 1
        while true {
            do {
                let response = try await http.execute(request, timeout: .seconds(timeoutSeconds))
                let status = Int(response.status.code)
                guard status == 200 || status == 206 else {
                    if (status >= 500 || status == 429) && attempt < 3 { throw RetryableStatus(status: status) }
                    throw DownloadError.segmentHTTPStatus(path: file.path, url: file.sourceURL, status: status)
                }
                let body = Array(buffer: try await response.body.collect(upTo: Self.maximumOnlineFileBytes))
                guard let range = file.byteRange else { return body }
                if status == 206 {
                    guard body.count == Int(range.length) else {
                        throw DownloadError.segmentFailed(
                            path: file.path,
                            url: file.sourceURL,
                            reason: "the source sent \(body.count) bytes for a range of \(range.length)"
                        )
                    }
                    return body
                }
                // The server ignored the range: take it from the whole resource.
                guard Int64(body.count) >= range.offset + range.length else {
                    throw DownloadError.segmentFailed(
                        path: file.path,
                        url: file.sourceURL,
                        reason: "the source has \(body.count) bytes, the range ends at byte \(range.offset + range.length)"
                    )
                }
                return Array(body[Int(range.offset)..<Int(range.offset + range.length)])
            } catch let error as DownloadError {
                throw error
            } catch let error as RetryableStatus where attempt >= 3 {
                throw DownloadError.segmentHTTPStatus(path: file.path, url: file.sourceURL, status: error.status)
            } catch is NIOTooManyBytesError {
                throw DownloadError.segmentFailed(
                    path: file.path,
                    url: file.sourceURL,
                    reason: "it is over \(Self.maximumOnlineFileBytes >> 20) MiB, too large to stream from memory"
                )
            } catch {
                guard attempt < 3, !Task.isCancelled else {
                    throw DownloadError.segmentFailed(path: file.path, url: file.sourceURL, reason: NetworkErrorText.describe(error))
                }
                attempt += 1
                try await Task.sleep(for: .milliseconds(200 * attempt))
            }
        }
    }
}

private struct RetryableStatus: Error {
    var status: Int
}
