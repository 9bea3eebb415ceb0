public import KeyDelivery
import StowageCore

/// The one place the key server decides whether a lease may be issued or renewed, and on what terms.
///
/// Persistent, streaming, identity and renewal requests all pass through ``settle(_:facts:audit:sign:)``, the same
/// rules in the same order, whatever database the store runs on: a store only records the nonce, reads the
/// ``IssuanceFacts`` inside its transaction, calls this, and applies the ``IssuanceWrites`` it returns
/// (``KeyServerStore/saveLease(_:audit:sign:)``). The rules, in order:
///
/// 1. **Entitlement**: the token lists the asset; a renewal's token is of the lease's account.
/// 2. **Lease kind**: `persistentAllowed` for persistent leases and renewals, `identityAllowed` for identity keys; a
///    renewal needs a stored, unreleased, renewable persistent lease of this device, within `renewableUntil`, under a
///    policy that still renews.
/// 3. **Rental** (`oncePerAccount`): the account's rental of the asset starts at the first play any of its leases
///    reported (a streaming lease or an identity stream is a play), and ends when its playback window or the first
///    download's storage window closes. No lease of any kind is issued or renewed after that; a new lease takes the
///    rental's windows, and asking again counts as playing.
/// 4. **Device and stream limits**: with `maxStreams` set, persistent leases count devices against `maxDevices` and
///    streaming ones against `maxStreams`; with `maxStreams` unset, every lease kind counts against `maxDevices`, one
///    pool of devices. A device that already holds a slot keeps it.
/// 5. **Superseding**: a device's new persistent lease releases its older ones of the asset whose keys it covers, and
///    takes their earliest first play.
enum LeaseIssuance {
    /// Judges `request` against `facts` and returns what to write. `sign` runs only for a lease that is issued, over
    /// its settled terms.
    static func settle(
        _ request: IssuanceRequest,
        facts: IssuanceFacts,
        audit: AuditRecord,
        sign: (IssuedLease) throws -> SignedPayload?
    ) throws -> IssuanceDecision {
        switch judge(request, facts: facts) {
        case .refused(let refusal):
            return IssuanceDecision(result: .refused(refusal), writes: IssuanceWrites())
        case .reuse(let open):
            return IssuanceDecision(result: .saved(open, nil), writes: IssuanceWrites(audits: [audit]))
        case .issue(let lease, var writes):
            let payload = try sign(lease)
            writes.upsert = lease
            writes.audits.append(audit)
            return IssuanceDecision(result: .saved(lease, payload), writes: writes)
        }
    }

    private enum Judgement {
        case refused(IssuanceRefusal)
        /// An identity stream already open for the same token.
        case reuse(IssuedLease)
        case issue(IssuedLease, IssuanceWrites)
    }

    private static func judge(_ request: IssuanceRequest, facts: IssuanceFacts) -> Judgement {
        let now = request.now
        let policy = request.policy
        var lease = request.lease
        var writes = IssuanceWrites()

        // 1. Entitlement.
        guard request.entitlement.allows(lease.assetID) else {
            return .refused(.init(.entitlement, .notEntitled, "the entitlement token does not list asset \(lease.assetID)"))
        }

        // 2. What this kind of lease needs.
        switch request.kind {
        case .persistent:
            guard policy.persistentAllowed else {
                return .refused(.init(.persistentAllowed, .notEntitled, "asset \(lease.assetID) may only be streamed: request a streaming lease"))
            }
        case .streaming:
            break
        case .identity:
            guard policy.identityAllowed else {
                return .refused(
                    .init(
                        .identityAllowed,
                        .notEntitled,
                        "asset \(lease.assetID) is not served as a raw identity key (its policy has no identityAllowed); request a "
                            + "lease with POST /v1/keys"
                    )
                )
            }
        case .renewal:
            switch renewed(request, existing: facts.existing) {
            case .success(let renewal): lease = renewal
            case .failure(let refusal): return .refused(refusal)
            }
            guard policy.persistentAllowed else {
                return .refused(
                    .init(.persistentAllowed, .notEntitled, "asset \(lease.assetID) may only be streamed now: its downloads are not renewed")
                )
            }
        }

        // An identity stream already open for the same token is that stream (one player re-fetching keys stays one).
        if request.kind == .identity,
            let open = facts.accountLeases.filter({
                $0.assetID == lease.assetID && $0.deviceID == lease.deviceID && $0.type == .streaming && $0.isActive(at: now)
            }).min(by: { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) })
        {
            return .reuse(open)
        }

