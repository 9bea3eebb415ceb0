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

    /// Registers a device on first sight and returns the registered record: the one passed in, or the one stored
    /// earlier (whose keys win, so the caller compares them).
    func registerDevice(_ device: DeviceRecord) async throws -> DeviceRecord
    /// The registered device, or nil.
    func device(id: String) async throws -> DeviceRecord?

    /// Records the request's nonce, then inserts or updates a lease and appends `audit`, all in one transaction.
    ///
    /// 1. If `nonce.value` was recorded after `now - nonce.window`, nothing is written: ``LeaseSaveResult/replayed``.
    ///    Otherwise it is recorded (and nonces older than the window may be forgotten).
    /// 2. If the lease exists and was released, it is left alone: ``LeaseSaveResult/released``. An update never changes
    ///    `releasedAt` or `deletedAt` (``releaseLease(id:at:deletedAt:nonce:audit:)`` does).
    /// 3. With a `deviceLimit`, counts the distinct devices of `lease.account` holding active persistent leases (not
    ///    released, `storageExpiresAt > now`) other than this lease; if `lease.deviceID` is not among them and they are
    ///    already `deviceLimit`, the lease is not written (the nonce stays recorded): ``LeaseSaveResult/deviceLimitReached(activeDevices:)``.
    func saveLease(_ lease: IssuedLease, deviceLimit: Int?, nonce: RequestNonce, now: Int64, audit: AuditRecord) async throws -> LeaseSaveResult
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

/// What ``KeyServerStore/saveLease(_:deviceLimit:nonce:now:audit:)`` did.
public enum LeaseSaveResult: Sendable, Hashable {
    case saved
    /// The nonce was seen within its window; nothing was written.
    case replayed
    /// The lease exists and was released (a renewal that raced with the release); only the nonce was recorded.
    case released
    /// The account already has `activeDevices` other devices with active persistent leases.
    case deviceLimitReached(activeDevices: Int)
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
        deletedAt: Int64? = nil
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
    }

    /// Whether the lease counts toward the account's device limit at `now`.
    public func isActivePersistent(at now: Int64) -> Bool {
        type == .persistent && releasedAt == nil && storageExpiresAt > now
    }
}

/// One line of the audit log: an issuance, a renewal, a release, an identity key served, or a refusal with its code.
public struct AuditRecord: Sendable, Hashable {
    public enum Event: String, Sendable, Hashable, CaseIterable {
        case issued
        case renewed
        case released
        case identityKeyServed = "identity_key_served"
        case refused
    }

    public var time: Int64
    public var event: Event
    /// The operation: `keys`, `renew`, `release`, `identity`.
    public var operation: String
    public var account: String?
    public var deviceID: String?
    public var assetID: String?
    public var leaseID: String?
    /// The protocol error code of a refusal.
    public var code: String?
    public var detail: String?

    public init(
        time: Int64,
        event: Event,
        operation: String,
        account: String? = nil,
        deviceID: String? = nil,
        assetID: String? = nil,
        leaseID: String? = nil,
        code: String? = nil,
        detail: String? = nil
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
    }
}
