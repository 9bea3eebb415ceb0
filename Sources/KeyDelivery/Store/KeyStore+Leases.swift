import Foundation
import GRDB
import StowageCore
public import StowageCrypto

extension KeyStore {
    // MARK: - Acquire, persist, renew

    /// Journals that the server granted a lease. Call it for every verified payload that answers a fresh request (its
    /// `requestNonce` echoes the request's random nonce), streaming ones included; ``persist(_:keyServer:at:)`` does not
    /// do it for you. A key server's time moves nothing here: the device's mark rises with local time only, and a lease
    /// is judged against its own payload's `serverTime` (docs/SECURITY.md, "Time").
    public func recordAcquisition(_ verified: VerifiedLeasePayload, at now: Int64) throws {
        try writeState(at: now) { db, _ in
            let lease = verified.payload.lease
            try AuditJournal.append(
                db,
                kind: .acquire,
                assetId: lease.assetId,
                leaseId: lease.leaseId,
                detail: [
                    "type": .string(lease.type.rawValue),
                    "serverTime": .integer(verified.payload.serverTime),
                    "keyCount": .integer(Int64(verified.payload.keys.count)),
                ],
                at: now
            )
        }
    }

    /// Stores a persistent lease and its signed payload exactly as received, under the key server it came from.
    ///
    /// The payload must verify with the key pinned for `keyServer` (``pin(_:for:at:)``): every later decision verifies
    /// it again with that pin. Storing the same payload again changes nothing (a retried download); another payload for
    /// a stored lease must come through ``renew(_:at:)``.
    ///
    /// - Parameter superseding: also take the new lease into the asset's other leases, as ``supersede(by:at:)`` does, in
    ///   the same transaction: a live recording's group lease (docs/live-recording.md), which must never be stored
    ///   without the asset's first play, or a process killed between the two would leave it a playback window of its own.
    /// - Returns: the stored lease, with the first play it took from the asset's other leases when `superseding`.
    /// - Throws: ``KeyStoreError`` (`lease_not_persistent` for a streaming lease, `lease_already_stored`,
    ///   `server_key_not_pinned`), ``KeySessionError`` `invalid_payload` when the payload does not verify with the pin.
    @discardableResult
    public func persist(
        _ verified: VerifiedLeasePayload,
        keyServer: String,
        at now: Int64,
        superseding: Bool = false
    ) throws -> LeaseRecord {
        let terms = verified.terms
        guard terms.type == .persistent else { throw KeyStoreError.notPersistent(terms.leaseId) }
        let secrets = try secrets()
        let pinsPath = pinsPath
        try Self.checkSignature(verified, keyServer: keyServer, pins: try ServerKeyPins.read(at: pinsPath, secrets: secrets))
        let record = try writeState(at: now) { db, state in
            // The record just stored; nil when this payload was stored before (a retried download).
            var inserted: LeaseRecord?
            if try Self.fetchRow(terms.leaseId, db) != nil {
                guard try Self.fetchPayload(terms.leaseId, db) == verified.signed else {
                    throw KeyStoreError.leaseAlreadyStored(terms.leaseId)
                }
            } else {
                // An asset's keys come from one key server: a lease from another, stored beside one that still holds
                // keys, could authorize playback of the first one's keys.
                if let other = try Self.authenticatedLeases(assetId: terms.assetId, db, state: state, secrets: secrets, pinsPath: pinsPath)
                    .first(where: { $0.keyServer != keyServer && ($0.state.holdsKeyMaterial || $0.hasKeyMaterial) })
                {
                    throw KeyStoreError.leaseFromAnotherKeyServer(assetId: terms.assetId, keyServer: keyServer, held: other.keyServer)
                }
                var lifecycle = LeaseLifecycle(acquired: terms)
                _ = try lifecycle.persist()
                try Self.insert(lifecycle.record, payload: verified, keyServer: keyServer, db, at: now)
                state.vouch(for: terms.leaseId, assetId: terms.assetId, keyServer: keyServer)
                try Self.seal(terms.leaseId, db, secrets: secrets)
                try AuditJournal.append(
                    db,
                    kind: .persist,
                    assetId: terms.assetId,
                    leaseId: terms.leaseId,
                    detail: Self.termsDetail(terms, serverTime: verified.payload.serverTime),
                    at: now
                )
                inserted = lifecycle.record
            }
            // A retried store of a recording's lease supersedes too: the first attempt may have stopped short of it.
            if superseding {
                try Self.supersede(by: terms.leaseId, db, state: &state, secrets: secrets, pinsPath: pinsPath, at: now)
            } else if let inserted {
                return inserted
            }
            return try Self.authenticated(terms.leaseId, db, state: state, secrets: secrets, pinsPath: pinsPath)?.record
                ?? inserted ?? LeaseRecord(terms: terms, state: .persisted)
        }
        if superseding { checkpoint() }
        return record
    }

