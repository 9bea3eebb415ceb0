/// The JSON messages of the Stowage Key Delivery Protocol, version 1 (docs/key-protocol.md).
///
/// Binary values are standard base64 with padding, key IDs 32 lowercase hex digits, times whole seconds since the
/// Unix epoch. Field names are the protocol's and must not change.
public enum KeyProtocol {
    /// The protocol version every message carries.
    public static let version = 1
    /// KEYFORMAT of protected keys in playlists.
    public static let keyFormat = "com.stowage.skd"
    /// URI scheme of protected keys: `skd://ASSET_ID/KEY_ID_HEX`.
    public static let keyURIScheme = "skd"
    /// EXT-X-SESSION-DATA DATA-ID that names the key server's base URL.
    public static let keyServerDataID = "com.stowage.key-server"
    /// Header carrying the Ed25519 signature of the request body.
    public static let deviceSignatureHeader = "Stowage-Device-Signature"
    /// Leeway for `issuedAt` and the rollback high-water mark, in seconds.
    public static let clockLeeway: Int64 = 300

    /// Whether a string is a valid asset ID: `[A-Za-z0-9._-]{1,128}`.
    public static func isValidAssetID(_ id: String) -> Bool {
        (1...128).contains(id.utf8.count)
            && id.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }

    /// Whether a string is a key ID as the protocol writes it: 32 lowercase hex digits.
    public static func isValidKeyID(_ id: String) -> Bool {
        id.utf8.count == 32 && id.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Whether a string is a device ID as the protocol writes it: 32 lowercase hex digits ("Device identity").
    public static func isValidDeviceID(_ id: String) -> Bool {
        isValidKeyID(id)
    }
}

/// A lease type: kept for offline playback, or in memory only for streaming.
public enum LeaseType: String, Sendable, Codable, Hashable {
    case persistent
    case streaming
}

/// The device's public keys as sent in requests.
public struct DevicePublicInfo: Sendable, Codable, Hashable {
    public var id: String
    /// Base64 of the 32-byte Ed25519 public key.
    public var signingKey: String
    /// Base64 of the 32-byte X25519 public key.
    public var agreementKey: String

    public init(id: String, signingKey: String, agreementKey: String) {
        self.id = id
        self.signingKey = signingKey
        self.agreementKey = agreementKey
    }
}

/// `POST /v1/keys` request body.
public struct KeyRequest: Sendable, Codable, Hashable {
    public var version: Int
    public var assetId: String
    public var keyIds: [String]
    public var lease: LeaseType
    public var nonce: String
    public var clientTime: Int64
    public var device: DevicePublicInfo

    public init(assetId: String, keyIds: [String], lease: LeaseType, nonce: String, clientTime: Int64, device: DevicePublicInfo) {
        self.version = KeyProtocol.version
        self.assetId = assetId
        self.keyIds = keyIds
        self.lease = lease
        self.nonce = nonce
        self.clientTime = clientTime
        self.device = device
    }
}

/// The response of `/v1/keys` and `/renew`: the payload bytes and the server's signature over them, both base64.
/// The client stores this pair exactly as received.
public struct SignedPayload: Sendable, Codable, Hashable {
    public var payload: String
    public var signature: String

    public init(payload: String, signature: String) {
        self.payload = payload
        self.signature = signature
    }
}

/// The decoded `payload` of a ``SignedPayload``.
public struct LeasePayload: Sendable, Codable, Hashable {
    public var version: Int
    public var lease: Lease
    public var keys: [WrappedKey]
    public var serverTime: Int64

    public init(lease: Lease, keys: [WrappedKey], serverTime: Int64) {
        self.version = KeyProtocol.version
        self.lease = lease
        self.keys = keys
        self.serverTime = serverTime
    }

    /// The lease terms.
    public struct Lease: Sendable, Codable, Hashable {
        public var leaseId: String
        public var assetId: String
        public var deviceId: String
        public var keyIds: [String]
        public var type: LeaseType
        public var issuedAt: Int64
        public var storageExpiresAt: Int64
        /// Seconds of playback after first play; nil: no playback window.
        public var playbackDuration: Int64?
        /// nil: not renewable.
        public var renewableUntil: Int64?
        public var requestNonce: String
        /// Extension (docs/key-protocol-extensions.md), optional and left out when nil: when playback of this lease
        /// started as the server knows it (reported by the device, or inherited from the account's first lease of the
        /// asset under a once-per-account policy). The playback window runs from the earlier of this and the device's
        /// own first play. Clients that do not know the member ignore it.
        public var firstPlayedAt: Int64?
        /// Extension (docs/key-protocol-extensions.md), optional and left out unless true: the asset's policy lets
        /// the device remux the decrypted content into a file of its own (`stowage export`).
        public var exportAllowed: Bool?

        public init(
            leaseId: String,
            assetId: String,
            deviceId: String,
            keyIds: [String],
            type: LeaseType,
            issuedAt: Int64,
            storageExpiresAt: Int64,
            playbackDuration: Int64?,
            renewableUntil: Int64?,
            requestNonce: String,
            firstPlayedAt: Int64? = nil,
            exportAllowed: Bool? = nil
        ) {
            self.leaseId = leaseId
            self.assetId = assetId
            self.deviceId = deviceId
            self.keyIds = keyIds
            self.type = type
            self.issuedAt = issuedAt
            self.storageExpiresAt = storageExpiresAt
            self.playbackDuration = playbackDuration
            self.renewableUntil = renewableUntil
            self.requestNonce = requestNonce
            self.firstPlayedAt = firstPlayedAt
            self.exportAllowed = exportAllowed
        }

