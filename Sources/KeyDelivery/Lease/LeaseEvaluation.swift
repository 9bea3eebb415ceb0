public import StowageCore

/// The answer of the lease rules for one lease at one time, with the times a user wants to see.
///
/// All times are whole seconds since the Unix epoch; "time left" values are seconds, never negative.
public struct LeaseEvaluation: Sendable, Hashable {
    /// The lease judged, nil when no lease covers the asset. After a successful authorization it carries the
    /// recorded `firstPlayedAt`.
    public let lease: LeaseRecord?
    /// The asset concerned.
    public let assetId: String
    /// The time the rules were evaluated at.
    public let evaluatedAt: Int64
    /// Why the lease is refused; nil when it is valid.
    public let error: LeaseError?
    /// When valid: the leases the asset plays under (together they hold the keys asked for). Content keys are taken
    /// from these leases only, so a lease that allows playback is the lease whose keys are played.
    public internal(set) var playingLeaseIds: [String] = []

    /// An evaluation of `lease` at `now`.
    public init(lease: LeaseRecord, at now: Int64, error: LeaseError?) {
        self.lease = lease
        self.assetId = lease.assetId
        self.evaluatedAt = now
        self.error = error
    }

    /// The evaluation when no lease covers `assetId`.
    public static func noLease(assetId: String, at now: Int64) -> LeaseEvaluation {
        LeaseEvaluation(assetId: assetId, at: now, error: .noLease(assetId: assetId))
    }

    /// The same verdict with another error, for callers that refuse for reasons outside the lease (a latched
    /// rollback found while looking for a lease, say).
    init(assetId: String, at now: Int64, error: LeaseError) {
        self.lease = nil
        self.assetId = assetId
        self.evaluatedAt = now
        self.error = error
    }

    /// Whether the lease allows what was asked.
    public var isValid: Bool { error == nil }

    /// Throws ``error`` if there is one.
    public func requireValid() throws(LeaseError) {
        if let error { throw error }
    }

    /// The stable code of the refusal, or nil.
    public var code: ErrorCode? { error?.code }

    /// End of the storage window.
    public var storageExpiresAt: Int64? { lease?.terms.storageExpiresAt }

    /// Seconds until the storage window ends.
    public var storageTimeLeft: Int64? { storageExpiresAt.map { max(0, $0 - evaluatedAt) } }

    /// End of the playback window, once playback has started (and if the lease has one).
    public var playbackEndsAt: Int64? { lease?.playbackEndsAt }

    /// Seconds of playback window left: what remains of a running window, or the whole window if playback has not
    /// started; nil when the lease has no playback window.
    public var playbackTimeLeft: Int64? {
        guard let lease, let duration = lease.terms.playbackDuration else { return nil }
        guard let end = lease.playbackEndsAt else { return max(0, duration) }
        return max(0, end - evaluatedAt)
    }

    /// When the lease stops being valid as things stand (dual expiry: the earlier end).
    public var expiresAt: Int64? { lease?.expiresAt }

    /// When the lease would stop being valid if playback started now.
    public var expiresAtIfPlayedNow: Int64? { lease?.expiresAt(ifFirstPlayedAt: evaluatedAt) }

    /// Seconds until ``expiresAt``.
    public var timeLeft: Int64? { expiresAt.map { max(0, $0 - evaluatedAt) } }

    /// The last moment a renewal may be asked for; nil when the lease is not renewable.
    public var renewableUntil: Int64? { lease?.terms.renewableUntil }

    /// Whether the lease can still be renewed at ``evaluatedAt``.
    public var isRenewable: Bool { lease?.isRenewable(at: evaluatedAt) ?? false }
}