    /// Stores a renewal: the new terms and signed payload replace the old ones in one transaction, the first play is
    /// kept (the earliest this device or the server knows), and the lease is vouched for again in the ledger with its
    /// latches cleared: a renewal of a lease, verified with the key pinned for the key server that issued it, is the one
    /// thing that clears a rollback or tampering latched on that lease (and on no other). Renewing a lease whose row was
    /// tampered with, or put back from a copy, repairs it: the state is rebuilt from the anchor, the payload and the row,
    /// taking the most restrictive of them, and the terms are the key server's.
    ///
    /// - Throws: ``KeyStoreError`` `unknown_lease`, `server_key_not_pinned`; ``KeySessionError`` `invalid_payload`;
    ///   ``LeaseError`` `invalid_lease_transition` if the lease ended or the payload is for another lease, asset or
    ///   device.
    @discardableResult
    public func renew(_ verified: VerifiedLeasePayload, at now: Int64, initiatedBy: String? = nil) throws -> LeaseRecord {
        let terms = verified.terms
        let secrets = try secrets()
        let pins = try ServerKeyPins.read(at: pinsPath, secrets: secrets)
        return try writeState(at: now) { db, state in
            guard let row = try Self.fetchRow(terms.leaseId, db) else { throw KeyStoreError.unknownLease(terms.leaseId) }
            let ledger = state.ledgerEntry(terms.leaseId)
            // Only the key server that issued the lease renews it. The sealed ledger names it; without that (an entry
            // from before the ledger named it, or a ledger made anew), the row's own key server counts only while the
            // row is as this device wrote it (its code covers the key server and the stored payload).
            let issuer: String
            if let named = ledger?.keyServer {
                issuer = named
            } else if secrets.isAuthentic(row.stateMAC, for: Self.stateFields(row)) {
                issuer = row.keyServer
            } else {
                throw LeaseError.leaseTampered(
                    nil,
                    assetId: row.terms.assetId,
                    detail: "its row in \(KeyStore.databaseFileName) was altered and this device's ledger does not name the key "
                        + "server that issued it, so no key server may renew it; return it (`stowage keys return "
                        + "\(row.terms.assetId)`) or delete the asset and download it again"
                )
            }
            try Self.checkSignature(verified, keyServer: issuer, pins: pins)
            var record = LeaseRecord(
                terms: row.terms,
                state: ledger?.endedAt != nil && row.state.holdsKeyMaterial ? .expired : row.state,
                firstPlayedAt: [row.firstPlayedAt, ledger?.firstPlayedAt].compactMap { $0 }.min()
            )
            if record.state.holdsKeyMaterial { record.state = record.firstPlayedAt == nil ? .persisted : .playing }
            var lifecycle = LeaseLifecycle(record: record)
            _ = try lifecycle.renew(with: terms)
            try db.execute(
                sql: """
                    UPDATE key_leases SET key_ids = ?, issued_at = ?, storage_expires_at = ?, playback_duration = ?,
                        renewable_until = ?, renewed_at = ?, renewal_count = renewal_count + 1, state = ?, first_played_at = ?,
                        key_server = ?
                    WHERE lease_id = ?
                    """,
                arguments: [
                    try Self.keyIdsJSON(terms.keyIds), terms.issuedAt, terms.storageExpiresAt, terms.playbackDuration,
                    terms.renewableUntil, now, lifecycle.record.state.rawValue, lifecycle.record.firstPlayedAt, issuer, terms.leaseId,
                ]
            )
            try db.execute(
                sql: """
                    INSERT INTO key_lease_payloads (lease_id, payload, signature, server_time, stored_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(lease_id) DO UPDATE SET payload = excluded.payload, signature = excluded.signature,
                        server_time = excluded.server_time, stored_at = excluded.stored_at
                    """,
                arguments: [terms.leaseId, verified.signed.payload, verified.signed.signature, verified.payload.serverTime, now]
            )
            let latches = state.anchor.latches(terms.leaseId)
            let vouched = state.ledgerEntry(terms.leaseId) != nil
            state.vouch(for: terms.leaseId, assetId: terms.assetId, keyServer: issuer)
            if let first = lifecycle.record.firstPlayedAt { state.recordFirstPlay(terms.leaseId, at: first) }
            try Self.seal(terms.leaseId, db, secrets: secrets)
            var detail = Self.termsDetail(terms, serverTime: verified.payload.serverTime)
            if let initiatedBy { detail.members["by"] = .string(initiatedBy) }
            try AuditJournal.append(db, kind: .renewal, assetId: terms.assetId, leaseId: terms.leaseId, detail: detail, at: now)
            try AuditJournal.append(
                db,
                kind: .timeReanchored,
                assetId: terms.assetId,
                leaseId: terms.leaseId,
                detail: [
                    "serverTime": .integer(verified.payload.serverTime),
                    "localTime": .integer(now),
                    "rollbackCleared": .bool(latches.rollback),
                    "tamperingCleared": .bool(latches.tamper),
                    "vouchedAgain": .bool(!vouched),
                ],
                at: now
            )
            return lifecycle.record
        }
    }

    // MARK: - Playback

    /// Decides whether `assetId` may play at `now` and, if so, records the first play of every lease it plays under
    /// that has not started yet, in the same transaction, so two concurrent authorizations record one first play.
    ///
    /// The asset plays under the leases that together hold `keyIds` (every key the asset's leases hold when nil):
    /// a recording whose keys rotated holds several (docs/live-recording.md). Each key is taken from a valid lease,
    /// one already playing first (so no second playback window starts), then the one that lasts longest; a key that
    /// only an invalid lease holds refuses the asset with that lease's refusal; a key no lease holds is left to the
    /// caller (the keyring says `key_missing`). Every lease used starts its playback window at the asset's earliest
    /// first play among its valid leases (else `now`), so the asset has one window, and the evaluation returned is
    /// the strictest of them: the one that ends first. A refusal is returned, not thrown: `evaluation.error` says why.
    ///
    /// - Throws: only for storage failures and a missing secret (``KeyStoreError``).
    public func authorizePlayback(assetId: String, keyIds: [String]? = nil, at now: Int64) throws -> LeaseEvaluation {
        let secrets = try secrets()
        let pinsPath = pinsPath
        return try writeState(at: now) { db, state in
            let leases = try Self.authenticatedLeases(assetId: assetId, db, state: state, secrets: secrets, pinsPath: pinsPath)
            let candidates = leases.map { stored in
                LeaseCandidate(
                    stored: stored,
                    evaluation: LeaseRules.standard(highWaterMark: state.time(for: stored)).authorize(stored.record, at: now)
                )
            }
            let selection = Self.select(candidates, keyIds: keyIds, assetId: assetId, at: now)
            guard selection.evaluation.isValid else { return selection.evaluation }
            let starting = selection.used.filter { $0.stored.record.firstPlayedAt == nil }
            guard !starting.isEmpty else { return selection.evaluation }
            let started = candidates.filter { $0.evaluation.isValid }.compactMap(\.stored.record.firstPlayedAt)
            let firstPlay = min(started.min() ?? now, now)
            var used: [LeaseCandidate] = selection.used.filter { $0.stored.record.firstPlayedAt != nil }
            for candidate in starting {
                var lifecycle = LeaseLifecycle(record: candidate.stored.record)
                _ = try lifecycle.startPlayback(at: firstPlay)
                // The IS NULL guard keeps the first value even if two writers ever raced past the transaction.
                try db.execute(
                    sql: "UPDATE key_leases SET first_played_at = ?, state = ? WHERE lease_id = ? AND first_played_at IS NULL",
                    arguments: [firstPlay, lifecycle.record.state.rawValue, candidate.stored.leaseId]
                )
                state.recordFirstPlay(candidate.stored.leaseId, at: firstPlay)
                try Self.seal(candidate.stored.leaseId, db, secrets: secrets)
                var detail: AuditDetail = ["expiresAt": .integer(lifecycle.record.expiresAt)]
                if let end = lifecycle.record.playbackEndsAt { detail.members["playbackEndsAt"] = .integer(end) }
                if firstPlay != now { detail.members["firstPlayedAt"] = .integer(firstPlay) }
                try AuditJournal.append(db, kind: .firstPlay, assetId: assetId, leaseId: candidate.stored.leaseId, detail: detail, at: now)
                var stored = candidate.stored
                stored.record = lifecycle.record
                let rules = LeaseRules.standard(highWaterMark: state.time(for: stored))
                used.append(LeaseCandidate(stored: stored, evaluation: rules.evaluate(lifecycle.record, at: now)))
            }
            return Self.strictest(used, assetId: assetId, at: now)
        }
    }

    /// The lease status of `assetId` at `now` as things stand (playback not started stays not started), over the
    /// leases that hold `keyIds` as ``authorizePlayback(assetId:keyIds:at:)`` chooses them. Records the local time like
    /// every operation, so a clock set back is caught here too.
    public func evaluate(assetId: String, keyIds: [String]? = nil, at now: Int64) throws -> LeaseEvaluation {
        try judge(assetId: assetId, keyIds: keyIds, at: now) { rules, record in rules.evaluate(record, at: now) }
    }

