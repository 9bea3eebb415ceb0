public import AssetDownload
import AsyncHTTPClient
import Foundation
import KeyDelivery

extension OfflineLibrary {
    /// Loads, parses and resolves a playlist (a path or an http(s) URL) without touching any data directory; with
    /// `deep`, every media playlist a multivariant playlist names too (`stowage inspect`).
    ///
    /// - Parameter headers: extra request headers, sent only to the playlist's host.
    /// - Throws: ``AssetDownload/PlaylistLoadError``.
    public static func inspect(_ location: String, headers: [(String, String)] = [], deep: Bool = false) async throws -> PlaylistInspection {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .follow(max: 5, allowCycles: false))
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let scoped = ScopedHeaders(headers, playlistURL: PlaylistLoader.url(of: location))
        do {
            let inspection = try await PlaylistLoader(client: client, headers: scoped).inspect(location, deep: deep)
            try? await client.shutdown()
            return inspection
        } catch {
            try? await client.shutdown()
            throw error
        }
    }
}