        // 3. The account's rental of the asset.
        if policy.oncePerAccount {
            // A renewal's own lease is part of the history as stored (its storage window before this renewal).
            let history =
                facts.accountLeases.filter { $0.assetID == lease.assetID && $0.id != lease.id }
                + (request.kind == .renewal ? [facts.existing].compactMap { $0 } : [])
            switch rental(of: request.kind, lease: &lease, history: history, policy: policy, now: now) {
            case .ended(let end):
                return .refused(
                    .init(
                        .rentalWindow,
                        .notEntitled,
                        "account \(lease.account)'s rental of asset \(lease.assetID) ended at \(HumanTime.date(end)); asking again "
                            + "does not restart it"
                    )
                )
            case .open(let recordFirstPlayOn):
                if let (leaseID, start) = recordFirstPlayOn { writes.firstPlays[leaseID] = start }
            }
        }

        // 4. Device and stream limits.
        if let refusal = limitRefusal(request.kind, lease: lease, policy: policy, leases: facts.accountLeases, now: now) {
            return .refused(refusal)
        }

        // 5. Superseding.
        if request.kind == .persistent {
            for older in facts.accountLeases.sorted(by: { $0.id < $1.id }) where lease.supersedes(older, now: now) {
                lease.firstPlayedAt = [older.firstPlayedAt, lease.firstPlayedAt].compactMap { $0 }.min()
                writes.released.append(older.id)
                writes.audits.append(lease.supersedingAudit(of: older, at: now))
            }
        }
        return .issue(lease, writes)
    }

    /// A renewal's new terms, or why there is none.
    private static func renewed(_ request: IssuanceRequest, existing: IssuedLease?) -> Result<IssuedLease, IssuanceRefusal> {
        let now = request.now
        let id = request.lease.id
        guard let existing, existing.deviceID == request.lease.deviceID else {
            return .failure(.init(.renewal, .unknownLease, "device \(request.lease.deviceID) holds no lease \(id)"))
        }
        guard existing.account == request.entitlement.account else {
            return .failure(
                .init(.entitlement, .notEntitled, "the entitlement token does not cover asset \(existing.assetID) for this lease's account")
            )
        }
        if let releasedAt = existing.releasedAt {
            return .failure(.init(.renewal, .leaseExpired, "lease \(id) was released at \(HumanTime.date(releasedAt)); request new keys"))
        }
        guard existing.type == .persistent, let renewableUntil = existing.renewableUntil else {
            return .failure(.init(.renewal, .renewalNotAllowed, "lease \(id) is not renewable; request new keys"))
        }
        guard now <= renewableUntil else {
            return .failure(
                .init(.renewal, .leaseExpired, "lease \(id) could be renewed until \(HumanTime.date(renewableUntil)); request new keys")
            )
        }
        guard request.policy.renewable else {
            return .failure(
                .init(.renewal, .renewalNotAllowed, "asset \(existing.assetID)'s policy no longer allows renewals; request new keys")
            )
        }
        var lease = existing
        lease.issuedAt = now
        lease.storageExpiresAt = max(existing.storageExpiresAt, now + request.policy.renewalExtension)
        lease.renewalCount += 1
        if let reported = request.reportedFirstPlay, reported <= now + KeyProtocol.clockLeeway {
            lease.firstPlayedAt = min(existing.firstPlayedAt ?? reported, reported)
        }
        return .success(lease)
    }

    private enum Rental {
        case ended(at: Int64)
        /// The rental goes on; the first play to record on an earlier lease of the account (asking again counts as
        /// playing), if any.
        case open(recordFirstPlayOn: (String, Int64)?)
    }

    /// Applies a once-per-account rental to `lease`: its start is the earliest first play of the account's leases of
    /// the asset (`history`, released ones included), and it ends when that start plus the playback duration, or the
    /// first download's storage window, has passed.
    private static func rental(
        of kind: IssuanceRequest.Kind,
        lease: inout IssuedLease,
        history: [IssuedLease],
        policy: AssetPolicy,
        now: Int64
    ) -> Rental {
        let firstDownload = history.filter { $0.type == .persistent }.min { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
        let duration = firstDownload?.playbackDuration ?? policy.playbackDuration
        var start = (history + [lease]).compactMap(\.firstPlayedAt).min()
        // What ends the rental: its playback window once started, and the first download's storage window.
        var ends: [Int64] = []
        if let start, let duration { ends.append(start + duration) }
        if let firstDownload { ends.append(firstDownload.storageExpiresAt) }
        if let end = ends.min(), end <= now { return .ended(at: end) }
        switch kind {
        case .renewal:
            return .open(recordFirstPlayOn: nil)
        case .persistent:
            guard !history.isEmpty else { return .open(recordFirstPlayOn: nil) }
            // Asking again counts as playing: a rental nobody played starts now.
            let started = start ?? now
            var record: (String, Int64)?
            if let firstDownload {
                lease.storageExpiresAt = firstDownload.storageExpiresAt
                lease.renewableUntil = firstDownload.renewableUntil
                lease.playbackDuration = firstDownload.playbackDuration
                if firstDownload.firstPlayedAt == nil { record = (firstDownload.id, started) }
            }
            lease.firstPlayedAt = started
            return .open(recordFirstPlayOn: record)
        case .streaming, .identity:
            // Streaming is playing: the rental starts now if it had not, and the stream ends with it.
            if start == nil { start = now }
            lease.firstPlayedAt = start
            if let start, let duration { lease.storageExpiresAt = min(lease.storageExpiresAt, start + duration) }
            if let firstDownload { lease.storageExpiresAt = min(lease.storageExpiresAt, firstDownload.storageExpiresAt) }
            return .open(recordFirstPlayOn: nil)
        }
    }

    /// The device or stream limit this lease would break, if any.
    private static func limitRefusal(
        _ kind: IssuanceRequest.Kind,
        lease: IssuedLease,
        policy: AssetPolicy,
        leases: [IssuedLease],
        now: Int64
    ) -> IssuanceRefusal? {
        let streaming = kind == .streaming || kind == .identity
        let limit: Int
        let counted: Set<LeaseType>
        if streaming, let maxStreams = policy.maxStreams {
            (limit, counted) = (maxStreams, [.streaming])
        } else if let maxDevices = policy.maxDevices {
            // Without a stream limit of its own, streaming takes a device slot like a download.
            (limit, counted) = (maxDevices, policy.maxStreams == nil ? [.persistent, .streaming] : [.persistent])
        } else {
            return nil
        }
        let holders = Set(leases.filter { $0.id != lease.id && counted.contains($0.type) && $0.isActive(at: now) }.map(\.deviceID))
        guard !holders.contains(lease.deviceID), holders.count >= limit else { return nil }
        if streaming && policy.maxStreams != nil {
            return IssuanceRefusal(
                .streamLimit,
                .streamLimitReached,
                "account \(lease.account) already streams on \(holders.count) devices or players, the most its policy allows; "
                    + "stop one of them or wait until its streaming lease ends"
            )
        }
        return IssuanceRefusal(
            .deviceLimit,
            .deviceLimitReached,
            "account \(lease.account) already holds keys on \(holders.count) devices, the most its policy allows; release a "
                + "download or stop a stream on another device first"
        )
    }
}