    /// Whether `assetId` stays playable for the next `duration` seconds (`stowage verify --for 48h`), counting the
    /// playback window as starting now if playback has not started, over the leases that hold `keyIds`. Nothing is
    /// recorded but the local time.
    public func coverage(assetId: String, keyIds: [String]? = nil, duration: Int64, at now: Int64) throws -> LeaseEvaluation {
        try judge(assetId: assetId, keyIds: keyIds, at: now) { rules, record in rules.coverage(of: record, from: now, duration: duration) }
    }

    private func judge(
        assetId: String,
        keyIds: [String]?,
        at now: Int64,
        _ rule: (LeaseRules, LeaseRecord) -> LeaseEvaluation
    ) throws -> LeaseEvaluation {
        let secrets = try secrets()
        let pinsPath = pinsPath
        return try writeState(at: now) { db, state in
            let candidates = try Self.authenticatedLeases(assetId: assetId, db, state: state, secrets: secrets, pinsPath: pinsPath)
                .map { stored in
                    LeaseCandidate(stored: stored, evaluation: rule(LeaseRules.standard(highWaterMark: state.time(for: stored)), stored.record))
                }
            return Self.select(candidates, keyIds: keyIds, assetId: assetId, at: now).evaluation
        }
    }

    /// A stored lease and what a rule says of it now.
    struct LeaseCandidate {
        var stored: StoredLease
        var evaluation: LeaseEvaluation
    }

    /// The leases an asset plays under and the evaluation to report.
    struct LeaseSelection {
        /// The valid leases that together hold the keys asked for; empty on a refusal.
        var used: [LeaseCandidate]
        /// The strictest of `used`, or the refusal.
        var evaluation: LeaseEvaluation
    }

    /// Picks, for the keys `keyIds` (nil: every key of a lease in a state that holds keys), valid leases that hold
    /// them: preferring one whose playback started (no second window), then the longest-lasting. When a key is held
    /// only by leases that are not valid, the refusal of the likeliest of those (one still holding keys, then the
    /// latest issued) is the answer. Keys no lease holds are not the lease's to judge.
    static func select(_ candidates: [LeaseCandidate], keyIds: [String]?, assetId: String, at now: Int64) -> LeaseSelection {
        let held = Set(candidates.flatMap(\.stored.record.terms.keyIds))
        var uncovered =
            keyIds.map { Set($0).intersection(held) }
            ?? Set(candidates.filter { $0.stored.state.holdsKeyMaterial }.flatMap(\.stored.record.terms.keyIds))
        if uncovered.isEmpty {
            // No key to judge: report the lease that says most about the asset.
            let valid = preferred(candidates.filter { $0.evaluation.isValid }).first
            var evaluation = valid?.evaluation ?? likeliestRefusal(candidates)?.evaluation ?? .noLease(assetId: assetId, at: now)
            if let valid { evaluation.playingLeaseIds = [valid.stored.leaseId] }
            return LeaseSelection(used: valid.map { [$0] } ?? [], evaluation: evaluation)
        }
        var used: [LeaseCandidate] = []
        for candidate in preferred(candidates.filter { $0.evaluation.isValid }) {
            let keys = Set(candidate.stored.record.terms.keyIds)
            guard !keys.isDisjoint(with: uncovered) else { continue }
            used.append(candidate)
            uncovered.subtract(keys)
            if uncovered.isEmpty { break }
        }
        guard uncovered.isEmpty else {
            let holders = candidates.filter { !$0.evaluation.isValid && !Set($0.stored.record.terms.keyIds).isDisjoint(with: uncovered) }
            return LeaseSelection(used: [], evaluation: likeliestRefusal(holders)?.evaluation ?? .noLease(assetId: assetId, at: now))
        }
        return LeaseSelection(used: used, evaluation: strictest(used, assetId: assetId, at: now))
    }

    /// Valid candidates, best first: one whose playback started before one that has not, then the longest-lasting.
    private static func preferred(_ valid: [LeaseCandidate]) -> [LeaseCandidate] {
        valid.sorted { a, b in
            let aStarted = a.stored.record.playbackStartedAt != nil
            let bStarted = b.stored.record.playbackStartedAt != nil
            if aStarted != bStarted { return aStarted }
            return a.stored.record.expiresAt(ifFirstPlayedAt: a.evaluation.evaluatedAt)
                > b.stored.record.expiresAt(ifFirstPlayedAt: b.evaluation.evaluatedAt)
        }
    }

    /// The refusal to report: a lease still holding keys before one that ended, then the latest issued.
    private static func likeliestRefusal(_ candidates: [LeaseCandidate]) -> LeaseCandidate? {
        candidates.max { a, b in
            let aHeld = a.stored.state.holdsKeyMaterial
            let bHeld = b.stored.state.holdsKeyMaterial
            if aHeld != bHeld { return bHeld }
            return a.stored.record.terms.issuedAt < b.stored.record.terms.issuedAt
        }
    }

    /// The evaluation of the lease among `used` that ends first (a refusal first, should one be there), naming every
    /// lease of `used` as the ones the asset plays under.
    private static func strictest(_ used: [LeaseCandidate], assetId: String, at now: Int64) -> LeaseEvaluation {
        if let refused = used.first(where: { !$0.evaluation.isValid }) { return refused.evaluation }
        guard
            var evaluation = used.min(by: { a, b in
                a.stored.record.expiresAt(ifFirstPlayedAt: a.evaluation.evaluatedAt)
                    < b.stored.record.expiresAt(ifFirstPlayedAt: b.evaluation.evaluatedAt)
            })?.evaluation
        else { return .noLease(assetId: assetId, at: now) }
        evaluation.playingLeaseIds = used.map(\.stored.leaseId)
        return evaluation
    }

    // MARK: - Ending leases

    /// Ends a lease now: erases its key material, keeps the record and queues the release. Idempotent.
    @discardableResult
    public func expire(leaseId: String, at now: Int64) throws -> LeaseRecord {
        let record = try end(leaseId: leaseId, at: now, kind: .expiry, reason: "requested") { lifecycle in
            try lifecycle.expire(at: now)
        }
        checkpoint()
        return record
    }

    /// Returns a lease: expires it now, erases its key material and queues the release. Idempotent.
    @discardableResult
    public func returnLease(leaseId: String, at now: Int64) throws -> LeaseRecord {
        let record = try end(leaseId: leaseId, at: now, kind: .return, reason: "returned") { lifecycle in
            try lifecycle.returnLease(at: now)
        }
        checkpoint()
        return record
    }

    /// Takes `leaseId`, a lease just stored for an asset that holds others (a live recording whose keys rotated,
    /// docs/live-recording.md), into the asset's leases: it gets the earliest first play of any lease the asset ever had
    /// here (ended ones included, so neither a key rotation nor a recording resumed after its window closed starts a
    /// second playback window), journalled as that first play; and every older lease that still holds keys and whose
    /// key IDs it covers, for the same device and key server, is returned (key material erased, release queued). Older
    /// leases holding other keys stay: a recording keeps one lease per group of keys. In one transaction.
    ///
    /// - Returns: the leases that were returned.
    /// - Throws: ``KeyStoreError`` `unknown_lease` when `leaseId` is not stored; ``LeaseError`` `lease_tampered` when
    ///   the newer lease's row does not match its seal.
    @discardableResult
    public func supersede(by leaseId: String, at now: Int64) throws -> [LeaseRecord] {
        let secrets = try secrets()
        let pinsPath = pinsPath
        let returned = try writeState(at: now) { db, state in
            try Self.supersede(by: leaseId, db, state: &state, secrets: secrets, pinsPath: pinsPath, at: now)
        }
        checkpoint()
        return returned
    }

