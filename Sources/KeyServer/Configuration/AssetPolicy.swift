/// The terms an asset's keys are issued under: how long a persistent lease may be kept, how long playback may last once
/// started, whether and how far it can be renewed, and on how many devices an account may hold keys.
///
/// Policies are named in `config.json` (docs/key-server.md) and each asset refers to one by name, so a change to a policy
/// applies to every lease issued or renewed afterwards. All durations are whole seconds.
///
/// ```json
/// {"storageDuration": 2592000, "playbackDuration": 172800, "persistentAllowed": true, "renewable": true,
///  "renewalExtension": 2592000, "renewableFor": 7776000, "maxDevices": 3, "streamingDuration": 86400,
///  "maxStreams": null, "identityAllowed": false, "oncePerAccount": false, "exportAllowed": false}
/// ```
public struct AssetPolicy: Sendable, Codable, Hashable {
    /// How long a persistent lease may be stored after it is issued or renewed: `storageExpiresAt = issuedAt + this`.
    public var storageDuration: Int64
    /// How long playback may last after it first starts; `nil`: no playback window (the storage window alone applies).
    public var playbackDuration: Int64?
    /// Whether keys may be kept for offline playback; when `false` only `streaming` leases are issued.
    public var persistentAllowed: Bool
    /// Whether persistent leases can be renewed.
    public var renewable: Bool
    /// On renewal, `storageExpiresAt` becomes `now + renewalExtension` (never earlier than it was).
    public var renewalExtension: Int64
    /// The renewable-until limit: a lease can be renewed until `first issue + renewableFor` (its `renewableUntil`).
    public var renewableFor: Int64
    /// How many devices of one account may hold active persistent leases at once; `nil`: no limit.
    public var maxDevices: Int?
    /// How long a streaming lease's keys may be used: `storageExpiresAt = issuedAt + this`.
    public var streamingDuration: Int64
    /// How many devices (or, for identity keys, entitlement tokens) of one account may stream at once: active streaming
    /// leases counted by device; `nil`: no limit.
    public var maxStreams: Int?
    /// Whether `GET /v1/identity/ASSET_ID/KEY_ID` serves the raw content key to ordinary players (counted as a stream
    /// of the token's account). Off by default: the raw key leaves every device and lease control behind.
    public var identityAllowed: Bool
    /// A rental: a second persistent lease of the asset for the same account inherits the first one's storage expiry,
    /// renewable-until and first play (a request that finds no first play starts the playback window), so asking again
    /// never restarts the rental.
    public var oncePerAccount: Bool
    /// Whether a device holding a lease may export the content decrypted into a file of its own (`stowage export`):
    /// signed into each lease as `exportAllowed` (docs/key-protocol-extensions.md). Off by default: an exported file
    /// is outside every lease.
    public var exportAllowed: Bool

    public init(
        storageDuration: Int64,
        playbackDuration: Int64?,
        persistentAllowed: Bool = true,
        renewable: Bool,
        renewalExtension: Int64,
        renewableFor: Int64,
        maxDevices: Int?,
        streamingDuration: Int64 = 86_400,
        maxStreams: Int? = nil,
        identityAllowed: Bool = false,
        oncePerAccount: Bool = false,
        exportAllowed: Bool = false
    ) {
        self.storageDuration = storageDuration
        self.playbackDuration = playbackDuration
        self.persistentAllowed = persistentAllowed
        self.renewable = renewable
        self.renewalExtension = renewalExtension
        self.renewableFor = renewableFor
        self.maxDevices = maxDevices
        self.streamingDuration = streamingDuration
        self.maxStreams = maxStreams
        self.identityAllowed = identityAllowed
        self.oncePerAccount = oncePerAccount
        self.exportAllowed = exportAllowed
    }

