import StowageCore

/// The lease rules evaluated together, in order; the first refusal wins.
///
/// ``standard(highWaterMark:)`` is the protocol's set (docs/key-protocol.md, "Client-side lease rules"): the
/// lease has not ended, the clock was not set back, `now >= issuedAt - 300`, `now < storageExpiresAt`, and, once
/// playback has started, `now < firstPlayedAt + playbackDuration`.
///
/// Three questions, all with `now` passed in:
/// - ``evaluate(_:at:)``: is the lease valid as things stand (for `stowage keys list`)?
/// - ``authorize(_:at:)``: may playback start or go on now? Playback that starts now starts the playback window, so
///   the lease is judged as if first played now.
/// - ``coverage(of:from:duration:)``: will it stay playable for the next `duration` seconds (for `verify --for`)?
public struct LeaseRules: Sendable {
    /// The policies, in evaluation order.
    public let policies: [any LeasePolicy]

    /// Rules from a list of policies, evaluated in the order written.
    public init(@LeasePolicyBuilder _ policies: () -> [any LeasePolicy]) {
        self.policies = policies()
    }

    /// The protocol's rules, with the device's time high-water mark.
    public static func standard(highWaterMark: TimeHighWaterMark) -> LeaseRules {
        LeaseRules {
            LeaseIntegrityPolicy()
            LeaseStatePolicy()
            ClockRollbackPolicy(highWaterMark: highWaterMark)
            IssuedAtPolicy()
            DualExpiryPolicy()
        }
    }

    /// Whether `lease` is valid at `now` as things stand: before first play the playback window does not apply.
    public func evaluate(_ lease: LeaseRecord, at now: Int64) -> LeaseEvaluation {
        LeaseEvaluation(lease: lease, at: now, error: firstRefusal(lease, at: now))
    }

    /// Whether playback may be authorized at `now`.
    ///
    /// If playback has not started, the lease is judged as it will be once first play is recorded at `now`
    /// (`firstPlayedAt = now`), so a lease whose playback window could not even start is refused. When the answer is
    /// yes, the returned evaluation's lease carries that `firstPlayedAt`: the caller must record it in the same
    /// transaction as the authorization (``KeyStore/authorizePlayback(assetId:keyIds:at:)`` does).
    public func authorize(_ lease: LeaseRecord, at now: Int64) -> LeaseEvaluation {
        var started = lease
        if started.firstPlayedAt == nil { started.firstPlayedAt = now }
        if let error = firstRefusal(started, at: now) {
            return LeaseEvaluation(lease: lease, at: now, error: error)
        }
        if started.state == .persisted || started.state == .acquired { started.state = .playing }
        return LeaseEvaluation(lease: started, at: now, error: nil)
    }

    /// Whether playback authorized at `now` would stay allowed for the whole of `[now, now + duration)`, counting the
    /// playback window as starting now if playback has not started (the earliest it can start, so the shortest
    /// window it can have before `now + duration`).
    ///
    /// - Returns: the evaluation at `now` if the lease is refused already; else a refusal with reason
    ///   ``LeaseError/Reason/expiresTooSoon`` if it ends before `now + duration`; else a valid evaluation.
    public func coverage(of lease: LeaseRecord, from now: Int64, duration: Int64) -> LeaseEvaluation {
        let atStart = authorize(lease, at: now)
        guard atStart.isValid, duration > 0 else { return LeaseEvaluation(lease: lease, at: now, error: atStart.error) }
        let required = now.addingClamped(duration)
        var started = lease
        if started.firstPlayedAt == nil { started.firstPlayedAt = now }
        // Every rule only gets stricter as time passes, so the last second of the interval decides.
        guard let error = firstRefusal(started, at: required - 1) else {
            return LeaseEvaluation(lease: lease, at: now, error: nil)
        }
        switch error.reason {
        case .storageWindowExpired, .playbackWindowExpired:
            let end = error.time ?? started.expiresAt
            return LeaseEvaluation(lease: lease, at: now, error: .expiresTooSoon(lease, end: end, required: required))
        default:
            return LeaseEvaluation(lease: lease, at: now, error: error)
        }
    }

    private func firstRefusal(_ lease: LeaseRecord, at now: Int64) -> LeaseError? {
        for policy in policies {
            if case .denied(let error) = policy.evaluate(lease, at: now) { return error }
        }
        return nil
    }
}