    /// The body of ``supersede(by:at:)``, inside the caller's transaction.
    @discardableResult
    static func supersede(
        by leaseId: String,
        _ db: Database,
        state: inout ClientState,
        secrets: KeyStoreSecrets,
        pinsPath: String,
        at now: Int64
    ) throws -> [LeaseRecord] {
        guard let newer = try Self.authenticated(leaseId, db, state: state, secrets: secrets, pinsPath: pinsPath) else {
            throw KeyStoreError.unknownLease(leaseId)
        }
        if let tampering = newer.record.tampering {
            throw LeaseError.leaseTampered(newer.record, assetId: newer.assetId, detail: tampering)
        }
        let all = try Self.authenticatedLeases(assetId: newer.assetId, db, state: state, secrets: secrets, pinsPath: pinsPath)
            .filter { $0.leaseId != leaseId }
        let covered = Set(newer.record.terms.keyIds)
        let older = all.filter {
            ($0.state.holdsKeyMaterial || $0.hasKeyMaterial) && $0.keyServer == newer.keyServer
                && $0.record.terms.deviceId == newer.record.terms.deviceId && covered.isSuperset(of: $0.record.terms.keyIds)
                && $0.record.terms.issuedAt <= newer.record.terms.issuedAt
        }
        let ledger = all.compactMap { state.ledgerEntry($0.leaseId)?.firstPlayedAt }
        let firstPlay = (all.compactMap(\.record.firstPlayedAt) + ledger + [newer.record.firstPlayedAt].compactMap { $0 }).min()
        if let firstPlay, firstPlay != newer.record.firstPlayedAt, newer.state.holdsKeyMaterial {
            var lifecycle = LeaseLifecycle(record: newer.record)
            if newer.record.firstPlayedAt == nil { _ = try lifecycle.startPlayback(at: firstPlay) }
            try db.execute(
                sql: "UPDATE key_leases SET first_played_at = ?, state = ? WHERE lease_id = ?",
                arguments: [firstPlay, lifecycle.record.state.rawValue, leaseId]
            )
            state.recordFirstPlay(leaseId, at: firstPlay)
            try Self.seal(leaseId, db, secrets: secrets)
            try AuditJournal.append(
                db,
                kind: .firstPlay,
                assetId: newer.assetId,
                leaseId: leaseId,
                detail: ["firstPlayedAt": .integer(firstPlay), "carriedFrom": .string("superseded leases")],
                at: now
            )
        }
        var records: [LeaseRecord] = []
        for stored in older {
            records.append(
                try Self.end(stored, at: now, kind: .return, reason: "superseded by \(leaseId)", db, state: &state, secrets: secrets) {
                    try $0.returnLease(at: now)
                }
            )
        }
        return records
    }

