public import StowageCore

/// Why a lease does not allow playback, or why a lease operation was refused, with a stable code.
///
/// Modelled on async-http-client's `HTTPClientError`: a private code enum behind static constructors, so callers
/// compare ``reason`` and tools read ``code`` (stable snake_case, for JSON and the CLI). The message names the asset
/// and lease and says what to do; it never contains key material.
///
/// ```swift
/// let evaluation = try store.authorizePlayback(assetId: "movie-1", at: clock.now)
/// if let error = evaluation.error, error.reason == .clockRollbackDetected { ... }
/// ```
public struct LeaseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of refusal. The Swift names are the codes in camel case; ``code`` gives the stable snake_case form.
    /// The kind of refusal: one of ``reasons``.
    public typealias Reason = ErrorCode

    /// The codes a lease refusal has: the lease ended (`lease_expired`), a window closed (`playback_window_expired`,
    /// `storage_window_expired`), the clock went back (`clock_rollback_detected`), not valid yet (`not_yet_valid`),
    /// released or returned, no lease for the asset (`no_lease`), valid but not for long enough (`expires_too_soon`,
    /// `verify --for`), an event the lease's state does not allow (`invalid_lease_transition`), a lease altered
    /// outside Stowage (`lease_tampered`).
    public static let reasons: [Reason] = [
        .leaseExpired, .playbackWindowExpired, .storageWindowExpired, .clockRollbackDetected, .notYetValid, .released, .returned, .noLease,
        .expiresTooSoon, .invalidLeaseTransition, .leaseTampered,
    ]

    /// The kind of refusal.
    public let reason: Reason
    /// The asset concerned, when known.
    public let assetId: String?
    /// The lease concerned, when known.
    public let leaseId: String?
    /// The moment the refusal is about (the window's end, the high-water mark, the start of validity), when there is one.
    public let time: Int64?
    /// What happened and what to do.
    public let message: String

    private init(_ reason: Reason, assetId: String?, leaseId: String?, time: Int64?, message: String) {
        self.reason = reason
        self.assetId = assetId
        self.leaseId = leaseId
        self.time = time
        self.message = message
    }

    /// The stable snake_case code, e.g. `clock_rollback_detected`.
    public var code: ErrorCode { reason }

    public var description: String { "\(code): \(message)" }

    private static func subject(_ lease: LeaseRecord) -> String {
        "lease \(lease.leaseId) for asset \(lease.assetId)"
    }

    /// The lease's key material was erased when a window closed.
    public static func leaseExpired(_ lease: LeaseRecord) -> Self {
        .init(
            .leaseExpired,
            assetId: lease.assetId,
            leaseId: lease.leaseId,
            time: lease.expiresAt,
            message: "The \(subject(lease)) expired at \(HumanTime.date(lease.expiresAt)) and its keys were erased. Get them again "
                + "while online: `stowage keys fetch \(lease.assetId)`."
        )
    }

    /// The storage window closed at `end`.
    public static func storageWindowExpired(_ lease: LeaseRecord, end: Int64) -> Self {
        .init(
            .storageWindowExpired,
            assetId: lease.assetId,
            leaseId: lease.leaseId,
            time: end,
            message: "The storage window of the \(subject(lease)) ended at \(HumanTime.date(end)). Renew the lease, or get the keys "
                + "again while online: `stowage keys fetch \(lease.assetId)`."
        )
    }

    /// The playback window closed at `end`.
    public static func playbackWindowExpired(_ lease: LeaseRecord, end: Int64) -> Self {
        .init(
            .playbackWindowExpired,
            assetId: lease.assetId,
            leaseId: lease.leaseId,
            time: end,
            message: "The playback window of the \(subject(lease)) ended at \(HumanTime.date(end)). Get a new lease while online "
                + "(`stowage keys fetch \(lease.assetId)`), if the key server grants one."
        )
    }

    /// The clock reads `now`, more than the leeway behind the high-water mark `mark`, or a rollback found earlier
    /// (`latched`) has not been cleared by a renewal yet.
    public static func clockRollbackDetected(_ lease: LeaseRecord?, now: Int64, mark: Int64, latched: Bool = false) -> Self {
        let what =
            latched
            ? "The system clock was set back earlier (this device has seen \(HumanTime.date(mark))) and this lease has not "
                + "been renewed since."
            : "The system clock (\(HumanTime.date(now))) is behind a time this device has already seen (\(HumanTime.date(mark))), "
                + "so it was set back."
        return .init(
            .clockRollbackDetected,
            assetId: lease?.assetId,
            leaseId: lease?.leaseId,
            time: mark,
            message: what + " Correct the clock, then renew the lease while online (`stowage keys renew \(lease?.assetId ?? "ASSET")`)."
        )
    }

    /// The lease starts at `start` (`issuedAt - 300`), later than `now`.
    public static func notYetValid(_ lease: LeaseRecord, start: Int64) -> Self {
        .init(
            .notYetValid,
            assetId: lease.assetId,
            leaseId: lease.leaseId,
            time: start,
            message: "The \(subject(lease)) is not valid before \(HumanTime.date(start)). Check that the system clock is right."
        )
    }

    /// The server confirmed the lease's release.
    public static func released(_ lease: LeaseRecord) -> Self {
        .init(
            .released,
            assetId: lease.assetId,
            leaseId: lease.leaseId,
            time: nil,
            message: "The \(subject(lease)) was released; its keys are gone. Get them again while online: "
                + "`stowage keys fetch \(lease.assetId)`."
        )
    }

    /// The lease was returned on this device.
    public static func returned(_ lease: LeaseRecord) -> Self {
        .init(
            .returned,
            assetId: lease.assetId,
            leaseId: lease.leaseId,
            time: nil,
            message: "The \(subject(lease)) was returned; its keys were erased. Get them again while online: "
                + "`stowage keys fetch \(lease.assetId)`."
        )
    }

    /// No lease on this device covers `assetId`.
    public static func noLease(assetId: String) -> Self {
        .init(
            .noLease,
            assetId: assetId,
            leaseId: nil,
            time: nil,
            message: "No lease on this device covers asset \(assetId). Get its keys while online: "
                + "`stowage keys fetch \(assetId) --key-server URL --token-file FILE`."
        )
    }

    /// The lease ends at `end`, before `required`.
    public static func expiresTooSoon(_ lease: LeaseRecord, end: Int64, required: Int64) -> Self {
        .init(
            .expiresTooSoon,
            assetId: lease.assetId,
            leaseId: lease.leaseId,
            time: end,
            message: "The \(subject(lease)) ends at \(HumanTime.date(end)), \(HumanTime.duration(required - end)) before the "
                + "requested \(HumanTime.date(required)), counting playback as starting now. Renew the lease while online."
        )
    }

    /// The stored lease cannot be trusted: `detail` says what disagrees. Renewing it online stores a fresh signed
    /// payload and state; otherwise the asset must be downloaded again.
    public static func leaseTampered(_ lease: LeaseRecord?, assetId: String? = nil, detail: String) -> Self {
        let subject = lease.map { Self.subject($0) } ?? "stored lease of asset \(assetId ?? "?")"
        return .init(
            .leaseTampered,
            assetId: lease?.assetId ?? assetId,
            leaseId: lease?.leaseId,
            time: nil,
            message: "The \(subject) was altered outside Stowage: \(detail). Renew it while online "
                + "(`stowage keys renew`), or delete the asset and download it again."
        )
    }

    /// A key of `assetId` fetched from its playlist's own key URI (no lease) is held: tampering (`.leaseTampered`) or a
    /// clock set back (`.clockRollbackDetected`) was found since it was stored, or is found now.
    public static func identityKeyHeld(_ reason: Reason, assetId: String, detail: String) -> Self {
        .init(
            reason,
            assetId: assetId,
            leaseId: nil,
            time: nil,
            message: "The key of asset \(assetId) that its playlist's key URI gave is held: \(detail). Set the clock right if it "
                + "is wrong, then fetch the key again while online (`stowage keys fetch \(assetId)`), or delete the asset and "
                + "download it again."
        )
    }

    /// `event` is not allowed while the lease is in `state`.
    public static func invalidTransition(leaseId: String, assetId: String?, state: LeaseState, event: String) -> Self {
        .init(
            .invalidLeaseTransition,
            assetId: assetId,
            leaseId: leaseId,
            time: nil,
            message: "Cannot \(event) lease \(leaseId) in state \(state.rawValue)."
        )
    }
}

extension LeaseError: StowageError {
    public var subject: ErrorSubject { ErrorSubject(assetId: assetId, leaseId: leaseId) }
}
