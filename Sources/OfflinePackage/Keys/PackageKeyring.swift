import Foundation
public import KeyDelivery
public import StowageCore
public import StowageCrypto

/// The content keys of a package, read offline from the key store: skd keys unwrapped from a stored lease's payload
/// with the device key, identity keys unsealed from the store. Nothing here authorizes playback; the gate does.
public struct PackageKeyring: Sendable {
    public let store: KeyStore
    public let device: DeviceIdentity

    public init(store: KeyStore, device: DeviceIdentity) {
        self.store = store
        self.device = device
    }

    /// The key ID a package uses for an identity key URI: the first 16 bytes of SHA-256 of the absolute URI, in hex.
    public static func identityKeyID(uri: String) -> String {
        var hasher = SHA256Hasher()
        hasher.update(Array(uri.utf8))
        return Hex.encode(hasher.finalize().prefix(16))
    }

    /// Every key `manifest` lists, and every key the asset's leases and sealed identity keys hold, by key ID: the
    /// key store's authenticated records decide which keys the asset has, not the manifest alone.
    ///
    /// - Throws: ``PackageKeyError`` naming the first key that is not held (no lease holding it, or no stored
    ///   identity key, or one that has expired).
    public func keys(for manifest: PackageManifest, at now: Int64) throws(PackageKeyError) -> [String: SecretBytes] {
        try keys(for: manifest, fromLeases: nil, at: now)
    }

    /// ``keys(for:at:)`` with skd keys taken only from the leases `leaseIds` (nil: every lease that holds keys): the
    /// leases the lease rules let the asset play under (``LeaseEvaluation/playingLeaseIds``), so that no other lease's
    /// keys are played under their authorization.
    public func keys(
        for manifest: PackageManifest,
        fromLeases leaseIds: Set<String>?,
        at now: Int64
    ) throws(PackageKeyError)
        -> [String: SecretBytes]
    {
        var found: [String: SecretBytes] = [:]
        let skd = manifest.keys.filter { $0.kind == .skd }
        let allLeases: [StoredLease]
        let identityURIs: [String]
        do {
            allLeases = try store.leases(assetId: manifest.assetId)
            identityURIs = try store.identityKeyURIs(assetId: manifest.assetId)
        } catch {
            throw .storeUnavailable((error as? any StowageError)?.message ?? String(describing: error))
        }
        if !skd.isEmpty || !allLeases.isEmpty {
            let leases = allLeases.filter { lease in
                lease.state.holdsKeyMaterial && lease.hasKeyMaterial && (leaseIds?.contains(lease.leaseId) ?? true)
            }
            // Newest first, so a renewed or re-acquired lease wins. A lease that cannot be opened (its payload does not
            // verify, the pins are damaged, the store fails) is skipped, and named if a key is then missing: it is not
            // the same as holding no lease, and downloading again would not mend it.
            var unusable: [String] = []
            for lease in leases.sorted(by: { $0.record.terms.issuedAt > $1.record.terms.issuedAt }) {
                if let tampering = lease.record.tampering {
                    unusable.append("lease \(lease.leaseId): \(tampering)")
                    continue
                }
                do {
                    for (id, key) in try store.contentKeys(leaseId: lease.leaseId, device: device) where found[id] == nil { found[id] = key }
                } catch {
                    unusable.append("lease \(lease.leaseId): \((error as? any StowageError)?.message ?? "\(error)")")
                }
            }
            if let missing = skd.first(where: { found[$0.keyId] == nil }) {
                if !unusable.isEmpty {
                    throw .leaseUnusable(assetId: manifest.assetId, keyId: missing.keyId, reason: unusable.joined(separator: "; "))
                }
                throw .missingKey(assetId: manifest.assetId, keyId: missing.keyId, leases: leases.count)
            }
        }
        let listed = manifest.keys.filter { $0.kind == .identity }
        for key in listed {
            do {
                found[key.keyId] = try store.identityKey(uri: key.uri, at: now)
            } catch {
                throw .identityKeyUnavailable(assetId: manifest.assetId, keyId: key.keyId, reason: String(describing: error))
            }
        }
        // Sealed keys of the asset the manifest does not list (an edited manifest): held all the same, so an online
        // rendition that uses one is served with it rather than asked for again.
        for uri in identityURIs where !listed.contains(where: { $0.uri == uri }) {
            if let key = try? store.identityKey(uri: uri, at: now) { found[Self.identityKeyID(uri: uri)] = key }
        }
        return found
    }
}

/// Why a package's keys are not available.
public enum PackageKeyError: Error, Sendable, Hashable, CustomStringConvertible {
    case missingKey(assetId: String, keyId: String, leases: Int)
    /// The leases that should hold the key cannot be opened (tampered with, a damaged pin, the store failing).
    case leaseUnusable(assetId: String, keyId: String, reason: String)
    case identityKeyUnavailable(assetId: String, keyId: String, reason: String)
    case storeUnavailable(String)

    public var code: ErrorCode {
        switch self {
        case .missingKey: .keyMissing
        case .leaseUnusable: .keyUnusable
        case .identityKeyUnavailable: .keyMissing
        case .storeUnavailable: .keyStoreUnavailable
        }
    }

    public var description: String {
        switch self {
        case .missingKey(let asset, let key, let leases):
            leases == 0
                ? "asset \(asset) holds no lease with keys (key \(key) is needed); download it again or acquire keys while online"
                : "no stored lease of asset \(asset) holds key \(key); download it again while online"
        case .leaseUnusable(let asset, let key, let reason):
            "the key \(key) of asset \(asset) is in a stored lease that cannot be opened (\(reason)); renew it with "
                + "`stowage keys renew \(asset)` while online, which repairs a lease whose record was altered"
        case .identityKeyUnavailable(let asset, let key, let reason):
            "the key \(key) of asset \(asset) is not available (\(reason)); download the asset again while online"
        case .storeUnavailable(let reason): "the key store cannot be read: \(reason)"
        }
    }
}

extension PackageKeyError: StowageError {
    public var message: String { description }
}
