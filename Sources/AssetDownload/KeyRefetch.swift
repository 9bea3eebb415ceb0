import Foundation
import KeyDelivery
import OfflinePackage
import StowageCore

/// What ``DownloadSession/fetchKeys(assetId:keyServerURL:token:)`` obtained.
public struct KeyFetchResult: Sendable, Hashable, Codable {
    public var assetId: String
    /// The leases obtained, oldest first; empty when every key was held already.
    public var leaseIds: [String]
    /// The skd keys the new leases hold.
    public var skdKeys: Int
    /// The identity keys fetched again.
    public var identityKeys: Int
}

extension DownloadSession {
    /// Obtains again the keys of a package that this device no longer holds (a returned lease, an expired storage
    /// window, a state database set aside by `stowage recover`), without fetching any media: what `AVContentKeySession`
    /// or Media3's `OfflineLicenseHelper` do for a downloaded asset. Keys held already are left alone.
    ///
    /// The key server and token are `keyServerURL` and `token` when given, else those of the asset's download record,
    /// else (for the server) the one its last lease came from; the choice passes the same trust rules as a download's
    /// (``keyServer(for:)``). When no lease of the asset holds keys, one lease for every skd key is requested, as a new
    /// download would; when some are held (a recording whose later keys are missing), the groups holding a missing key
    /// are requested as superseding leases, as a recording does. Either way the device asks for nothing a delete and a
    /// new download would not get, and the key server decides.
    ///
    /// - Throws: ``OfflinePackage/PackageError`` `package_not_found`, `asset_busy` while a download runs;
    ///   ``DownloadError`` `no_token`, `no_key_server`, `inline_key_missing` (an inline key cannot be fetched); the key server's
    ///   refusals.
    public func fetchKeys(assetId: String, keyServerURL: String?, token: String?) async throws -> KeyFetchResult {
        let package = try PackageDirectory(assetId: assetId, in: dataDirectory)
        let lock = try lockAsset(assetId)
        defer { lock.release() }
        let manifest = try package.readManifest()
        let keyStore = try KeyStore(dataDirectory: dataDirectory.url, machineID: machineID, clock: clock)

        var request = DownloadRequest(url: manifest.sourceURL, assetId: assetId)
        let record = try store.task(assetId)
        if let record, record.requestDamage == nil { request = record.request }
        if let keyServerURL {
            request.keyServerURL = keyServerURL
        } else if request.keyServerURL == nil, let last = try keyStore.leases(assetId: assetId).last, !last.keyServer.isEmpty {
            request.keyServerURL = last.keyServer
        }
        if let token { request.token = token }

        let held = Set(
            try keyStore.leases(assetId: assetId).filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial }.flatMap(\.record.terms.keyIds)
        )
        let skd = manifest.keys.filter { $0.kind == .skd }
        var identity: [PackageKey] = []
        for key in manifest.keys where key.kind == .identity {
            do {
                _ = try keyStore.identityKey(uri: key.uri, at: clock.now)
            } catch let error as KeyStoreError where error.code == KeyStoreError.identityKeyNotFound(uri: "").code {
                identity.append(key)
            }
        }
        let missingSkd = skd.filter { !held.contains($0.keyId) }
        var result = KeyFetchResult(assetId: assetId, leaseIds: [], skdKeys: 0, identityKeys: identity.count)
        guard !missingSkd.isEmpty || !identity.isEmpty else { return result }

        if !missingSkd.isEmpty, try keyServer(for: request) == nil {
            throw DownloadError.keys(
                code: .noKeyServer,
                message: "asset \(assetId) uses skd keys, and neither its playlist, its download record nor an earlier lease names a "
                    + "key server; pass --key-server URL"
            )
        }
        if !missingSkd.isEmpty, request.token?.isEmpty ?? true {
            // The key server would say invalid_token with advice for programmers; the user needs the option.
            if let damage = record?.secretsDamage {
                throw DownloadError.keys(
                    code: .noToken,
                    message: "the entitlement token stored with the download of asset \(assetId) could not be opened (\(damage.message)); "
                        + "pass it again with --token-file FILE, --token - or STOWAGE_TOKEN"
                )
            }
            throw DownloadError.keys(
                code: .noToken,
                message: "asset \(assetId) has no entitlement token on this device (its download record has none, or is gone after "
                    + "`stowage recover`); pass it with --token-file FILE, --token - or STOWAGE_TOKEN"
            )
        }
        if held.isEmpty || missingSkd.isEmpty {
            let (leaseId, _) = try await obtainKeys(identity, leaseFor: missingSkd, request: request, assetId: assetId)
            if let leaseId { result.leaseIds.append(leaseId) }
            result.skdKeys = missingSkd.count
        } else {
            _ = try await obtainKeys(identity, leaseFor: [], request: request, assetId: assetId)
            for group in try DownloadRunner.groupsToLease(manifest.keys, keyStore: keyStore, assetId: assetId) {
                let (leaseId, keySession) = try await obtainKeys([], leaseFor: group, request: request, assetId: assetId, superseding: true)
                guard let leaseId else { continue }
                // The superseded lease's release goes now if the server answers; else it stays queued.
                _ = try? await keySession?.sync()
                result.leaseIds.append(leaseId)
                result.skdKeys += group.count
            }
        }
        return result
    }
}
