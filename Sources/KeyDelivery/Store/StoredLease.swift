/// A lease as the key store keeps it: the record the rules judge, plus what the store knows about its history.
public struct StoredLease: Sendable, Hashable {
    /// Terms (from the verified signed payload), state, `firstPlayedAt` and any evidence of tampering.
    public var record: LeaseRecord
    /// Whether the signed payload (the keys wrapped to this device) is still stored.
    public var hasKeyMaterial: Bool
    /// The key server the lease came from (normalized URL): renewals, first-play reports and releases go there, and its
    /// pinned key verifies the payload.
    public var keyServer: String
    /// When the lease was first stored (local time).
    public var persistedAt: Int64
    /// When the last renewal was stored; nil if never renewed.
    public var renewedAt: Int64?
    /// How many renewals were stored.
    public var renewalCount: Int
    /// When the key material was erased (expiry or return); nil while it is held.
    public var endedAt: Int64?
    /// When the server confirmed the release; nil until then.
    public var releasedAt: Int64?
    /// When the key server acknowledged the first play; nil until then.
    public var firstPlayReportedAt: Int64?
    /// The `serverTime` of the signed payload stored (the key server's clock when it issued or last renewed the lease);
    /// nil once the payload is erased or when it does not verify. The lease is judged against it as well as against the
    /// device's time high-water mark.
    public var serverTime: Int64?

    public var leaseId: String { record.leaseId }
    public var assetId: String { record.assetId }
    public var state: LeaseState { record.state }
}

/// A release waiting to be sent (`POST /v1/leases/LEASE_ID/release`), kept until the server confirms it.
public struct PendingRelease: Sendable, Hashable {
    public var leaseId: String
    public var assetId: String
    /// The device the lease was issued to, for the request body.
    public var deviceId: String
    /// The key server to send the release to.
    public var keyServer: String
    /// When the key material was erased: the request's `deletedAt`.
    public var deletedAt: Int64
    /// When playback started, reported with the release so the server learns it even if it never heard before.
    public var firstPlayedAt: Int64?
    /// When the release was queued.
    public var queuedAt: Int64
    /// How many sends failed so far.
    public var attempts: Int
    /// The last failure, as text.
    public var lastError: String?
    /// When the last send was tried.
    public var lastAttemptAt: Int64?

    /// The request body to send, with a fresh `nonce` (base64 of 16 random bytes) and the device's time from the caller.
    public func request(nonce: String, clientTime: Int64? = nil) -> ReleaseRequest {
        ReleaseRequest(leaseId: leaseId, deviceId: deviceId, nonce: nonce, deletedAt: deletedAt, firstPlayedAt: firstPlayedAt, clientTime: clientTime)
    }
}

/// What ``KeyStore/purgeExpired(at:)`` erased.
public struct PurgeReport: Sendable, Hashable {
    /// Leases whose key material was erased because a window closed (their releases are queued).
    public var expiredLeaseIds: [String]
    /// Key URIs whose sealed keys reached the end of their local lifetime.
    public var erasedIdentityKeyURIs: [String]

    public init(expiredLeaseIds: [String], erasedIdentityKeyURIs: [String]) {
        self.expiredLeaseIds = expiredLeaseIds
        self.erasedIdentityKeyURIs = erasedIdentityKeyURIs
    }
}

/// What the key store knows of an asset's keys from authenticated records (``KeyStore/leaseFacts(assetId:)``).
public struct AssetLeaseFacts: Sendable, Hashable {
    /// Whether a lease of the asset was ever stored here (a lease row, or the sealed ledger's record of one): such an
    /// asset plays only under its lease, whatever its manifest lists.
    public var hasHadLease: Bool
    /// The key IDs the asset's leases that still hold keys were signed for.
    public var heldKeyIds: Set<String>
    /// The key URIs of the asset's sealed identity keys.
    public var identityKeyURIs: [String]

    public init(hasHadLease: Bool, heldKeyIds: Set<String>, identityKeyURIs: [String]) {
        self.hasHadLease = hasHadLease
        self.heldKeyIds = heldKeyIds
        self.identityKeyURIs = identityKeyURIs
    }
}