    /// Supersedes, newest first, with every lease of `assetId` that holds keys, so no lease whose keys a later one
    /// covers is left holding them: for a recording whose leases were stored by a version of Stowage that stored and
    /// superseded in two transactions, and killed between them (``persist(_:keyServer:at:superseding:)`` now does both
    /// in one).
    ///
    /// - Returns: the leases that were returned.
    @discardableResult
    public func supersedeCovered(assetId: String, at now: Int64) throws -> [LeaseRecord] {
        let holding = try leases(assetId: assetId).filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial && $0.record.tampering == nil }
        guard holding.count > 1 else { return [] }
        var returned: [LeaseRecord] = []
        for lease in holding.sorted(by: { $0.record.terms.issuedAt > $1.record.terms.issuedAt }) {
            guard !returned.contains(where: { $0.leaseId == lease.leaseId }) else { continue }
            returned += try supersede(by: lease.leaseId, at: now)
        }
        return returned
    }

    /// Returns every lease of `assetId` that still holds keys and erases the asset's sealed identity keys.
    ///
    /// - Returns: the leases that were returned.
    @discardableResult
    public func returnAsset(assetId: String, at now: Int64) throws -> [LeaseRecord] {
        let secrets = try secrets()
        let pinsPath = pinsPath
        let returned = try writeState(at: now) { db, state in
            var records: [LeaseRecord] = []
            for stored in try Self.authenticatedLeases(assetId: assetId, db, state: state, secrets: secrets, pinsPath: pinsPath)
            where stored.state.holdsKeyMaterial || stored.hasKeyMaterial {
                records.append(
                    try Self.end(stored, at: now, kind: .return, reason: "returned", db, state: &state, secrets: secrets) { lifecycle in
                        try lifecycle.returnLease(at: now)
                    }
                )
            }
            try Self.eraseIdentityKeys(assetId: assetId, reason: "returned", db, at: now)
            return records
        }
        checkpoint()
        return returned
    }

    /// Erases the key material of every lease whose storage or playback window has closed at `now`, or that the anchor
    /// says has ended, queuing their releases; and the sealed identity keys whose local lifetime has ended. Runs every
    /// time the store is opened.
    @discardableResult
    public func purgeExpired(at now: Int64) throws -> PurgeReport {
        let secrets = try secrets()
        let pinsPath = pinsPath
        let report = try writeState(at: now) { db, state in
            var expired: [String] = []
            for stored in try Self.authenticatedLeases(assetId: nil, db, state: state, secrets: secrets, pinsPath: pinsPath) {
                let windowClosed = DualExpiryPolicy().evaluate(stored.record, at: now).error
                let endedElsewhere = state.ledgerEntry(stored.leaseId)?.endedAt != nil
                // A payload that is still stored for a lease that ended (copied back into the table) goes too.
                guard
                    (stored.state.holdsKeyMaterial && (windowClosed != nil || endedElsewhere))
                        || (!stored.state.holdsKeyMaterial && stored.hasKeyMaterial)
                else { continue }
                try Self.end(stored, at: now, kind: .expiry, reason: windowClosed?.code.rawValue ?? "ended", db, state: &state, secrets: secrets) {
                    lifecycle in try lifecycle.expire(at: now)
                }
                expired.append(stored.leaseId)
            }
            let uris = try String.fetchAll(
                db,
                sql: "SELECT uri FROM key_identity_keys WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY uri",
                arguments: [now]
            )
            for uri in uris {
                try Self.eraseIdentityKey(uri: uri, reason: "expired", db, at: now)
            }
            return PurgeReport(expiredLeaseIds: expired, erasedIdentityKeyURIs: uris)
        }
        if !report.expiredLeaseIds.isEmpty || !report.erasedIdentityKeyURIs.isEmpty { checkpoint() }
        return report
    }

    private func end(
        leaseId: String,
        at now: Int64,
        kind: AuditEventKind,
        reason: String,
        event: (inout LeaseLifecycle) throws -> LeaseLifecycle.Action
    ) throws -> LeaseRecord {
        let secrets = try secrets()
        let pinsPath = pinsPath
        return try writeState(at: now) { db, state in
            guard let stored = try Self.authenticated(leaseId, db, state: state, secrets: secrets, pinsPath: pinsPath) else {
                throw KeyStoreError.unknownLease(leaseId)
            }
            return try Self.end(stored, at: now, kind: kind, reason: reason, db, state: &state, secrets: secrets, event: event)
        }
    }

    /// Erases the key material of `stored`, records the end (row, anchor, journal) and queues the release with its code.
    @discardableResult
    static func end(
        _ stored: StoredLease,
        at now: Int64,
        kind: AuditEventKind,
        reason: String,
        _ db: Database,
        state: inout ClientState,
        secrets: KeyStoreSecrets,
        event: (inout LeaseLifecycle) throws -> LeaseLifecycle.Action
    ) throws -> LeaseRecord {
        var lifecycle = LeaseLifecycle(record: stored.record)
        let action = try event(&lifecycle)
        guard action != .none || stored.hasKeyMaterial else { return lifecycle.record }
        let deletedAt: Int64
        if case .eraseKeyMaterialAndQueueRelease(let at) = action { deletedAt = at } else { deletedAt = now }
        try db.execute(sql: "DELETE FROM key_lease_payloads WHERE lease_id = ?", arguments: [stored.leaseId])
        if action != .none {
            try db.execute(
                sql: "UPDATE key_leases SET state = ?, ended_at = ? WHERE lease_id = ?",
                arguments: [lifecycle.record.state.rawValue, deletedAt, stored.leaseId]
            )
            // Queuing is idempotent: a release already queued keeps its first deletedAt.
            if try
                !(Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM key_release_queue WHERE lease_id = ?)", arguments: [stored.leaseId]) ?? false)
            {
                try db.execute(
                    sql: "INSERT INTO key_release_queue (lease_id, deleted_at, queued_at, mac) VALUES (?, ?, ?, ?)",
                    arguments: [stored.leaseId, deletedAt, now, Data(try secrets.authenticationCode(for: releaseFields(stored.leaseId, deletedAt)))]
                )
            }
        }
        state.recordEnd(stored.leaseId, at: deletedAt)
        try seal(stored.leaseId, db, secrets: secrets)
        try AuditJournal.append(
            db,
            kind: kind,
            assetId: stored.assetId,
            leaseId: stored.leaseId,
            detail: ["reason": .string(reason), "keyMaterialErased": .bool(true), "releaseQueued": .bool(true)],
            at: now
        )
        return lifecycle.record
    }

    // MARK: - Release queue

    /// Releases waiting to be sent, oldest first. Only releases whose queue entry authenticates and whose lease has
    /// really ended (its key material erased) are listed: a release added by hand for a lease that still holds its keys
    /// would free a device slot on the server while the keys stay here. The queue survives restarts.
    public func pendingReleases() throws -> [PendingRelease] {
        let secrets = try secrets()
        let pinsPath = pinsPath
        let ledger = ClientState.ledger(secrets: secrets, anchorPath: anchorPath)
        return try read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM key_release_queue ORDER BY queued_at, lease_id")
            var pending: [PendingRelease] = []
            for row in rows {
                let leaseId: String = try row.decode(forColumn: "lease_id")
                let deletedAt: Int64 = try row.decode(forColumn: "deleted_at")
                guard
                    secrets.isAuthentic((try row.decode(forColumn: "mac") as Data?).map { [UInt8]($0) }, for: Self.releaseFields(leaseId, deletedAt)),
                    let lease = try Self.authenticated(leaseId, db, ledger: ledger, secrets: secrets, pinsPath: pinsPath),
                    lease.record.tampering == nil, !lease.state.holdsKeyMaterial, !lease.hasKeyMaterial
                else { continue }
                pending.append(
                    PendingRelease(
                        leaseId: leaseId,
                        assetId: lease.assetId,
                        deviceId: lease.record.terms.deviceId,
                        keyServer: lease.keyServer,
                        deletedAt: deletedAt,
                        firstPlayedAt: lease.record.playbackStartedAt,
                        queuedAt: try row.decode(forColumn: "queued_at"),
                        attempts: try row.decode(forColumn: "attempts"),
                        lastError: try row.decode(forColumn: "last_error"),
                        lastAttemptAt: try row.decode(forColumn: "last_attempt_at")
                    )
                )
            }
            return pending
        }
    }

    /// The server confirmed the release (`{"released": true}`): the lease becomes released and leaves the queue.
    /// Confirming again changes nothing.
    ///
    /// - Throws: ``KeyStoreError`` `unknown_lease`; ``LeaseError`` `invalid_lease_transition` if the lease still holds
    ///   key material.
    @discardableResult
    public func markReleased(leaseId: String, at now: Int64) throws -> LeaseRecord {
        let secrets = try secrets()
        let pinsPath = pinsPath
        return try writeState(at: now) { db, state in
            guard let stored = try Self.authenticated(leaseId, db, state: state, secrets: secrets, pinsPath: pinsPath) else {
                throw KeyStoreError.unknownLease(leaseId)
            }
            var lifecycle = LeaseLifecycle(record: stored.record)
            let action = try lifecycle.confirmRelease()
            guard action != .none else { return lifecycle.record }
            try db.execute(sql: "DELETE FROM key_release_queue WHERE lease_id = ?", arguments: [leaseId])
            try db.execute(
                sql: "UPDATE key_leases SET state = ?, released_at = ? WHERE lease_id = ?",
                arguments: [lifecycle.record.state.rawValue, now, leaseId]
            )
            try Self.seal(leaseId, db, secrets: secrets)
            try AuditJournal.append(db, kind: .release, assetId: stored.assetId, leaseId: leaseId, detail: [:], at: now)
            return lifecycle.record
        }
    }

    /// Records a failed attempt to send a release; it stays queued.
    public func recordReleaseFailure(leaseId: String, error: String, at now: Int64) throws {
        try write { db in
            try db.execute(
                sql: "UPDATE key_release_queue SET attempts = attempts + 1, last_error = ?, last_attempt_at = ? WHERE lease_id = ?",
                arguments: [error, now, leaseId]
            )
            guard db.changesCount > 0 else { return }
            let attempts = try Int64.fetchOne(db, sql: "SELECT attempts FROM key_release_queue WHERE lease_id = ?", arguments: [leaseId])
            let assetId = try String.fetchOne(db, sql: "SELECT asset_id FROM key_leases WHERE lease_id = ?", arguments: [leaseId])
            try AuditJournal.append(
                db,
                kind: .releaseFailed,
                assetId: assetId,
                leaseId: leaseId,
                detail: ["attempts": .integer(attempts ?? 0), "error": .string(error)],
                at: now
            )
        }
    }

    static func releaseFields(_ leaseId: String, _ deletedAt: Int64) -> CanonicalFields {
        var fields = CanonicalFields(domain: "stowage-release-v1")
        fields.append(leaseId)
        fields.append(deletedAt)
        return fields
    }

    // MARK: - First-play reports

    /// Leases whose playback started on this device and whose key server has not been told yet (intact leases only),
    /// for ``KeySession/sync()`` and renewals.
    public func pendingFirstPlayReports() throws -> [StoredLease] {
        try leases().filter { $0.record.tampering == nil && $0.record.firstPlayedAt != nil && $0.firstPlayReportedAt == nil }
    }

    /// The key server acknowledged the first play of `leaseId`.
    public func markFirstPlayReported(leaseId: String, at now: Int64) throws {
        try write { db in
            try db.execute(sql: "UPDATE key_leases SET first_play_reported_at = ? WHERE lease_id = ?", arguments: [now, leaseId])
            guard db.changesCount > 0 else { return }
            let assetId = try String.fetchOne(db, sql: "SELECT asset_id FROM key_leases WHERE lease_id = ?", arguments: [leaseId])
            try AuditJournal.append(db, kind: .firstPlayReported, assetId: assetId, leaseId: leaseId, detail: [:], at: now)
        }
    }

    // MARK: - Queries

    /// One stored lease, as authenticated now (``LeaseRecord/tampering`` says what disagrees).
    public func lease(id leaseId: String) throws -> StoredLease? {
        let secrets = try secrets()
        let ledger = ClientState.ledger(secrets: secrets, anchorPath: anchorPath)
        let pinsPath = pinsPath
        return try read { db in try Self.authenticated(leaseId, db, ledger: ledger, secrets: secrets, pinsPath: pinsPath) }
    }

    /// Stored leases, of one asset or all, oldest first, as authenticated now.
    public func leases(assetId: String? = nil) throws -> [StoredLease] {
        let secrets = try secrets()
        let ledger = ClientState.ledger(secrets: secrets, anchorPath: anchorPath)
        let pinsPath = pinsPath
        return try read { db in
            let pins = Result { try ServerKeyPins.read(at: pinsPath, secrets: secrets) }
            return try Self.fetchRows(assetId: assetId, db).map { Self.authenticate($0, ledger: ledger, pins: pins, secrets: secrets) }
        }
    }

    /// What the store knows, from authenticated records only, about the leases of `assetId`: whether the asset has had
    /// a lease here (a lease row, or an entry of the sealed ledger naming the asset, so deleting the rows does not
    /// forget it), and which key IDs its leases that still hold keys were signed for. The playback gate decides from
    /// this, never from the package's `manifest.json` alone, whether a lease is needed and which keys it covers.
    public func leaseFacts(assetId: String) throws -> AssetLeaseFacts {
        let secrets = try secrets()
        let ledger = ClientState.ledger(secrets: secrets, anchorPath: anchorPath)
        let leases = try leases(assetId: assetId)
        let inLedger = ledger.leases.values.contains { $0.assetId == assetId }
        let held = leases.filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial && $0.record.tampering == nil }
        return AssetLeaseFacts(
            hasHadLease: inLedger || !leases.isEmpty,
            heldKeyIds: Set(held.flatMap(\.record.terms.keyIds)),
            identityKeyURIs: try identityKeyURIs(assetId: assetId)
        )
    }

    /// The signed payload pair exactly as received (the latest renewal's); nil once the key material is erased.
    public func storedPayload(leaseId: String) throws -> SignedPayload? {
        try read { db in try Self.fetchPayload(leaseId, db) }
    }

    /// The content keys of a stored lease, keyed by key ID, unwrapped with the device's X25519 key, after the lease
    /// was authenticated (its payload verified again with the pinned key, its row checked). Works offline; does not
    /// authorize playback (``authorizePlayback(assetId:keyIds:at:)`` does).
    ///
    /// - Throws: ``KeySessionError`` `lease_not_stored`; ``LeaseError`` `lease_tampered`; key-wrapping errors.
    public func contentKeys(leaseId: String, device: DeviceIdentity) throws -> [String: SecretBytes] {
        guard let lease = try lease(id: leaseId), lease.state.holdsKeyMaterial, let signed = try storedPayload(leaseId: leaseId) else {
            throw KeySessionError.leaseNotStored(leaseId)
        }
        if let tampering = lease.record.tampering { throw LeaseError.leaseTampered(lease.record, detail: tampering) }
        let secrets = try secrets()
        let pins = try ServerKeyPins.read(at: pinsPath, secrets: secrets)
        guard let key = pins.key(for: lease.keyServer) else { throw KeyStoreError.serverKeyNotPinned(url: lease.keyServer) }
        let payload = try Self.verifiedPayload(signed, key: key)
        guard payload.lease.leaseId == leaseId, payload.lease.deviceId == device.deviceId else {
            throw KeySessionError.payloadMismatch("deviceId", expected: device.deviceId, got: payload.lease.deviceId)
        }
        return try payload.unwrappedKeys(for: device)
    }

    // MARK: - Pins

    /// The signing key pinned for the key server at `url` (normalized with ``KeyServerURL/normalized(_:)``), or nil.
    ///
    /// - Throws: ``KeyStoreError`` `pinned_key_damaged` when the pins file was edited outside Stowage.
    public func pinnedServerKey(for url: String) throws -> Ed25519.PublicKey? {
        try ServerKeyPins.read(at: pinsPath, secrets: try secrets()).key(for: url)
    }

    /// Pins `key` for the key server at `url`. Pinning the key already pinned changes nothing.
    ///
    /// - Throws: ``KeyStoreError`` `server_key_mismatch` when another key is pinned for `url`.
    public func pin(_ key: Ed25519.PublicKey, for url: String, at now: Int64) throws {
        let secrets = try secrets()
        let pinsPath = pinsPath
        try write { db in
            var pins = try ServerKeyPins.read(at: pinsPath, secrets: secrets)
            if let pinned = pins.key(for: url) {
                guard pinned.rawRepresentation == key.rawRepresentation else {
                    throw KeyStoreError.serverKeyMismatch(
                        url: url,
                        pinned: StrictBase64.encode(pinned.rawRepresentation),
                        presented: StrictBase64.encode(key.rawRepresentation)
                    )
                }
                return
            }
            try pins.pin(key, for: url, at: now, secrets: secrets)
            try pins.write(to: pinsPath)
            try AuditJournal.append(
                db,
                kind: .serverKeyPinned,
                assetId: nil,
                leaseId: nil,
                detail: ["keyServer": .string(url), "signingKey": .string(StrictBase64.encode(key.rawRepresentation))],
                at: now
            )
        }
    }

    /// Forgets the key pinned for `url`, so the next download from it pins the key it presents then.
    ///
    /// - Returns: false when nothing was pinned for `url`.
    /// - Throws: ``KeyStoreError`` `lease_already_stored` while a lease from that key server still holds keys (it could
    ///   not be checked any more).
    @discardableResult
    public func unpin(_ url: String, at now: Int64) throws -> Bool {
        let secrets = try secrets()
        let pinsPath = pinsPath
        return try write { db in
            let holding = try String.fetchAll(
                db,
                sql: "SELECT l.lease_id FROM key_leases l JOIN key_lease_payloads p ON p.lease_id = l.lease_id WHERE l.key_server = ?",
                arguments: [url]
            )
            if let leaseId = holding.first { throw KeyStoreError.pinInUse(url: url, leaseId: leaseId) }
            var pins = try ServerKeyPins.read(at: pinsPath, secrets: secrets)
            guard pins.remove(url) else { return false }
            try pins.write(to: pinsPath)
            try AuditJournal.append(db, kind: .serverKeyUnpinned, assetId: nil, leaseId: nil, detail: ["keyServer": .string(url)], at: now)
            return true
        }
    }

    // MARK: - Authentication

    /// A lease row as stored, before any check.
    struct LeaseRow {
        var terms: LeaseTerms
        var state: LeaseState
        var keyServer: String
        var firstPlayedAt: Int64?
        var endedAt: Int64?
        var releasedAt: Int64?
        var persistedAt: Int64
        var renewedAt: Int64?
        var renewalCount: Int
        var firstPlayReportedAt: Int64?
        var stateMAC: [UInt8]?
        var payload: SignedPayload?
    }

    /// The canonical fields of the state this device adds to a lease, bound to its lease ID, asset, device and key
    /// server and to the digest of the stored payload (empty once erased).
    static func stateFields(_ row: LeaseRow) -> CanonicalFields {
        var fields = CanonicalFields(domain: "stowage-lease-state-v1")
        fields.append(row.terms.leaseId)
        fields.append(row.terms.assetId)
        fields.append(row.terms.deviceId)
        fields.append(row.keyServer)
        fields.append(row.state.rawValue)
        fields.append(row.firstPlayedAt)
        fields.append(row.endedAt)
        fields.append(row.releasedAt)
        fields.append(row.payload.map { SHA256Hasher.hash(Array("\($0.payload)\n\($0.signature)".utf8)) })
        return fields
    }

    /// Recomputes the authentication code of a lease row after this store changed it.
    static func seal(_ leaseId: String, _ db: Database, secrets: KeyStoreSecrets) throws {
        guard let row = try fetchRow(leaseId, db) else { return }
        try db.execute(
            sql: "UPDATE key_leases SET state_mac = ? WHERE lease_id = ?",
            arguments: [Data(try secrets.authenticationCode(for: stateFields(row))), leaseId]
        )
    }

    /// Judges a stored lease: the terms come from its signed payload, verified with the key pinned for its key server
    /// (the columns only when the payload is erased); the row must agree with them and carry a valid code; the first
    /// play and end are merged with the anchor's, the restrictive way.
    static func authenticate(
        _ row: LeaseRow,
        ledger: KeyStoreAnchor,
        pins: Result<ServerKeyPins, any Error>,
        secrets: KeyStoreSecrets
    ) -> StoredLease {
        var problems: [String] = []
        let entry = ledger.leases[row.terms.leaseId]
        if entry == nil {
            problems.append(
                "\(KeyStoreAnchor.fileName), this device's sealed ledger, has no record of it: its row was put back from a copy "
                    + "after the ledger was made anew"
            )
        }
        // The ledger's key server is the one that issued the lease: renewals and releases go there, whatever the row says.
        let keyServer = entry?.keyServer ?? row.keyServer
        if keyServer != row.keyServer {
            problems.append("its key server was changed in \(KeyStore.databaseFileName) from \(keyServer) to \(row.keyServer)")
        }
        var serverTime: Int64?
        if !secrets.isAuthentic(row.stateMAC, for: stateFields(row)) {
            problems.append("its state in \(KeyStore.databaseFileName) (state, first play, end or payload) does not match its code")
        }
        var terms = row.terms
        if let signed = row.payload {
            switch pins {
            case .failure(let error):
                problems.append("the pinned key server keys cannot be read (\((error as? KeyStoreError)?.message ?? "\(error)"))")
            case .success(let pins):
                if let key = pins.key(for: keyServer) {
                    do {
                        let payload = try verifiedPayload(signed, key: key)
                        terms = LeaseTerms(payload.lease)
                        serverTime = payload.serverTime
                        problems += disagreements(columns: row.terms, signed: terms)
                    } catch {
                        problems.append("its signed payload does not verify with the key pinned for \(keyServer)")
                    }
                } else {
                    problems.append("no signing key is pinned for its key server \(keyServer.isEmpty ? "(none recorded)" : keyServer)")
                }
            }
        }
        var state = row.state
        if entry?.endedAt != nil, state.holdsKeyMaterial { state = .expired }
        let firstPlayedAt = [row.firstPlayedAt, entry?.firstPlayedAt].compactMap { $0 }.min()
        if firstPlayedAt != nil, state == .persisted { state = .playing }
        let record = LeaseRecord(
            terms: terms,
            state: state,
            firstPlayedAt: firstPlayedAt,
            tampering: problems.isEmpty ? nil : problems.joined(separator: "; ")
        )
        return StoredLease(
            record: record,
            hasKeyMaterial: row.payload != nil,
            keyServer: keyServer,
            persistedAt: row.persistedAt,
            renewedAt: row.renewedAt,
            renewalCount: row.renewalCount,
            endedAt: row.endedAt ?? entry?.endedAt,
            releasedAt: row.releasedAt,
            firstPlayReportedAt: row.firstPlayReportedAt,
            serverTime: serverTime
        )
    }

    /// What the row's cached terms say differently from the signed ones.
    private static func disagreements(columns: LeaseTerms, signed: LeaseTerms) -> [String] {
        func differ<T: Equatable>(_ name: String, _ row: T, _ server: T, _ show: (T) -> String) -> String? {
            row == server ? nil : "its row says \(name) \(show(row)) but the server signed \(show(server))"
        }
        func time(_ value: Int64?) -> String { value.map(HumanTime.date) ?? "none" }
        func span(_ value: Int64?) -> String { value.map(HumanTime.duration) ?? "none" }
        return [
            differ("lease", columns.leaseId, signed.leaseId) { $0 },
            differ("asset", columns.assetId, signed.assetId) { $0 },
            differ("device", columns.deviceId, signed.deviceId) { $0 },
            differ("keys", columns.keyIds, signed.keyIds) { $0.joined(separator: ",") },
            differ("type", columns.type, signed.type) { $0.rawValue },
            differ("issued", columns.issuedAt, signed.issuedAt, time),
            differ("storage end", columns.storageExpiresAt, signed.storageExpiresAt, time),
            differ("playback duration", columns.playbackDuration, signed.playbackDuration, span),
            differ("renewable until", columns.renewableUntil, signed.renewableUntil, time),
        ].compactMap { $0 }
    }

    static func verifiedPayload(_ signed: SignedPayload, key: Ed25519.PublicKey) throws -> LeasePayload {
        do {
            return try PayloadSigning.verify(signed, serverKey: key)
        } catch let error as SignatureVerificationError {
            throw KeySessionError.invalidPayload(error.description)
        }
    }

    /// Checks that `verified` verifies with the key pinned for `keyServer`, so a stored lease always can be checked again.
    private static func checkSignature(_ verified: VerifiedLeasePayload, keyServer: String, pins: ServerKeyPins) throws {
        guard let key = pins.key(for: keyServer) else { throw KeyStoreError.serverKeyNotPinned(url: keyServer) }
        _ = try verifiedPayload(verified.signed, key: key)
    }

    static func authenticated(
        _ leaseId: String,
        _ db: Database,
        state: ClientState,
        secrets: KeyStoreSecrets,
        pinsPath: String
    ) throws -> StoredLease? {
        try authenticated(leaseId, db, ledger: state.anchor, secrets: secrets, pinsPath: pinsPath)
    }

    static func authenticated(
        _ leaseId: String,
        _ db: Database,
        ledger: KeyStoreAnchor,
        secrets: KeyStoreSecrets,
        pinsPath: String
    ) throws -> StoredLease? {
        guard let row = try fetchRow(leaseId, db) else { return nil }
        return authenticate(row, ledger: ledger, pins: Result { try ServerKeyPins.read(at: pinsPath, secrets: secrets) }, secrets: secrets)
    }

    static func authenticatedLeases(
        assetId: String?,
        _ db: Database,
        state: ClientState,
        secrets: KeyStoreSecrets,
        pinsPath: String
    ) throws -> [StoredLease] {
        let pins = Result { try ServerKeyPins.read(at: pinsPath, secrets: secrets) }
        return try fetchRows(assetId: assetId, db).map { authenticate($0, ledger: state.anchor, pins: pins, secrets: secrets) }
    }

    // MARK: - Rows

    static func fetchRow(_ leaseId: String, _ db: Database) throws -> LeaseRow? {
        try Row.fetchOne(db, sql: leaseQuery + " WHERE l.lease_id = ?", arguments: [leaseId]).map(leaseRow(from:))
    }

    static func fetchRows(assetId: String?, _ db: Database) throws -> [LeaseRow] {
        let rows =
            if let assetId {
                try Row.fetchAll(db, sql: leaseQuery + " WHERE l.asset_id = ? ORDER BY l.persisted_at, l.lease_id", arguments: [assetId])
            } else {
                try Row.fetchAll(db, sql: leaseQuery + " ORDER BY l.persisted_at, l.lease_id")
            }
        return try rows.map(leaseRow(from:))
    }

    static func fetchPayload(_ leaseId: String, _ db: Database) throws -> SignedPayload? {
        try Row.fetchOne(db, sql: "SELECT payload, signature FROM key_lease_payloads WHERE lease_id = ?", arguments: [leaseId])
            .map { SignedPayload(payload: try $0.decode(forColumn: "payload"), signature: try $0.decode(forColumn: "signature")) }
    }

    private static let leaseQuery = """
        SELECT l.*, p.payload AS payload_text, p.signature AS payload_signature FROM key_leases l
        LEFT JOIN key_lease_payloads p ON p.lease_id = l.lease_id
        """

    private static func leaseRow(from row: Row) throws -> LeaseRow {
        let leaseId: String = try row.decode(forColumn: "lease_id")
        let keyIdsText: String = try row.decode(forColumn: "key_ids")
        let typeText: String = try row.decode(forColumn: "type")
        let stateText: String = try row.decode(forColumn: "state")
        guard let keyIds = try? JSONDecoder().decode([String].self, from: Data(keyIdsText.utf8)),
            let type = LeaseType(rawValue: typeText), let state = LeaseState(rawValue: stateText)
        else {
            // Not even readable: keep the lease visible (and refused) rather than failing every query.
            return LeaseRow(
                terms: LeaseTerms(
                    leaseId: leaseId,
                    assetId: try row.decode(forColumn: "asset_id"),
                    deviceId: try row.decode(forColumn: "device_id"),
                    keyIds: [],
                    type: .persistent,
                    issuedAt: 0,
                    storageExpiresAt: 0,
                    playbackDuration: nil,
                    renewableUntil: nil
                ),
                state: .expired,
                keyServer: try row.decode(forColumn: "key_server"),
                persistedAt: try row.decode(forColumn: "persisted_at"),
                renewalCount: 0,
                stateMAC: nil,
                payload: nil
            )
        }
        let payload: SignedPayload? =
            if let text: String = try row.decode(forColumn: "payload_text"), let signature: String = try row.decode(forColumn: "payload_signature") {
                SignedPayload(payload: text, signature: signature)
            } else {
                nil
            }
        return LeaseRow(
            terms: LeaseTerms(
                leaseId: leaseId,
                assetId: try row.decode(forColumn: "asset_id"),
                deviceId: try row.decode(forColumn: "device_id"),
                keyIds: keyIds,
                type: type,
                issuedAt: try row.decode(forColumn: "issued_at"),
                storageExpiresAt: try row.decode(forColumn: "storage_expires_at"),
                playbackDuration: try row.decode(forColumn: "playback_duration"),
                renewableUntil: try row.decode(forColumn: "renewable_until")
            ),
            state: state,
            keyServer: try row.decode(forColumn: "key_server"),
            firstPlayedAt: try row.decode(forColumn: "first_played_at"),
            endedAt: try row.decode(forColumn: "ended_at"),
            releasedAt: try row.decode(forColumn: "released_at"),
            persistedAt: try row.decode(forColumn: "persisted_at"),
            renewedAt: try row.decode(forColumn: "renewed_at"),
            renewalCount: try row.decode(forColumn: "renewal_count"),
            firstPlayReportedAt: try row.decode(forColumn: "first_play_reported_at"),
            stateMAC: (try row.decode(forColumn: "state_mac") as Data?).map { [UInt8]($0) },
            payload: payload
        )
    }

    private static func insert(_ record: LeaseRecord, payload: VerifiedLeasePayload, keyServer: String, _ db: Database, at now: Int64) throws {
        let terms = record.terms
        try db.execute(
            sql: """
                INSERT INTO key_leases (lease_id, asset_id, device_id, key_ids, type, issued_at, storage_expires_at,
                    playback_duration, renewable_until, first_played_at, state, persisted_at, key_server)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                terms.leaseId, terms.assetId, terms.deviceId, try keyIdsJSON(terms.keyIds), terms.type.rawValue, terms.issuedAt,
                terms.storageExpiresAt, terms.playbackDuration, terms.renewableUntil, record.firstPlayedAt,
                record.state.rawValue, now, keyServer,
            ]
        )
        try db.execute(
            sql: "INSERT INTO key_lease_payloads (lease_id, payload, signature, server_time, stored_at) VALUES (?, ?, ?, ?, ?)",
            arguments: [terms.leaseId, payload.signed.payload, payload.signed.signature, payload.payload.serverTime, now]
        )
    }

    private static func keyIdsJSON(_ keyIds: [String]) throws -> String {
        String(decoding: try JSONEncoder().encode(keyIds), as: UTF8.self)
    }

    private static func termsDetail(_ terms: LeaseTerms, serverTime: Int64) -> AuditDetail {
        var detail: AuditDetail = [
            "issuedAt": .integer(terms.issuedAt),
            "storageExpiresAt": .integer(terms.storageExpiresAt),
            "serverTime": .integer(serverTime),
            "keyCount": .integer(Int64(terms.keyIds.count)),
        ]
        if let duration = terms.playbackDuration { detail.members["playbackDuration"] = .integer(duration) }
        if let until = terms.renewableUntil { detail.members["renewableUntil"] = .integer(until) }
        if let first = terms.firstPlayedAt { detail.members["serverFirstPlayedAt"] = .integer(first) }
        return detail
    }
}
