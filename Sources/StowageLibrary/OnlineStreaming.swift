import AssetDownload
import AsyncHTTPClient
import Foundation
import KeyDelivery
import OfflinePackage
import Playback
import StowageCrypto

/// The download engine and key session as the playback server's ``Playback/OnlineSource``: an online rendition's
/// files come from the source with the download's headers, its keys from a `streaming` lease (skd, one request for
/// every key the stored lease lacks, kept in memory for the session) or from the key URI (identity keys, never
/// stored).
struct OnlineStreaming: OnlineSource {
    let downloads: DownloadSession
    let assetId: String
    let keys: OnlineKeys

    func fetch(_ file: PackageFile) async throws -> [UInt8] {
        try await downloads.fetchOnline(file, assetId: assetId)
    }

    func contentKey(_ key: PackageKey) async throws -> SecretBytes {
        try await keys.key(key)
    }
}

/// The keys of one play session's online renditions, obtained once.
actor OnlineKeys {
    let downloads: DownloadSession
    let keyStore: KeyStore
    let device: DeviceIdentity
    let http: HTTPRoutes
    let clock: any KeyDelivery.Clock
    /// The download that made the package: its key server, token and headers; nil when the library has no record.
    let request: DownloadRequest?
    /// The key server's asset the package's lease is for: the only one a streaming lease is asked for, so a playlist
    /// changed at the source cannot spend the user's token on another asset.
    let leaseAsset: String
    /// The online renditions' keys the package's lease does not hold.
    let onlineKeys: [PackageKey]
    /// The online renditions' keys their playlists carry inline, by reference.
    let inlineKeys: [String: SecretBytes]
    /// Whether the asset plays under an offline lease here: then a streaming lease is asked for only while that lease
    /// allows playback (decided from the key store, never from the manifest).
    let mustHoldLease: Bool
    private var streaming: Task<[String: SecretBytes], any Error>?

    init(
        downloads: DownloadSession,
        keyStore: KeyStore,
        device: DeviceIdentity,
        http: HTTPRoutes,
        clock: any KeyDelivery.Clock,
        request: DownloadRequest?,
        leaseAsset: String,
        onlineKeys: [PackageKey],
        inlineKeys: [String: SecretBytes],
        mustHoldLease: Bool
    ) {
        self.mustHoldLease = mustHoldLease
        self.downloads = downloads
        self.keyStore = keyStore
        self.device = device
        self.http = http
        self.clock = clock
        self.request = request
        self.leaseAsset = leaseAsset
        self.onlineKeys = onlineKeys
        self.inlineKeys = inlineKeys
    }

    func key(_ key: PackageKey) async throws -> SecretBytes {
        switch key.kind {
        case .identity:
            if InlineKeyURI.isReference(key.uri) {
                guard let inline = inlineKeys[key.uri] else {
                    throw KeySessionError.invalidRequest("the source's playlist no longer carries the inline key \(key.keyId)")
                }
                return inline
            }
            guard let url = IdentityKeyFetcher.fetchableURL(key.uri) else {
                throw KeySessionError.invalidRequest("the key URI \(key.uri) is not an http(s) URL")
            }
            var configuration = IdentityKeyFetcher.Configuration()
            configuration.headers = request?.scopedHeaders ?? .none
            configuration.maxAttempts = 2
            return try await IdentityKeyFetcher(routes: http, store: keyStore, clock: clock, configuration: configuration).fetchUnstored(
                url,
                lengths: key.allowedLengths
            )
        case .skd:
            let (asset, _) = try PlaylistKeySelection.parseSKD(key.uri)
            guard asset == leaseAsset else {
                throw KeySessionError.invalidRequest(
                    "the source's playlist names the key \(key.keyId) of asset \(asset), but this package's lease is for asset \(leaseAsset); no key is asked for another asset"
                )
            }
            let streaming = self.streaming ?? acquireStreamingLease()
            self.streaming = streaming
            guard let content = try await streaming.value[key.keyId] else {
                throw KeySessionError.invalidRequest("the streaming lease does not hold the key \(key.keyId)")
            }
            return content
        }
    }

    /// One `streaming` lease for every online skd key of the lease's asset, from the key server the download trusted.
    private func acquireStreamingLease() -> Task<[String: SecretBytes], any Error> {
        let ids = Set(onlineKeys.compactMap { try? PlaylistKeySelection.parseSKD($0.uri) }.filter { $0.assetId == leaseAsset }.map(\.keyId))
        let (downloads, request, asset, mustHoldLease) = (downloads, request, leaseAsset, mustHoldLease)
        let (keyStore, device, http, clock) = (keyStore, device, http, clock)
        return Task {
            if mustHoldLease {
                // The offline lease's refusal is the answer: an ended rental never turns into a stream.
                let offline = try keyStore.evaluate(assetId: asset, at: clock.now)
                if let refusal = offline.error { throw refusal }
            }
            guard let request, let server = try downloads.keyServer(for: request) else {
                throw KeySessionError.invalidRequest("the asset's download names no key server to ask for a streaming lease")
            }
            let keys = KeySession(
                clock: clock,
                http: http.client(for: server),
                store: keyStore,
                device: device,
                serverURL: server,
                token: request.token,
                timeoutSeconds: 10
            )
            return try await keys.acquire(assetId: asset, keyIds: ids.sorted(), lease: .streaming).keys
        }
    }
}
