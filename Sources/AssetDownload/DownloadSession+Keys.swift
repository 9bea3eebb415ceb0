import Foundation
import HLS
import KeyDelivery
import OfflinePackage
import StowageCore

extension DownloadSession {
    /// Obtains the identity keys of `keys`, and one lease for the skd keys of `leaseFor` (stored superseding the
    /// asset's older leases it covers when `superseding`: a recording's group lease); returns that lease's ID.
    func obtainKeys(
        _ keys: [PackageKey],
        leaseFor skdKeys: [PackageKey],
        request: DownloadRequest,
        assetId: String,
        superseding: Bool = false
    ) async throws -> (leaseId: String?, session: KeySession?) {
        let now = clock.now
        let keyStore = try KeyStore(dataDirectory: dataDirectory.url, machineID: machineID, clock: clock)
        var fetch = IdentityKeyFetcher.Configuration()
        fetch.headers = request.scopedHeaders
        var leaseId: String?
        var keySession: KeySession?
        if !skdKeys.isEmpty {
            let chosen = try keyServer(for: request)
            guard let server = chosen else {
                throw DownloadError.keys(
                    code: .noKeyServer,
                    message: "asset \(assetId) uses skd keys but its playlist names no key server; pass --key-server URL"
                )
            }
            let device = try DeviceIdentity.loadOrCreate(in: dataDirectory.url)
            let client = KeySession(
                clock: clock,
                http: keyHTTP.client(for: server),
                store: keyStore,
                device: device,
                serverURL: server,
                token: request.token
            )
            let entries = skdKeys.map { EncryptionKey(method: .sampleAES, uri: $0.uri, keyFormat: $0.keyFormat) }
            keySession = client
            leaseId = try await client.acquireKeys(
                for: entries,
                assetId: assetId,
                lease: .persistent,
                identityFetch: fetch,
                superseding: superseding
            ).leaseId
        }
        // Identity keys one by one, each checked against the length its METHOD takes.
        let fetcher = IdentityKeyFetcher(routes: http, store: keyStore, clock: clock, configuration: fetch)
        for key in keys where key.kind == .identity {
            if InlineKeyURI.isReference(key.uri) {
                // Stored when the download was planned; only a hand-edited key store lacks it. Any other failure (the
                // store locked or damaged, the clock set back) is itself the answer: deleting the asset would not mend it.
                do {
                    _ = try keyStore.identityKey(uri: key.uri, at: now)
                } catch let error as KeyStoreError where error.code == KeyStoreError.identityKeyNotFound(uri: "").code {
                    throw DownloadError.keys(
                        code: .inlineKeyMissing,
                        message:
                            "the key store no longer holds the inline key \(key.keyId) of asset \(assetId); delete the asset and download it again"
                    )
                }
                continue
            }
            guard let url = IdentityKeyFetcher.fetchableURL(key.uri) else { throw DownloadError.unsupportedURI(key.uri) }
            _ = try await fetcher.key(for: url, assetId: assetId, lengths: key.allowedLengths)
        }
        return (leaseId, keySession)
    }
}