    /// The policy `keyserver init` writes: kept 30 days, 48 hours of playback once started, renewable by 30 days at a
    /// time for 90 days, 3 devices per account, streaming leases for 24 hours.
    public static let standard = AssetPolicy(
        storageDuration: 30 * 86_400,
        playbackDuration: 48 * 3_600,
        persistentAllowed: true,
        renewable: true,
        renewalExtension: 30 * 86_400,
        renewableFor: 90 * 86_400,
        maxDevices: 3,
        streamingDuration: 86_400
    )

    private enum CodingKeys: String, CodingKey {
        case storageDuration, playbackDuration, persistentAllowed, renewable, renewalExtension, renewableFor, maxDevices
        case streamingDuration, maxStreams, identityAllowed, oncePerAccount, exportAllowed
    }

    /// Members left out take the ``standard`` value, except `playbackDuration` and `maxDevices`, where an explicit
    /// `null` means "none" and a missing member means the standard value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let standard = AssetPolicy.standard
        storageDuration = try container.decodeIfPresent(Int64.self, forKey: .storageDuration) ?? standard.storageDuration
        playbackDuration =
            container.contains(.playbackDuration)
            ? try container.decodeIfPresent(Int64.self, forKey: .playbackDuration) : standard.playbackDuration
        persistentAllowed = try container.decodeIfPresent(Bool.self, forKey: .persistentAllowed) ?? standard.persistentAllowed
        renewable = try container.decodeIfPresent(Bool.self, forKey: .renewable) ?? standard.renewable
        renewalExtension = try container.decodeIfPresent(Int64.self, forKey: .renewalExtension) ?? standard.renewalExtension
        renewableFor = try container.decodeIfPresent(Int64.self, forKey: .renewableFor) ?? standard.renewableFor
        maxDevices = container.contains(.maxDevices) ? try container.decodeIfPresent(Int.self, forKey: .maxDevices) : standard.maxDevices
        streamingDuration = try container.decodeIfPresent(Int64.self, forKey: .streamingDuration) ?? standard.streamingDuration
        maxStreams = try container.decodeIfPresent(Int.self, forKey: .maxStreams)
        identityAllowed = try container.decodeIfPresent(Bool.self, forKey: .identityAllowed) ?? false
        oncePerAccount = try container.decodeIfPresent(Bool.self, forKey: .oncePerAccount) ?? false
        exportAllowed = try container.decodeIfPresent(Bool.self, forKey: .exportAllowed) ?? false
    }

    // Null members are written as null, so config.json shows every term.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(storageDuration, forKey: .storageDuration)
        try container.encode(playbackDuration, forKey: .playbackDuration)
        try container.encode(persistentAllowed, forKey: .persistentAllowed)
        try container.encode(renewable, forKey: .renewable)
        try container.encode(renewalExtension, forKey: .renewalExtension)
        try container.encode(renewableFor, forKey: .renewableFor)
        try container.encode(maxDevices, forKey: .maxDevices)
        try container.encode(streamingDuration, forKey: .streamingDuration)
        try container.encode(maxStreams, forKey: .maxStreams)
        try container.encode(identityAllowed, forKey: .identityAllowed)
        try container.encode(oncePerAccount, forKey: .oncePerAccount)
        try container.encode(exportAllowed, forKey: .exportAllowed)
    }

    /// Why the policy cannot be used, or `nil` when every duration is positive and the device limit at least 1.
    var problem: String? {
        if storageDuration <= 0 { return "storageDuration must be positive" }
        if let playbackDuration, playbackDuration <= 0 { return "playbackDuration must be positive or null" }
        if renewalExtension <= 0 { return "renewalExtension must be positive" }
        if renewableFor < 0 { return "renewableFor must not be negative" }
        if let maxDevices, maxDevices < 1 { return "maxDevices must be at least 1 or null" }
        if streamingDuration <= 0 { return "streamingDuration must be positive" }
        if let maxStreams, maxStreams < 1 { return "maxStreams must be at least 1 or null" }
        return nil
    }
}