        // Null members are written as null, as the protocol shows them, rather than left out.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(leaseId, forKey: .leaseId)
            try container.encode(assetId, forKey: .assetId)
            try container.encode(deviceId, forKey: .deviceId)
            try container.encode(keyIds, forKey: .keyIds)
            try container.encode(type, forKey: .type)
            try container.encode(issuedAt, forKey: .issuedAt)
            try container.encode(storageExpiresAt, forKey: .storageExpiresAt)
            try container.encode(playbackDuration, forKey: .playbackDuration)
            try container.encode(renewableUntil, forKey: .renewableUntil)
            try container.encode(requestNonce, forKey: .requestNonce)
            try container.encodeIfPresent(firstPlayedAt, forKey: .firstPlayedAt)
            if exportAllowed == true { try container.encode(true, forKey: .exportAllowed) }
        }
    }

    /// One content key wrapped to the device (X25519 + HKDF-SHA256 + AES-256-GCM).
    public struct WrappedKey: Sendable, Codable, Hashable {
        public var keyId: String
        public var ephemeralKey: String
        public var nonce: String
        public var wrappedKey: String

        public init(keyId: String, ephemeralKey: String, nonce: String, wrappedKey: String) {
            self.keyId = keyId
            self.ephemeralKey = ephemeralKey
            self.nonce = nonce
            self.wrappedKey = wrappedKey
        }
    }
}

/// `POST /v1/leases/LEASE_ID/renew` request body.
public struct RenewRequest: Sendable, Codable, Hashable {
    public var version: Int
    public var leaseId: String
    public var deviceId: String
    public var nonce: String
    public var clientTime: Int64
    /// Extension, optional: when playback of the lease started on the device (docs/key-protocol-extensions.md).
    public var firstPlayedAt: Int64?

    public init(leaseId: String, deviceId: String, nonce: String, clientTime: Int64, firstPlayedAt: Int64? = nil) {
        self.version = KeyProtocol.version
        self.leaseId = leaseId
        self.deviceId = deviceId
        self.nonce = nonce
        self.clientTime = clientTime
        self.firstPlayedAt = firstPlayedAt
    }
}

/// `POST /v1/leases/LEASE_ID/release` request body, sent after the key material is erased.
public struct ReleaseRequest: Sendable, Codable, Hashable {
    public var version: Int
    public var leaseId: String
    public var deviceId: String
    public var nonce: String
    public var deletedAt: Int64
    /// Extension, optional: when playback of the lease started on the device (docs/key-protocol-extensions.md).
    public var firstPlayedAt: Int64?
    /// Extension, optional: the device's time when it sent the request; a server refuses one too far from its own.
    public var clientTime: Int64?

    public init(leaseId: String, deviceId: String, nonce: String, deletedAt: Int64, firstPlayedAt: Int64? = nil, clientTime: Int64? = nil) {
        self.version = KeyProtocol.version
        self.leaseId = leaseId
        self.deviceId = deviceId
        self.nonce = nonce
        self.deletedAt = deletedAt
        self.firstPlayedAt = firstPlayedAt
        self.clientTime = clientTime
    }
}

/// Extension `POST /v1/leases/LEASE_ID/first-play` request body (docs/key-protocol-extensions.md), signed like every
/// POST: tells the key server when playback of a persistent lease started on the device, so a renewal or a second
/// request cannot restart the playback window.
public struct FirstPlayReport: Sendable, Codable, Hashable {
    public var version: Int
    public var leaseId: String
    public var deviceId: String
    public var nonce: String
    public var firstPlayedAt: Int64
    /// Optional: the device's time when it sent the request; a server refuses one too far from its own.
    public var clientTime: Int64?

    public init(leaseId: String, deviceId: String, nonce: String, firstPlayedAt: Int64, clientTime: Int64? = nil) {
        self.version = KeyProtocol.version
        self.leaseId = leaseId
        self.deviceId = deviceId
        self.nonce = nonce
        self.firstPlayedAt = firstPlayedAt
        self.clientTime = clientTime
    }
}

/// Answer to ``FirstPlayReport``: the first play the server now records (the earliest it was told).
public struct FirstPlayResponse: Sendable, Codable, Hashable {
    public var firstPlayedAt: Int64

    public init(firstPlayedAt: Int64) { self.firstPlayedAt = firstPlayedAt }
}

/// `POST /v1/leases/LEASE_ID/release` response: `{"released": true}`, also for a lease released before.
public struct ReleaseResponse: Sendable, Codable, Hashable {
    public var released: Bool

    public init(released: Bool = true) { self.released = released }
}

/// `GET /v1/server-key` response.
public struct ServerKeyResponse: Sendable, Codable, Hashable {
    public var signingKey: String

    public init(signingKey: String) { self.signingKey = signingKey }
}
