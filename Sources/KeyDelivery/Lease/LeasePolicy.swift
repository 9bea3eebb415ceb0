/// One lease rule, evaluated against a lease at a time given from outside.
///
/// Shaped like swift-certificates' `VerifierPolicy`: each rule is a small value, rules are composed with
/// ``LeasePolicyBuilder`` into ``LeaseRules``, and none reads a clock (`ExpiryPolicy(fixedValidationTime:)` there,
/// `at now` here), so a rule gives the same answer for the same inputs.
///
/// ```swift
/// let rules = LeaseRules {
///     LeaseStatePolicy()
///     ClockRollbackPolicy(highWaterMark: mark)
///     IssuedAtPolicy()
///     DualExpiryPolicy()
/// }
/// let evaluation = rules.evaluate(lease, at: now)
/// ```
public protocol LeasePolicy: Sendable {
    /// Whether `lease` meets this rule at `now` (whole seconds since the Unix epoch).
    func evaluate(_ lease: LeaseRecord, at now: Int64) -> LeasePolicyResult
}

/// The answer of one ``LeasePolicy``.
public enum LeasePolicyResult: Sendable, Hashable {
    case satisfied
    case denied(LeaseError)

    /// The refusal, if any.
    public var error: LeaseError? {
        if case .denied(let error) = self { return error }
        return nil
    }
}

/// Builds the list of policies of a ``LeaseRules``, in evaluation order.
@resultBuilder
public enum LeasePolicyBuilder {
    public static func buildExpression(_ policy: some LeasePolicy) -> [any LeasePolicy] { [policy] }
    public static func buildExpression(_ policies: [any LeasePolicy]) -> [any LeasePolicy] { policies }
    public static func buildBlock(_ components: [any LeasePolicy]...) -> [any LeasePolicy] { components.flatMap { $0 } }
    public static func buildOptional(_ component: [any LeasePolicy]?) -> [any LeasePolicy] { component ?? [] }
    public static func buildEither(first component: [any LeasePolicy]) -> [any LeasePolicy] { component }
    public static func buildEither(second component: [any LeasePolicy]) -> [any LeasePolicy] { component }
    public static func buildArray(_ components: [[any LeasePolicy]]) -> [any LeasePolicy] { components.flatMap { $0 } }
}

/// Refuses leases that have ended on this device: expired, returned or released (their key material is gone).
public struct LeaseStatePolicy: LeasePolicy {
    public init() {}

    public func evaluate(_ lease: LeaseRecord, at now: Int64) -> LeasePolicyResult {
        switch lease.state {
        case .acquired, .persisted, .playing: .satisfied
        case .expired: .denied(.leaseExpired(lease))
        case .returned: .denied(.returned(lease))
        case .released: .denied(.released(lease))
        }
    }
}

/// The stored lease is the one the server signed and this device recorded: no row that disagrees with its payload, no
/// missing or wrong authentication code (docs/SECURITY.md). Evaluated first, since nothing else about a tampered
/// lease can be believed.
public struct LeaseIntegrityPolicy: LeasePolicy {
    public init() {}

    public func evaluate(_ lease: LeaseRecord, at now: Int64) -> LeasePolicyResult {
        guard let tampering = lease.tampering else { return .satisfied }
        return .denied(.leaseTampered(lease, detail: tampering))
    }
}

/// `now >= issuedAt - leeway` (docs/key-protocol.md, "Client-side lease rules": leeway 300 s).
public struct IssuedAtPolicy: LeasePolicy {
    public let leeway: Int64

    public init(leeway: Int64 = KeyProtocol.clockLeeway) {
        self.leeway = leeway
    }

    public func evaluate(_ lease: LeaseRecord, at now: Int64) -> LeasePolicyResult {
        let start = lease.terms.issuedAt.addingClamped(-leeway)
        return now >= start ? .satisfied : .denied(.notYetValid(lease, start: start))
    }
}

/// `now < storageExpiresAt`.
public struct StorageWindowPolicy: LeasePolicy {
    public init() {}

    public func evaluate(_ lease: LeaseRecord, at now: Int64) -> LeasePolicyResult {
        let end = lease.terms.storageExpiresAt
        return now < end ? .satisfied : .denied(.storageWindowExpired(lease, end: end))
    }
}

/// Once playback has started, `now < firstPlayedAt + playbackDuration`; before first play it does not apply, and a
/// lease without a playback window (`playbackDuration` null) always meets it.
///
/// To ask whether playback may start now, evaluate the lease as if first play happened now (``LeaseRules/authorize(_:at:)``
/// does): a lease whose playback window is empty (`playbackDuration <= 0`) then fails, since the window would close
/// the moment it opened.
public struct PlaybackWindowPolicy: LeasePolicy {
    public init() {}

    public func evaluate(_ lease: LeaseRecord, at now: Int64) -> LeasePolicyResult {
        guard let end = lease.playbackEndsAt else { return .satisfied }
        return now < end ? .satisfied : .denied(.playbackWindowExpired(lease, end: end))
    }
}

/// Both windows at once (dual expiry): the lease is valid until the earlier of the two ends. When both have closed
/// the refusal names the one that closed first, since that is when the lease really ended.
public struct DualExpiryPolicy: LeasePolicy {
    public init() {}

    public func evaluate(_ lease: LeaseRecord, at now: Int64) -> LeasePolicyResult {
        let storage = StorageWindowPolicy().evaluate(lease, at: now)
        let playback = PlaybackWindowPolicy().evaluate(lease, at: now)
        switch (storage.error, playback.error) {
        case (nil, nil): return .satisfied
        case (let error?, nil), (nil, let error?): return .denied(error)
        case (let storageError?, let playbackError?):
            return (playbackError.time ?? .max) < (storageError.time ?? .max) ? .denied(playbackError) : .denied(storageError)
        }
    }
}

/// Refuses playback while the clock reads more than `leeway` seconds below the time high-water mark, and after a
/// rollback was found since the lease was stored or renewed, until that lease is renewed (the protocol's re-anchoring,
/// per lease: docs/SECURITY.md, "Time").
public struct ClockRollbackPolicy: LeasePolicy {
    public let highWaterMark: TimeHighWaterMark

    public init(highWaterMark: TimeHighWaterMark) {
        self.highWaterMark = highWaterMark
    }

    public func evaluate(_ lease: LeaseRecord, at now: Int64) -> LeasePolicyResult {
        guard highWaterMark.isRolledBack(at: now) else { return .satisfied }
        if highWaterMark.isTamperLatched {
            return .denied(
                .leaseTampered(
                    lease,
                    detail: "this device's record of time (in stowage.sqlite and key-store.anchor) was deleted or altered"
                )
            )
        }
        return .denied(
            .clockRollbackDetected(lease, now: now, mark: highWaterMark.mark ?? now, latched: highWaterMark.isRollbackLatched)
        )
    }
}
