import AsyncHTTPClient
import Foundation
import KeyDelivery
import NIOCore
import NIOHTTP1
public import OfflinePackage

extension DownloadSession {
    /// The largest file ``fetchOnline(_:assetId:)`` holds in memory.
    public static let maximumOnlineFileBytes = 64 << 20

    /// Plans what the source of `manifest` offers beyond the package (``OnlinePlan``), for `stowage play` while online,
    /// loading its playlists with the download's headers and `timeoutSeconds` each, without retries: an origin that
    /// does not answer at once means offline.
    ///
    /// - Returns: nil when the source is a lone media playlist or offers nothing the package lacks.
    /// - Throws: ``DownloadError`` when the source's multivariant playlist cannot be loaded.
    public func onlinePlan(for manifest: PackageManifest, timeoutSeconds: Int64 = 5) async throws -> OnlinePlan? {
        let loader = PlaylistLoader(routes: http, headers: headers(for: manifest.assetId), timeoutSeconds: timeoutSeconds)
        let planner = DownloadPlanner(loader: PlaylistFetcher(loader: loader, retry: RetryPolicy(maximumAttempts: 1, networkDownGrace: 0)))
        return try await planner.planOnline(existing: manifest)
    }

    /// The bytes of a file not in the package, from its source, in memory (at most ``maximumOnlineFileBytes``): for a
    /// player streaming an online rendition. Uses the download's headers (scoped to their hosts), asks for the file's
    /// byte range, and tries three times in all on network errors, 5xx and 429.
    ///
    /// - Throws: ``OnlineFetchError`` saying what the source did.
    public func fetchOnline(_ file: PackageFile, assetId: String, timeoutSeconds: Int64 = 30) async throws(OnlineFetchError) -> [UInt8] {
        guard let url = URL(string: file.sourceURL), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
            throw OnlineFetchError(url: file.sourceURL, reason: "it is not an http(s) URL")
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        for (name, value) in headers(for: assetId).for(url) { request.headers.add(name: name, value: value) }
        if let range = file.byteRange {
            request.headers.add(name: "Range", value: "bytes=\(range.offset)-\(range.offset + range.length - 1)")
        }
        let attempts = 3
        var failure = OnlineFetchError(url: file.sourceURL, reason: "no attempt was made")
        for attempt in 1...attempts {
            if attempt > 1 {
                do {
                    try await Task.sleep(for: .milliseconds(200 * attempt))
                } catch {
                    throw OnlineFetchError(url: file.sourceURL, reason: "the player went away")
                }
            }
            let status: Int
            let body: [UInt8]
            do {
                let response = try await http.client(for: url).execute(request, timeout: .seconds(timeoutSeconds))
                status = Int(response.status.code)
                guard status == 200 || status == 206 else {
                    failure = OnlineFetchError(url: file.sourceURL, reason: "it answered HTTP \(status)")
                    if status >= 500 || status == 429 { continue }
                    throw failure
                }
                body = Array(buffer: try await response.body.collect(upTo: Self.maximumOnlineFileBytes))
            } catch let error as OnlineFetchError {
                throw error
            } catch is NIOTooManyBytesError {
                throw OnlineFetchError(
                    url: file.sourceURL,
                    reason: "it is over \(Self.maximumOnlineFileBytes >> 20) MiB, too large to stream from memory"
                )
            } catch {
                failure = OnlineFetchError(url: file.sourceURL, reason: NetworkErrorText.describe(error))
                continue
            }
            guard let range = file.byteRange else { return body }
            if status == 206 {
                guard body.count == Int(range.length) else {
                    throw OnlineFetchError(url: file.sourceURL, reason: "it sent \(body.count) bytes for a range of \(range.length)")
                }
                return body
            }
            // The server ignored the range: take it from the whole resource.
            guard Int64(body.count) >= range.offset + range.length else {
                throw OnlineFetchError(
                    url: file.sourceURL,
                    reason: "it has \(body.count) bytes; the range ends at byte \(range.offset + range.length)"
                )
            }
            return Array(body[Int(range.offset)..<Int(range.offset + range.length)])
        }
        throw failure
    }
}

/// Why a file of an online rendition could not be fetched: the source's URL and what happened.
public struct OnlineFetchError: Error, Sendable, CustomStringConvertible {
    public let url: String
    public let reason: String

    public var description: String { "\(url): \(reason)" }
}
