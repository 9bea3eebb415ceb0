import AsyncHTTPClient
import Foundation
import HLS
import StowageCore

/// Loads playlists with ``PlaylistLoader`` and retries what may pass: network errors, 5xx and 429.
struct PlaylistFetcher: Sendable {
    let loader: PlaylistLoader
    let retry: RetryPolicy

    /// While the host refuses connections (the network or the server is down) it keeps trying for
    /// ``RetryPolicy/networkDownGrace``; other transient failures get ``RetryPolicy/maximumAttempts``.
    func load(_ url: URL, importedVariables: [String: String] = [:], referrer: URL? = nil) async throws -> LoadedPlaylist {
        var failures = 0
        var downSince: ContinuousClock.Instant?
        while true {
            do {
                return try await loader.load(url, importedVariables: importedVariables, referrer: referrer)
            } catch {
                var retryable = false
                var down = false
                switch error {
                case .network(_, _, let hostUnreachable):
                    retryable = true
                    down = hostUnreachable
                case .httpStatus(_, let status): retryable = status >= 500 || status == 429 || status == 408
                default: break
                }
                if down {
                    let since = downSince ?? ContinuousClock.now
                    downSince = since
                    retryable = FileFetcher.seconds(since: since) <= retry.networkDownGrace
                    failures = min(failures + 1, 6)
                } else {
                    downSince = nil
                    failures += 1
                    retryable = retryable && failures < retry.maximumAttempts
                }
                guard retryable else { throw DownloadError.playlist(code: error.code, message: error.description, subject: error.subject) }
                try await Task.sleep(for: .seconds(retry.delay(afterFailures: failures)))
            }
        }
    }
}
