public import KeyDelivery
public import StowageCore

/// A lease evaluation as `stowage list`, `info` and `verify` show it: the lease's state and the time it has left.
///
/// All times are whole seconds since the Unix epoch; "time left" values are seconds, never negative. JSON:
///
/// ```json
/// {"leaseId": "...", "state": "persisted", "isValid": true, "evaluatedAt": 1763700000,
///  "expiresAt": 1766292000, "timeLeft": 2592000, "storageExpiresAt": 1766292000, "storageTimeLeft": 2592000,
///  "playbackDuration": 172800, "playbackStarted": false, "playbackTimeLeft": 172800,
///  "expiresAtIfPlayedNow": 1763872800}
/// ```
///
/// A refused lease has `isValid: false` and `code` / `message` saying why (``LeaseError`` codes, `no_lease` when no
/// lease covers the asset, then `state` is `none`).
public struct PackageLeaseSummary: Codable, Sendable, Hashable {
    /// The lease judged; nil when no lease covers the asset.
    public var leaseId: String?
    /// The lease's ``LeaseState`` raw value (`persisted`, `playing`, `expired`...), or `none`.
    public var state: String
    /// Whether the lease allows what was asked (playback now, or for the `--for` duration).
    public var isValid: Bool
    /// The refusal's stable code (``LeaseError/code``), nil when valid.
    public var code: ErrorCode?
    /// The refusal's message, nil when valid.
    public var message: String?
    /// When the lease was evaluated.
    public var evaluatedAt: Int64
    /// When the lease stops being valid as things stand (the earlier of the storage and running playback windows).
    public var expiresAt: Int64?
    /// Seconds until ``expiresAt``.
    public var timeLeft: Int64?
    /// End of the storage window.
    public var storageExpiresAt: Int64?
    /// Seconds until the storage window ends.
    public var storageTimeLeft: Int64?
    /// Length of the playback window that starts at first play; nil when the lease has none.
    public var playbackDuration: Int64?
    /// Whether playback has started (the playback window runs).
    public var playbackStarted: Bool
    /// When playback was first authorized.
    public var firstPlayedAt: Int64?
    /// End of the running playback window.
    public var playbackEndsAt: Int64?
    /// Seconds of playback window left: what remains of a running window, or the whole window before first play.
    public var playbackTimeLeft: Int64?
    /// When the lease would stop being valid if playback started now.
    public var expiresAtIfPlayedNow: Int64?
    /// The last moment a renewal may be asked for; nil when not renewable.
    public var renewableUntil: Int64?

    /// The summary of an evaluation.
    public init(_ evaluation: LeaseEvaluation) {
        let lease = evaluation.lease
        self.leaseId = lease?.leaseId
        self.state = lease?.state.rawValue ?? "none"
        self.isValid = evaluation.isValid
        self.code = evaluation.code
        self.message = evaluation.error?.message
        self.evaluatedAt = evaluation.evaluatedAt
        self.expiresAt = evaluation.expiresAt
        self.timeLeft = evaluation.timeLeft
        self.storageExpiresAt = evaluation.storageExpiresAt
        self.storageTimeLeft = evaluation.storageTimeLeft
        self.playbackDuration = lease?.terms.playbackDuration
        self.playbackStarted = lease?.firstPlayedAt != nil
        self.firstPlayedAt = lease?.firstPlayedAt
        self.playbackEndsAt = evaluation.playbackEndsAt
        self.playbackTimeLeft = evaluation.playbackTimeLeft
        self.expiresAtIfPlayedNow = evaluation.expiresAtIfPlayedNow
        self.renewableUntil = evaluation.renewableUntil
    }
}
