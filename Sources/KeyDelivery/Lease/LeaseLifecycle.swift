/// The life cycle of one lease on this device, as a pure state machine (after async-http-client's
/// `HTTPRequestStateMachine`): events go in, the new state is kept, and an ``Action`` comes out for the caller (the
/// key store) to carry out in the same transaction.
///
/// ```
/// acquired ──persist──▶ persisted ──first play──▶ playing
///     │                    │  ▲ renew                │ ▲ renew
///     │                    ▼  │                      ▼ │
///     └──────────── expire / return ◀────────────────┘
///                          │  (erase key material, queue release)
///                          ▼
///               expired / returned ──server confirms release──▶ released
/// ```
///
/// Events that repeat what already happened (a second first play, a second return, a second confirmation) are
/// accepted and yield ``Action/none``, so retries are idempotent. Events that make no sense (renewing a returned
/// lease, persisting twice) throw ``LeaseError/Reason/invalidTransition``.
public struct LeaseLifecycle: Sendable, Hashable {
    /// What the caller must do to make the new state true on disk.
    public enum Action: Sendable, Hashable {
        /// Nothing changed.
        case none
        /// Store the lease and its signed payload.
        case store
        /// Record `firstPlayedAt` (together with the authorization that caused it).
        case recordFirstPlay(at: Int64)
        /// Replace the stored payload and terms with the renewed ones, in one transaction.
        case replacePayload
        /// Erase the key material (the signed payload), keep the record, and queue a release carrying `deletedAt`.
        case eraseKeyMaterialAndQueueRelease(deletedAt: Int64)
        /// Drop the release from the queue: the server confirmed it.
        case markReleased
    }

    /// The lease as it stands.
    public private(set) var record: LeaseRecord

    /// A lease just received and verified, not stored yet.
    public init(acquired terms: LeaseTerms) {
        self.record = LeaseRecord(terms: terms, state: .acquired)
    }

    /// A lease in a known state (loaded from the key store).
    public init(record: LeaseRecord) {
        self.record = record
    }

    public var state: LeaseState { record.state }

    /// The lease is stored for offline playback.
    public mutating func persist() throws(LeaseError) -> Action {
        guard record.state == .acquired else { throw invalid("persist") }
        record.state = .persisted
        return .store
    }

    /// Playback was authorized at `now`. The first time, this records `firstPlayedAt` and the playback window starts;
    /// later calls change nothing.
    public mutating func startPlayback(at now: Int64) throws(LeaseError) -> Action {
        switch record.state {
        case .acquired, .persisted:
            record.state = .playing
            record.firstPlayedAt = now
            return .recordFirstPlay(at: now)
        case .playing:
            return .none
        case .expired, .returned, .released:
            throw invalid("start playback of")
        }
    }

    /// The server renewed the lease: new terms for the same lease ID, asset and device. `firstPlayedAt` is kept, so the
    /// playback window stays anchored at the first play (the new terms may grant a longer `playbackDuration`).
    public mutating func renew(with terms: LeaseTerms) throws(LeaseError) -> Action {
        guard terms.leaseId == record.leaseId, terms.assetId == record.assetId, terms.deviceId == record.terms.deviceId else {
            throw invalid("renew with the terms of lease \(terms.leaseId) for asset \(terms.assetId) and device \(terms.deviceId)")
        }
        switch record.state {
        case .persisted, .playing:
            record.terms = terms
            return .replacePayload
        case .acquired, .expired, .returned, .released:
            throw invalid("renew")
        }
    }

    /// A window closed at or before `now`: the key material goes and the release is queued.
    public mutating func expire(at now: Int64) throws(LeaseError) -> Action {
        switch record.state {
        case .acquired, .persisted, .playing:
            record.state = .expired
            return .eraseKeyMaterialAndQueueRelease(deletedAt: now)
        case .expired, .returned, .released:
            return .none
        }
    }

    /// The user gives the lease back at `now` (expire now, erase, queue release).
    public mutating func returnLease(at now: Int64) throws(LeaseError) -> Action {
        switch record.state {
        case .acquired, .persisted, .playing:
            record.state = .returned
            return .eraseKeyMaterialAndQueueRelease(deletedAt: now)
        case .expired, .returned, .released:
            return .none
        }
    }

    /// The server answered `{"released": true}`.
    public mutating func confirmRelease() throws(LeaseError) -> Action {
        switch record.state {
        case .expired, .returned:
            record.state = .released
            return .markReleased
        case .released:
            return .none
        case .acquired, .persisted, .playing:
            throw invalid("confirm the release of")
        }
    }

    private func invalid(_ event: String) -> LeaseError {
        .invalidTransition(leaseId: record.leaseId, assetId: record.assetId, state: record.state, event: event)
    }
}