/// A request for a lease, as ``LeaseIssuance`` judges it.
public struct IssuanceRequest: Sendable {
    /// The four ways a lease comes to be.
    public enum Kind: String, Sendable, CaseIterable, Hashable {
        /// `POST /v1/keys` with `lease: persistent`: keys kept for offline playback.
        case persistent
        /// `POST /v1/keys` with `lease: streaming`: keys held in memory for online playback.
        case streaming
        /// `GET /v1/identity/ASSET/KEY`: a raw key for an ordinary player, as a stream of the token.
        case identity
        /// `POST /v1/leases/ID/renew`.
        case renewal
    }

    public var kind: Kind
    /// A new lease as proposed (terms from the policy), or for a renewal the lease to renew: its ID and the device
    /// asking (the stored lease is read again in the transaction).
    public var lease: IssuedLease
    /// The asset's policy.
    public var policy: AssetPolicy
    /// What the entitlement token grants.
    public var entitlement: Entitlement
    /// The request's nonce, recorded in the same transaction (nil for identity requests, which carry none).
    public var nonce: RequestNonce?
    public var now: Int64
    /// A renewal's reported first play.
    public var reportedFirstPlay: Int64?

    public init(
        kind: Kind,
        lease: IssuedLease,
        policy: AssetPolicy,
        entitlement: Entitlement,
        nonce: RequestNonce?,
        now: Int64,
        reportedFirstPlay: Int64? = nil
    ) {
        self.kind = kind
        self.lease = lease
        self.policy = policy
        self.entitlement = entitlement
        self.nonce = nonce
        self.now = now
        self.reportedFirstPlay = reportedFirstPlay
    }
}

