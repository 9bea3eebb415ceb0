/// Where a lease is in its life on this device (see ``LeaseLifecycle`` for the transitions).
public enum LeaseState: String, Sendable, Codable, Hashable, CaseIterable {
    /// Received from the key server and verified, not stored yet.
    case acquired
    /// Stored for offline playback; playback has not started, so the playback window has not started either.
    case persisted
    /// Playback was authorized at least once: `firstPlayedAt` is recorded and the playback window runs.
    case playing
    /// A window closed; the key material is erased and a release is queued.
    case expired
    /// The user gave the lease back early; the key material is erased and a release is queued.
    case returned
    /// The key server confirmed the release. Only the record is left, for the audit journal.
    case released

    /// Whether the lease still holds key material (the signed payload) on this device.
    public var holdsKeyMaterial: Bool {
        switch self {
        case .acquired, .persisted, .playing: true
        case .expired, .returned, .released: false
        }
    }
}

/// The terms the key server granted, as in the signed payload (docs/key-protocol.md, `POST /v1/keys`).
public struct LeaseTerms: Sendable, Hashable, Codable {
    public var leaseId: String
    public var assetId: String
    public var deviceId: String
    public var keyIds: [String]
    public var type: LeaseType
    /// When the server issued the lease; valid from `issuedAt - 300` to allow for clock skew.
    public var issuedAt: Int64
    /// End of the storage window (exclusive).
    public var storageExpiresAt: Int64
    /// Length of the playback window that starts at first play; nil: no playback window.
    public var playbackDuration: Int64?
    /// Last moment a renewal may be asked for; nil: not renewable.
    public var renewableUntil: Int64?
    /// When playback of this lease (or, for a policy of one rental per account, of the account's first lease of the
    /// asset) started, as the server knows it; nil when the server knows of no play. The playback window runs from the
    /// earlier of this and the device's own first play.
    public var firstPlayedAt: Int64?
    /// Whether the server's policy lets the device export the content decrypted (`stowage export`); nil: not said,
    /// which means no.
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
        self.firstPlayedAt = firstPlayedAt
        self.exportAllowed = exportAllowed
    }

    /// The terms of a decoded payload's lease.
    public init(_ lease: LeasePayload.Lease) {
        self.init(
            leaseId: lease.leaseId,
            assetId: lease.assetId,
            deviceId: lease.deviceId,
            keyIds: lease.keyIds,
            type: lease.type,
            issuedAt: lease.issuedAt,
            storageExpiresAt: lease.storageExpiresAt,
            playbackDuration: lease.playbackDuration,
            renewableUntil: lease.renewableUntil,
            firstPlayedAt: lease.firstPlayedAt,
            exportAllowed: lease.exportAllowed
        )
    }
}

/// A lease as the rules see it: the server's terms plus what happened on this device.
public struct LeaseRecord: Sendable, Hashable {
    public var terms: LeaseTerms
    public var state: LeaseState
    /// When playback was first authorized on this device; nil until then.
    public var firstPlayedAt: Int64?
    /// Why the stored lease cannot be trusted (its row disagrees with the signed payload, an authentication code is
    /// missing or wrong, the server key it was verified with is gone); nil for an intact lease. A lease with evidence
    /// of tampering is refused with `lease_tampered` (``LeaseIntegrityPolicy``).
    public var tampering: String?

    public init(terms: LeaseTerms, state: LeaseState, firstPlayedAt: Int64? = nil, tampering: String? = nil) {
        self.terms = terms
        self.state = state
        self.firstPlayedAt = firstPlayedAt
        self.tampering = tampering
    }

    public var leaseId: String { terms.leaseId }
    public var assetId: String { terms.assetId }

    /// When the playback window started: the earlier of this device's first play and the first play the server signed
    /// into the terms; nil while neither knows of a play.
    public var playbackStartedAt: Int64? {
        [firstPlayedAt, terms.firstPlayedAt].compactMap { $0 }.min()
    }

    /// End of the playback window (exclusive), once playback has started and if the lease has a playback window.
    public var playbackEndsAt: Int64? {
        guard let start = playbackStartedAt, let duration = terms.playbackDuration else { return nil }
        return start.addingClamped(duration)
    }

    /// When the lease stops being valid as things stand: the earlier of the storage window's end and, once playback
    /// has started, the playback window's end (dual expiry). Before first play only the storage window bounds it.
    public var expiresAt: Int64 {
        min(terms.storageExpiresAt, playbackEndsAt ?? .max)
    }

    /// When the lease would stop being valid if playback started at `start` (or already started earlier).
    public func expiresAt(ifFirstPlayedAt start: Int64) -> Int64 {
        var started = self
        started.firstPlayedAt = firstPlayedAt ?? start
        return started.expiresAt
    }

    /// Whether a renewal may still be asked for at `now`.
    public func isRenewable(at now: Int64) -> Bool {
        guard let until = terms.renewableUntil, state.holdsKeyMaterial else { return false }
        return now < until
    }
}

extension Int64 {
    /// Addition that saturates instead of trapping, since terms come from outside.
    func addingClamped(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
