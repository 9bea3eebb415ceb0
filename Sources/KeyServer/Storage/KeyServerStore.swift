public import KeyDelivery

/// Where the key server keeps its state: assets and their sealed content keys, the device registry, leases, the nonces
/// of the replay window and the audit log.
///
/// ``SQLiteKeyServerStore`` (GRDB, WAL) is the default; a store over another database implements the same small
/// surface. Every method is atomic on its own; the checks that must not race (first-seen device keys; the nonce window
/// with the device limit and the lease change they guard) are each one method, so an implementation runs each in one
/// transaction.
public protocol KeyServerStore: Sendable {
    /// Adds an asset or changes its policy, and adds its keys; a key ID already stored for the asset is replaced.
    func saveAsset(_ asset: AssetRecord, keys: [ContentKeyRecord]) async throws
    /// The asset, or nil.
    func asset(id: String) async throws -> AssetRecord?
    /// The stored keys of `assetID` among `keyIDs` (missing ones are left out).
    func contentKeys(assetID: String, keyIDs: [String]) async throws -> [ContentKeyRecord]
    /// Up to `limit` stored keys in (asset ID, key ID) order, after `position` when given: every key, page by page, for
    /// a master key rotation.
    func contentKeys(after position: ContentKeyPosition?, limit: Int) async throws -> [ContentKeyRecord]
    /// Writes each change's new nonce and sealed key where its row still holds the old ones (a row changed since it
    /// was read is left alone), in one transaction; returns how many rows changed.
    func replaceSealedKeys(_ changes: [SealedKeyChange]) async throws -> Int

    /// Registers a device on first sight and returns the registered record: the one passed in, or the one stored
    /// earlier (whose keys win, so the caller compares them).
    func registerDevice(_ device: DeviceRecord) async throws -> DeviceRecord
    /// The registered device, or nil.
    func device(id: String) async throws -> DeviceRecord?

    /// Records the request's nonce, settles the request with ``LeaseIssuance`` and saves what it decided, with its
    /// audit record, in one transaction (docs/key-server.md, "Concurrency"):
    ///
    /// 1. With `request.nonce`: if its value was recorded after `now - window`, nothing is written
    ///    (``LeaseSaveResult/replayed``); otherwise it is recorded, and stays recorded whatever follows.
    /// 2. The ``IssuanceFacts`` are read: the stored lease of `request.lease.id`, and the account's leases of the asset
    ///    and its active leases of any asset. A store over a database with concurrent writers keeps other transactions
    ///    of the same account waiting until this one ends.
    /// 3. ``LeaseIssuance/settle(_:facts:audit:sign:)`` judges the request (every rule lives there, never in a store)
    ///    and `sign` makes the payload over the settled lease.
    /// 4. The ``IssuanceWrites`` are applied: the lease inserted or updated (an update never changes `releasedAt` or
    ///    `deletedAt`), superseded leases released, first plays recorded where none was, audit records appended.
    func saveLease(
        _ request: IssuanceRequest,
        audit: AuditRecord,
        sign: @escaping @Sendable (IssuedLease) throws -> SignedPayload?
    ) async throws -> LeaseSaveResult
    /// Records the request's nonce (when the report is a request of its own), then the first play of a lease held by
    /// `deviceID` (the earliest reported wins) and `audit`, in one transaction.
    func recordFirstPlay(
        leaseID: String,
        deviceID: String,
        at time: Int64,
        nonce: RequestNonce?,
        now: Int64,
        audit: AuditRecord
    ) async throws
        -> FirstPlayResult
    /// The lease, or nil.
    func lease(id: String) async throws -> IssuedLease?
    /// Records the request's nonce, then marks a lease released (if it is not already) and appends `audit`, in one
    /// transaction.
    ///
    /// - Returns: false when the nonce is a replay (nothing written).
    func releaseLease(id: String, at time: Int64, deletedAt: Int64?, nonce: RequestNonce, audit: AuditRecord) async throws -> Bool

    /// Appends an entry to the audit log.
    func appendAudit(_ record: AuditRecord) async throws
    /// The audit log, oldest first.
    func auditRecords(limit: Int) async throws -> [AuditRecord]

    /// Deletes up to `limit` nonces recorded at or before `horizon` (outside every replay window), skipping rows
    /// another instance is deleting; returns how many it deleted. The server calls it in the background, not per
    /// request.
    func forgetNonces(seenAtOrBefore horizon: Int64, limit: Int) async throws -> Int

    /// How many leases are active now (not released, `storageExpiresAt > now`), by type: `GET /metrics`.
    func activeLeaseCounts(now: Int64) async throws -> [LeaseType: Int]

