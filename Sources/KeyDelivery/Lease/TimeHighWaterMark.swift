/// The clock-rollback defence (the key protocol's "Client-side lease rules"), as a pure value: the time record a lease is
/// judged against.
///
/// The ``KeyStore`` builds one per lease (docs/SECURITY.md, "Time"): its mark is the larger of the device's mark (the
/// largest local time observed, which only rises) and the `serverTime` of the lease's own payload, and its latches are
/// set while a rollback or tampering found since the lease was stored or renewed holds it. ``isRolledBack(at:)`` is what
/// the lease rules ask; ``KeyStore/observe(localTime:)`` is what moves the device's mark.
///
/// ```swift
/// let mark = TimeHighWaterMark(mark: 1_763_700_000)
/// mark.isRolledBack(at: 1_763_699_000)   // true: more than 300 s below the mark
/// ```
public struct TimeHighWaterMark: Sendable, Hashable, Codable {
    /// What an observation of local time found.
    public enum Observation: Sendable, Hashable {
        /// The time is plausible; the mark moved up if the time was later.
        case consistent
        /// This observation found the rollback (the first time; it is latched from now on).
        case rollbackDetected
        /// A rollback was already latched.
        case rollbackStillLatched
    }

    /// The highest trusted time seen so far; nil before the first observation.
    public let mark: Int64?
    /// The local time at which a rollback was found, while it is latched; nil otherwise.
    public let rollbackDetectedAt: Int64?
    /// The local time at which one of the two copies of the time record was found deleted or altered, while that is
    /// latched; nil otherwise. Like a rollback, it refuses playback until the lease is renewed.
    public let tamperDetectedAt: Int64?
    /// The leeway below the mark, 300 s by the protocol.
    public let leeway: Int64

    public init(
        mark: Int64? = nil,
        rollbackDetectedAt: Int64? = nil,
        tamperDetectedAt: Int64? = nil,
        leeway: Int64 = KeyProtocol.clockLeeway
    ) {
        self.mark = mark
        self.rollbackDetectedAt = rollbackDetectedAt
        self.tamperDetectedAt = tamperDetectedAt
        self.leeway = leeway
    }

    /// Whether a rollback is latched.
    public var isRollbackLatched: Bool { rollbackDetectedAt != nil }

    /// Whether tampering with the time record is latched.
    public var isTamperLatched: Bool { tamperDetectedAt != nil }

    /// Whether `now` would be refused: a rollback or tampering is latched, or `now` is more than `leeway` below the mark.
    public func isRolledBack(at now: Int64) -> Bool {
        if isRollbackLatched || isTamperLatched { return true }
        guard let mark else { return false }
        return now < mark.addingClamped(-leeway)
    }
}
