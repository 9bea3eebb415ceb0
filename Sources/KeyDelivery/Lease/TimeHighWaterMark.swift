/// The clock-rollback defence (the key protocol's "Client-side lease rules"), as a pure value: the time record a lease is
/// judged against.
///
/// The ``KeyStore`` builds one per lease (docs/SECURITY.md, "Time"): its mark is the larger of the device's mark (the
/// largest local time observed, which only rises) and the `serverTime` of the lease's own payload, and its latches are
/// set while a rollback or tampering found since the lease was stored or renewed holds it. ``isRolledBack(at:)`` is what
/// the lease rules ask. The mutating methods are the same rules for a record kept on its own.
///
/// ```swift
/// var mark = TimeHighWaterMark()
/// mark.observe(serverTime: payload.serverTime)
/// if mark.observe(localTime: clock.now) == .rollbackDetected { ... }
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
    public private(set) var mark: Int64?
    /// The local time at which a rollback was found, while it is latched; nil otherwise.
    public private(set) var rollbackDetectedAt: Int64?
    /// The local time at which one of the two copies of the time record was found deleted or altered, while that is
    /// latched; nil otherwise. Like a rollback, it refuses playback until a renewal re-anchors time.
    public private(set) var tamperDetectedAt: Int64?
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

    /// Records a local clock reading: raises the mark, or latches a rollback if the reading is too far below it.
    @discardableResult
    public mutating func observe(localTime now: Int64) -> Observation {
        if isRollbackLatched || isTamperLatched { return .rollbackStillLatched }
        if let mark, now < mark.addingClamped(-leeway) {
            rollbackDetectedAt = now
            return .rollbackDetected
        }
        mark = max(mark ?? now, now)
        return .consistent
    }

    /// Records a `serverTime` from a verified payload: raises the mark. It does not clear a latched rollback; only
    /// ``reanchor(serverTime:localTime:)`` does.
    public mutating func observe(serverTime: Int64) {
        mark = max(mark ?? serverTime, serverTime)
    }

    /// Re-anchors time after a successful renewal: the mark becomes the server's time (dropping any higher mark a
    /// clock set into the future left behind), the latch is cleared, and then `localTime` is observed, so a clock
    /// that is still far behind the server is caught again at once.
    @discardableResult
    public mutating func reanchor(serverTime: Int64, localTime: Int64) -> Observation {
        mark = serverTime
        rollbackDetectedAt = nil
        tamperDetectedAt = nil
        return observe(localTime: localTime)
    }

    /// Latches tampering found at `now` (a copy of the time record deleted or altered); a latch already set is kept.
    public mutating func latchTampering(at now: Int64) {
        if tamperDetectedAt == nil { tamperDetectedAt = now }
    }

    /// The two copies of the record merged the restrictive way: the larger mark, and each latch if either copy has it
    /// (the earlier time).
    public func merged(with other: TimeHighWaterMark) -> TimeHighWaterMark {
        func earliest(_ a: Int64?, _ b: Int64?) -> Int64? { [a, b].compactMap { $0 }.min() }
        return TimeHighWaterMark(
            mark: [mark, other.mark].compactMap { $0 }.max(),
            rollbackDetectedAt: earliest(rollbackDetectedAt, other.rollbackDetectedAt),
            tamperDetectedAt: earliest(tamperDetectedAt, other.tamperDetectedAt),
            leeway: leeway
        )
    }
}