/// What a verified entitlement token grants: an account, and the assets it may have keys for.
public struct Entitlement: Sendable, Hashable {
    public var account: String
    /// Asset IDs, or `["*"]` for every asset.
    public var assets: [String]

    public init(account: String, assets: [String]) {
        self.account = account
        self.assets = assets
    }

    /// Whether the token lists `assetID` (or `*`).
    public func allows(_ assetID: String) -> Bool {
        assets.contains("*") || assets.contains(assetID)
    }
}

/// What a store reads, inside the transaction, for ``LeaseIssuance`` to judge a request.
public struct IssuanceFacts: Sendable {
    /// The stored lease with the request's lease ID (a renewal's), or nil.
    public var existing: IssuedLease?
    /// The account's leases that matter: every lease of the request's asset (released and expired ones included: they
    /// carry the rental's history), and every active lease of any asset (they hold device and stream slots).
    public var accountLeases: [IssuedLease]

    public init(existing: IssuedLease?, accountLeases: [IssuedLease]) {
        self.existing = existing
        self.accountLeases = accountLeases
    }
}

/// What a store writes for a settled request, in the transaction it read the facts in.
public struct IssuanceWrites: Sendable, Hashable {
    /// The lease to insert, or to update by ID (terms, renewal count and first play; never its release).
    public var upsert: IssuedLease?
    /// Leases released now (superseded), where not released already.
    public var released: [String] = []
    /// First plays to record on other leases, where none is recorded yet.
    public var firstPlays: [String: Int64] = [:]
    /// Audit records, in order.
    public var audits: [AuditRecord] = []

    public init(upsert: IssuedLease? = nil, released: [String] = [], firstPlays: [String: Int64] = [:], audits: [AuditRecord] = []) {
        self.upsert = upsert
        self.released = released
        self.firstPlays = firstPlays
        self.audits = audits
    }
}

/// A settled request: what to answer and what to write.
public struct IssuanceDecision: Sendable {
    public var result: LeaseSaveResult
    public var writes: IssuanceWrites
}

/// Why ``LeaseIssuance`` refused a lease: the rule, and the protocol error the client gets.
public struct IssuanceRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// The rules of the issuance engine, in the order it checks them.
    public enum Rule: String, Sendable, CaseIterable, Hashable {
        case entitlement
        case persistentAllowed
        case identityAllowed
        case renewal
        case rentalWindow
        case deviceLimit
        case streamLimit
    }

    public var rule: Rule
    public var code: KeyProtocolErrorCode
    public var message: String

    public init(_ rule: Rule, _ code: KeyProtocolErrorCode, _ message: String) {
        self.rule = rule
        self.code = code
        self.message = message
    }

    public var description: String { "\(rule.rawValue) (\(code.rawValue)): \(message)" }
}

extension IssuedLease {
    /// Not released, and its storage window still open at `now`: it holds a device or stream slot.
    public func isActive(at now: Int64) -> Bool {
        releasedAt == nil && storageExpiresAt > now
    }
}