    /// Whether the store can serve requests now (`GET /readyz`): reachable and on the schema this build uses.
    /// - Throws: ``KeyServerSetupError`` `database_unavailable` or `schema_outdated`, or the database's error.
    func checkReady() async throws

    /// Database operations running now (each holds or waits for one connection) and the most connections the store
    /// opens; nil where there is no pool to speak of (SQLite).
    var connectionUse: (operations: Int, maximumConnections: Int)? { get }

    /// Lets go of the store's connections; nothing is called after. SQLite closes with its last reference.
    func close() async
}

extension KeyServerStore {
    public var connectionUse: (operations: Int, maximumConnections: Int)? { nil }

    public func close() async {}
}

/// A request's nonce and the window in which it must not repeat (24 hours in the protocol).
public struct RequestNonce: Sendable, Hashable {
    /// The 16 random bytes.
    public var value: [UInt8]
    /// Seconds during which the same nonce is a replay.
    public var window: Int64

    public init(_ value: [UInt8], window: Int64) {
        self.value = value
        self.window = window
    }
}

/// What ``KeyServerStore/saveLease(_:audit:sign:)`` did.
public enum LeaseSaveResult: Sendable, Hashable {
    /// Saved (or an identity stream already open, found): the lease as settled, with the payload signed over it.
    case saved(IssuedLease, SignedPayload?)
    /// The nonce was seen within its window; nothing was written.
    case replayed
    /// A rule of ``LeaseIssuance`` refused it; only the nonce was recorded.
    case refused(IssuanceRefusal)
}

/// What ``KeyServerStore/recordFirstPlay(leaseID:deviceID:at:nonce:now:audit:)`` did.
public enum FirstPlayResult: Sendable, Hashable {
    /// Recorded; the first play the server now keeps (the earliest reported).
    case recorded(firstPlayedAt: Int64)
    case replayed
    /// No lease with that ID held by that device.
    case unknownLease
}

/// Where a page of ``KeyServerStore/contentKeys(after:limit:)`` starts: after this asset's key.
public struct ContentKeyPosition: Sendable, Hashable {
    public var assetID: String
    public var keyID: String

    public init(assetID: String, keyID: String) {
        self.assetID = assetID
        self.keyID = keyID
    }

    /// The position of `record`, to continue after it.
    public init(after record: ContentKeyRecord) {
        self.init(assetID: record.assetID, keyID: record.keyID)
    }
}

/// A content key re-sealed: the row as read, and the same key sealed anew (same asset ID and key ID).
public struct SealedKeyChange: Sendable, Hashable {
    public var old: ContentKeyRecord
    public var new: ContentKeyRecord

    public init(old: ContentKeyRecord, new: ContentKeyRecord) {
        precondition(old.assetID == new.assetID && old.keyID == new.keyID, "a re-sealed key stays in its row")
        self.old = old
        self.new = new
    }
}

/// An asset known to the key server.
public struct AssetRecord: Sendable, Hashable {
    public var id: String
    /// The name of its policy in `config.json`.
    public var policy: String
    public var createdAt: Int64

    public init(id: String, policy: String, createdAt: Int64) {
        self.id = id
        self.policy = policy
        self.createdAt = createdAt
    }
}

/// A content key sealed under the master key (AES-256-GCM); never stored in the clear.
public struct ContentKeyRecord: Sendable, Hashable {
    public var assetID: String
    /// 32 lowercase hex digits.
    public var keyID: String
    /// The 12-byte AES-GCM nonce.
    public var nonce: [UInt8]
    /// Ciphertext (16 bytes) followed by the tag (16 bytes).
    public var sealedKey: [UInt8]

    public init(assetID: String, keyID: String, nonce: [UInt8], sealedKey: [UInt8]) {
        self.assetID = assetID
        self.keyID = keyID
        self.nonce = nonce
        self.sealedKey = sealedKey
    }
}

/// A device bound to the public keys it first presented.
public struct DeviceRecord: Sendable, Hashable {
    /// 32 lowercase hex digits.
    public var id: String
    /// The 32-byte Ed25519 public key.
    public var signingKey: [UInt8]
    /// The 32-byte X25519 public key.
    public var agreementKey: [UInt8]
    public var firstSeenAt: Int64

    public init(id: String, signingKey: [UInt8], agreementKey: [UInt8], firstSeenAt: Int64) {
        self.id = id
        self.signingKey = signingKey
        self.agreementKey = agreementKey
        self.firstSeenAt = firstSeenAt
    }
}

