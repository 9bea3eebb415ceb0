public import Foundation
public import HLS

extension KeySession {
    /// What ``KeySession/acquireKeys(for:assetId:baseURL:lease:identityHeaders:identityLifetime:identityFetch:superseding:)``
    /// did.
    public struct PlaylistKeyAcquisition: Sendable, CustomStringConvertible {
        public let selection: PlaylistKeySelection
        /// The one acquisition of every skd key ID; nil when the entries name none.
        public let acquisition: Acquisition?
        /// The identity key URIs now held sealed in the key store, in order of appearance.
        public let identityKeyURIs: [String]
        /// Of those, the ones served from the store without a request.
        public let cachedIdentityKeyURIs: [String]

        public var leaseId: String? { acquisition?.terms.leaseId }
        public var terms: LeaseTerms? { acquisition?.terms }

        public var description: String {
            "PlaylistKeyAcquisition(asset: \(selection.assetId ?? "-"), lease: \(leaseId ?? "-"), skd keys: "
                + "\(selection.skdKeyIds.count), identity keys: \(identityKeyURIs.count) (\(cachedIdentityKeyURIs.count) cached))"
        }
    }

    /// Obtains every key the EXT-X-KEY / EXT-X-SESSION-KEY entries of an asset need: selects them with
    /// ``PlaylistKeySelection``, requests all skd key IDs in ONE ``acquire(assetId:keyIds:lease:)``, then fetches and
    /// stores the identity keys with ``IdentityKeyFetcher``.
    ///
    /// - Parameters:
    ///   - keys: the entries, e.g. each media playlist's `distinctKeys` followed by the multivariant `sessionKeys`.
    ///   - assetId: the asset expected; required when the entries hold only identity keys.
    ///   - baseURL: the playlist URL relative identity key URIs are resolved against.
    ///   - identityHeaders: extra headers for identity key GETs, scoped to their hosts (overrides `identityFetch.headers`).
    ///   - identityLifetime: local lifetime of stored identity keys in seconds; nil: no expiry.
    ///   - identityFetch: retry and timeout settings for identity keys.
    ///   - superseding: store the lease as one of the asset's leases (``acquire(assetId:keyIds:lease:superseding:)``).
    /// - Throws: ``KeySessionError`` from the selection, the acquisition or the fetches; store errors.
    public func acquireKeys(
        for keys: [EncryptionKey],
        assetId: String?,
        baseURL: URL? = nil,
        lease: LeaseType,
        identityHeaders: ScopedHeaders? = nil,
        identityLifetime: Int64? = nil,
        identityFetch: IdentityKeyFetcher.Configuration = IdentityKeyFetcher.Configuration(),
        superseding: Bool = false
    ) async throws -> PlaylistKeyAcquisition {
        let selection = try PlaylistKeySelection.select(keys, assetId: assetId, baseURL: baseURL)
        guard let asset = selection.assetId else {
            guard selection.isEmpty else {
                throw KeySessionError.invalidRequest("identity keys need an asset ID to be stored under")
            }
            return PlaylistKeyAcquisition(selection: selection, acquisition: nil, identityKeyURIs: [], cachedIdentityKeyURIs: [])
        }
        var acquisition: Acquisition?
        if !selection.skdKeyIds.isEmpty {
            acquisition = try await acquire(assetId: asset, keyIds: selection.skdKeyIds, lease: lease, superseding: superseding)
        }
        var configuration = identityFetch
        if let identityHeaders { configuration.headers = identityHeaders }
        configuration.lifetimeSeconds = identityLifetime
        let fetcher = IdentityKeyFetcher(http: http, store: store, clock: clock, configuration: configuration)
        var stored: [String] = []
        var cached: [String] = []
        for url in selection.identityKeyURLs {
            let (_, fromCache) = try await fetcher.key(for: url, assetId: asset)
            stored.append(url.absoluteString)
            if fromCache { cached.append(url.absoluteString) }
        }
        return PlaylistKeyAcquisition(selection: selection, acquisition: acquisition, identityKeyURIs: stored, cachedIdentityKeyURIs: cached)
    }
}
