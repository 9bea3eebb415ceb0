public import AssetDownload
import AsyncHTTPClient
import Foundation
public import KeyDelivery

extension OfflineLibrary {
    /// Loads, parses and resolves a playlist (a path or an http(s) URL) without touching any data directory; with
    /// `deep`, every media playlist a multivariant playlist names too (`stowage inspect`).
    ///
    /// - Parameters:
    ///   - headers: extra request headers, sent only to the playlist's host.
    ///   - browser: the user agent, referer and cookies (``KeyDelivery/BrowserHeaders``).
    ///   - proxy: the proxies requests go through.
    ///   - trust: the CAs trusted for an https playlist.
    ///   - strict: refuse every deviation from RFC 8216bis, as a validator does, instead of reading the playlist as
    ///     players do and reporting each deviation as a warning.
    /// - Throws: ``AssetDownload/PlaylistLoadError``, ``KeyDelivery/TLSTrustError``.
    public static func inspect(
        _ location: String,
        headers: [(String, String)] = [],
        browser: BrowserHeaders = .none,
        proxy: ProxySettings = .direct,
        deep: Bool = false,
        trust: TLSTrust = .fromEnvironment(),
        strict: Bool = false
    ) async throws -> PlaylistInspection {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .follow(max: 5, allowCycles: false))
        configuration.connectionPool.retryConnectionEstablishment = false
        try trust.apply(to: &configuration)
        let routes = HTTPRoutes(configuration: configuration, proxy: proxy)
        let scoped = ScopedHeaders(headers, playlistURL: PlaylistLoader.url(of: location), browser: browser)
        do {
            let inspection = try await PlaylistLoader(routes: routes, headers: scoped, strict: strict).inspect(location, deep: deep)
            try? await routes.shutdown()
            return inspection
        } catch {
            try? await routes.shutdown()
            throw error
        }
    }
}