/// A lease as the server remembers it: its current terms and its life cycle.
public struct IssuedLease: Sendable, Hashable {
    public var id: String
    /// The token's `sub`.
    public var account: String
    public var assetID: String
    public var deviceID: String
    public var keyIDs: [String]
    public var type: LeaseType
    /// When the lease was first issued; `renewableUntil` counts from here.
    public var createdAt: Int64
    /// When the current payload was issued (the last renewal, or `createdAt`).
    public var issuedAt: Int64
    public var storageExpiresAt: Int64
    public var playbackDuration: Int64?
    public var renewableUntil: Int64?
    public var renewalCount: Int
    public var releasedAt: Int64?
    /// The client's `deletedAt` from its release request.
    public var deletedAt: Int64?
    /// When playback started, as reported by the device (or inherited under a once-per-account policy); nil while
    /// unknown.
    public var firstPlayedAt: Int64?

    public init(
        id: String,
        account: String,
        assetID: String,
        deviceID: String,
        keyIDs: [String],
        type: LeaseType,
        createdAt: Int64,
        issuedAt: Int64,
        storageExpiresAt: Int64,
        playbackDuration: Int64?,
        renewableUntil: Int64?,
        renewalCount: Int = 0,
        releasedAt: Int64? = nil,
        deletedAt: Int64? = nil,
        firstPlayedAt: Int64? = nil
    ) {
        self.id = id
        self.account = account
        self.assetID = assetID
        self.deviceID = deviceID
        self.keyIDs = keyIDs
        self.type = type
        self.createdAt = createdAt
        self.issuedAt = issuedAt
        self.storageExpiresAt = storageExpiresAt
        self.playbackDuration = playbackDuration
        self.renewableUntil = renewableUntil
        self.renewalCount = renewalCount
        self.releasedAt = releasedAt
        self.deletedAt = deletedAt
        self.firstPlayedAt = firstPlayedAt
    }
}

/// One line of the audit log: an issuance, a renewal, a release, an identity key served, or a refusal with its code.
public struct AuditRecord: Sendable, Hashable {
    public enum Event: String, Sendable, Hashable, CaseIterable {
        case issued
        case renewed
        case released
        case identityKeyServed = "identity_key_served"
        case firstPlayReported = "first_play_reported"
        case refused
    }

    public var time: Int64
    public var event: Event
    /// The operation: `keys`, `renew`, `release`, `first-play`, `identity`.
    public var operation: String
    public var account: String?
    public var deviceID: String?
    public var assetID: String?
    public var leaseID: String?
    /// The protocol error code of a refusal.
    public var code: String?
    public var detail: String?
    /// How many events this record stands for: refusals are aggregated per minute (docs/key-server.md, "Audit").
    public var count: Int

    public init(
        time: Int64,
        event: Event,
        operation: String,
        account: String? = nil,
        deviceID: String? = nil,
        assetID: String? = nil,
        leaseID: String? = nil,
        code: String? = nil,
        detail: String? = nil,
        count: Int = 1
    ) {
        self.time = time
        self.event = event
        self.operation = operation
        self.account = account
        self.deviceID = deviceID
        self.assetID = assetID
        self.leaseID = leaseID
        self.code = code
        self.detail = detail
        self.count = count
    }
}

extension IssuedLease {
    /// Whether this new persistent lease supersedes `older` (``LeaseIssuance``, rule 5): another active persistent lease
    /// of the same account, asset and device whose key IDs this one covers.
    ///
    /// A device holds one lease per key, and asks again for keys it still had a lease for only when it no longer holds
    /// that lease: its answer was lost (the server or the connection died after the lease was saved), it damaged or lost
    /// its store, or a recording's group lease grew. Left active, the older lease would keep the device's slot under
    /// `maxDevices` after the device released everything it knows of, and its first play would be forgotten.
    func supersedes(_ older: IssuedLease, now: Int64) -> Bool {
        older.id != id && type == .persistent && older.type == .persistent && older.account == account && older.assetID == assetID
            && older.deviceID == deviceID && older.releasedAt == nil && older.storageExpiresAt > now
            && Set(older.keyIDs).isSubset(of: Set(keyIDs))
    }

    /// The audit record of `older` released because this lease superseded it.
    func supersedingAudit(of older: IssuedLease, at now: Int64) -> AuditRecord {
        AuditRecord(
            time: now,
            event: .released,
            operation: "keys",
            account: older.account,
            deviceID: older.deviceID,
            assetID: older.assetID,
            leaseID: older.id,
            detail: "superseded by lease \(id), issued to the same device for keys that cover it"
        )
    }
}
