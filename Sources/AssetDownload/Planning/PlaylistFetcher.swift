import AsyncHTTPClient
import Foundation
import HLS

/// Loads playlists with ``PlaylistLoader`` and retries what may pass: network errors, 5xx and 429.
struct PlaylistFetcher: Sendable {
    let loader: PlaylistLoader
    let retry: RetryPolicy

    func load(_ url: URL, importedVariables: [String: String] = [:]) async throws -> LoadedPlaylist {
        var failures = 0
        while true {
            do {
                return try await loader.load(url, importedVariables: importedVariables)
            } catch {
                let retryable: Bool
                switch error {
                case .network: retryable = true
                case .httpStatus(_, let status): retryable = status >= 500 || status == 429 || status == 408
                default: retryable = false
                }
                failures += 1
                guard retryable, failures < retry.maximumAttempts else {
                    throw DownloadError.playlist(code: error.code, message: error.description)
                }
                try await Task.sleep(for: .seconds(retry.delay(afterFailures: failures)))
            }
        }
    }
}
