import Foundation
import GRDB

extension KeyStore {
    // MARK: - Acquire, persist, renew

    /// Journals that the server granted a lease and raises the time high-water mark to its `serverTime`. Call it for
    /// every verified payload, streaming ones included; ``persist(_:at:)`` does not do it for you.
    public func recordAcquisition(_ verified: VerifiedLeasePayload, at now: Int64) throws {
        try write { db in
            var mark = try Self.loadMark(db)
            mark.observe(serverTime: verified.payload.serverTime)
            try Self.saveMark(mark, db)
            try Self.observe(localTime: now, db)
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

    /// Stores a persistent lease and its signed payload exactly as received.
    ///
    /// Storing the same payload again changes nothing (a retried download); another payload for a stored lease must
    /// come through ``renew(_:at:)``.
    ///
    /// - Throws: ``KeyStoreError`` (`lease_not_persistent` for a streaming lease, `lease_already_stored`).
    @discardableResult
    public func persist(_ verified: VerifiedLeasePayload, at now: Int64) throws -> LeaseRecord {
        let terms = verified.terms
        guard terms.type == .persistent else { throw KeyStoreError.notPersistent(terms.leaseId) }
        return try write { db in
            if let existing = try Self.fetchLease(terms.leaseId, db) {
                let stored = try Self.fetchPayload(terms.leaseId, db)
                guard stored == verified.signed else { throw KeyStoreError.leaseAlreadyStored(terms.leaseId) }
                return existing.record
            }
            var lifecycle = LeaseLifecycle(acquired: terms)
            let action = try lifecycle.persist()
            try Self.carryOut(action, for: lifecycle.record, payload: verified, db, at: now)
            var mark = try Self.loadMark(db)
            mark.observe(serverTime: verified.payload.serverTime)
            try Self.saveMark(mark, db)
            try Self.observe(localTime: now, db)
            try AuditJournal.append(
                db,
                kind: .persist,
                assetId: terms.assetId,
                leaseId: terms.leaseId,
                detail: Self.termsDetail(terms, serverTime: verified.payload.serverTime),
                at: now
            )
            return lifecycle.record
        }
    }

    /// Stores a renewal: the new terms and signed payload replace the old ones in one transaction, `firstPlayedAt` is
    /// kept, and time is re-anchored to the payload's `serverTime`, which clears a latched clock rollback (unless the
    /// clock is still more than 300 s behind the server).
    ///
    /// - Throws: ``KeyStoreError`` `unknown_lease`; ``LeaseError`` `invalid_lease_transition` if the lease ended or the
    ///   payload is for another lease, asset or device.
    @discardableResult
    public func renew(_ verified: VerifiedLeasePayload, at now: Int64) throws -> LeaseRecord {
        let terms = verified.terms
        return try write { db in
            guard let stored = try Self.fetchLease(terms.leaseId, db) else { throw KeyStoreError.unknownLease(terms.leaseId) }
            var lifecycle = LeaseLifecycle(record: stored.record)
            let action = try lifecycle.renew(with: terms)
            try Self.carryOut(action, for: lifecycle.record, payload: verified, db, at: now)
            try AuditJournal.append(
                db,
                kind: .renewal,
                assetId: terms.assetId,
                leaseId: terms.leaseId,
                detail: Self.termsDetail(terms, serverTime: verified.payload.serverTime),
                at: now
            )
            var mark = try Self.loadMark(db)
            let before = mark
            let observation = mark.reanchor(serverTime: verified.payload.serverTime, localTime: now)
            try Self.saveMark(mark, db)
            var detail: AuditDetail = [
                "serverTime": .integer(verified.payload.serverTime),
                "localTime": .integer(now),
                "rollbackCleared": .bool(before.isRollbackLatched && observation != .rollbackDetected),
            ]
            if let previous = before.mark { detail.members["previousHighWaterMark"] = .integer(previous) }
            try AuditJournal.append(db, kind: .timeReanchored, assetId: terms.assetId, leaseId: terms.leaseId, detail: detail, at: now)
            if observation == .rollbackDetected {
                try AuditJournal.append(
                    db,
                    kind: .rollbackDetected,
                    assetId: nil,
                    leaseId: nil,
                    detail: ["localTime": .integer(now), "highWaterMark": .integer(verified.payload.serverTime)],
                    at: now
                )
            }
            return lifecycle.record
        }
    }

    // MARK: - Playback

    /// Decides whether `assetId` may play at `now` and, if so and for the first time, records `firstPlayedAt = now`
    /// in the same transaction, so two concurrent authorizations record one first play.
    ///
    /// Of several leases for the asset, one already playing is used first (so no second playback window starts), then
    /// the one that would last longest. A refusal is returned, not thrown: `evaluation.error` says why.
    ///
    /// - Throws: only for storage failures (``KeyStoreError``).
    public func authorizePlayback(assetId: String, at now: Int64) throws -> LeaseEvaluation {
        try write { db in
            try Self.observe(localTime: now, db)
            let rules = LeaseRules.standard(highWaterMark: try Self.loadMark(db))
            let leases = try Self.fetchLeases(assetId: assetId, db)
            guard !leases.isEmpty else { return .noLease(assetId: assetId, at: now) }
            let candidates = leases.map { (stored: $0.record, evaluation: rules.authorize($0.record, at: now)) }
            guard let chosen = Self.choose(candidates) else { return .noLease(assetId: assetId, at: now) }
            guard chosen.isValid, let lease = chosen.lease,
                let stored = leases.first(where: { $0.leaseId == lease.leaseId }), stored.record.firstPlayedAt == nil
            else { return chosen }
            var lifecycle = LeaseLifecycle(record: stored.record)
            let action = try lifecycle.startPlayback(at: now)
            try Self.carryOut(action, for: lifecycle.record, payload: nil, db, at: now)
            var detail: AuditDetail = ["expiresAt": .integer(lifecycle.record.expiresAt)]
            if let end = lifecycle.record.playbackEndsAt { detail.members["playbackEndsAt"] = .integer(end) }
            try AuditJournal.append(db, kind: .firstPlay, assetId: assetId, leaseId: lease.leaseId, detail: detail, at: now)
            return LeaseEvaluation(lease: lifecycle.record, at: now, error: nil)
        }
    }

    /// The lease status of `assetId` at `now` as things stand (playback not started stays not started). Records the
    /// local time like every operation, so a clock set back is caught here too.
    public func evaluate(assetId: String, at now: Int64) throws -> LeaseEvaluation {
        try write { db in
            try Self.observe(localTime: now, db)
            let rules = LeaseRules.standard(highWaterMark: try Self.loadMark(db))
            let candidates = try Self.fetchLeases(assetId: assetId, db).map { (stored: $0.record, evaluation: rules.evaluate($0.record, at: now)) }
            return Self.choose(candidates) ?? .noLease(assetId: assetId, at: now)
        }
    }

    /// Whether `assetId` stays playable for the next `duration` seconds (`stowage verify --for 48h`), counting the
    /// playback window as starting now if playback has not started. Nothing is recorded but the local time.
    public func coverage(assetId: String, duration: Int64, at now: Int64) throws -> LeaseEvaluation {
        try write { db in
            try Self.observe(localTime: now, db)
            let rules = LeaseRules.standard(highWaterMark: try Self.loadMark(db))
            let candidates = try Self.fetchLeases(assetId: assetId, db).map {
                (stored: $0.record, evaluation: rules.coverage(of: $0.record, from: now, duration: duration))
            }
            return Self.choose(candidates) ?? .noLease(assetId: assetId, at: now)
        }
    }

    /// The evaluation to report among several leases of one asset: a valid one (one whose playback already started
    /// first, so no second playback window starts, then the longest-lasting), else a refusal of a lease that still
    /// holds keys, else the most recently issued.
    static func choose(_ candidates: [(stored: LeaseRecord, evaluation: LeaseEvaluation)]) -> LeaseEvaluation? {
        let valid = candidates.filter { $0.evaluation.isValid }
        if !valid.isEmpty {
            return valid.max { a, b in
                let aStarted = a.stored.firstPlayedAt != nil
                let bStarted = b.stored.firstPlayedAt != nil
                if aStarted != bStarted { return bStarted }
                return a.stored.expiresAt(ifFirstPlayedAt: a.evaluation.evaluatedAt)
                    < b.stored.expiresAt(ifFirstPlayedAt: b.evaluation.evaluatedAt)
            }?.evaluation
        }
        return candidates.max { a, b in
            let aHeld = a.stored.state.holdsKeyMaterial
            let bHeld = b.stored.state.holdsKeyMaterial
            if aHeld != bHeld { return bHeld }
            return a.stored.terms.issuedAt < b.stored.terms.issuedAt
        }?.evaluation
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

    /// Returns every lease of `assetId` that still holds keys and erases the asset's sealed identity keys.
    ///
    /// - Returns: the leases that were returned.
    @discardableResult
    public func returnAsset(assetId: String, at now: Int64) throws -> [LeaseRecord] {
        let returned = try write { db in
            var records: [LeaseRecord] = []
            for stored in try Self.fetchLeases(assetId: assetId, db) where stored.state.holdsKeyMaterial {
                records.append(
                    try Self.end(stored, at: now, kind: .return, reason: "returned", db) { lifecycle in try lifecycle.returnLease(at: now) }
                )
            }
            try Self.eraseIdentityKeys(assetId: assetId, reason: "returned", db, at: now)
            return records
        }
        checkpoint()
        return returned
    }

    /// Erases the key material of every lease whose storage or playback window has closed at `now` (queuing their
    /// releases), and the sealed identity keys whose local lifetime has ended.
    @discardableResult
    public func purgeExpired(at now: Int64) throws -> PurgeReport {
        let report = try write { db in
            try Self.observe(localTime: now, db)
            var expired: [String] = []
            for stored in try Self.fetchLeases(assetId: nil, db) where stored.state.holdsKeyMaterial {
                guard case .denied(let error) = DualExpiryPolicy().evaluate(stored.record, at: now) else { continue }
                try Self.end(stored, at: now, kind: .expiry, reason: error.code, db) { lifecycle in try lifecycle.expire(at: now) }
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
        try write { db in
            guard let stored = try Self.fetchLease(leaseId, db) else { throw KeyStoreError.unknownLease(leaseId) }
            return try Self.end(stored, at: now, kind: kind, reason: reason, db, event: event)
        }
    }

    @discardableResult
    static func end(
        _ stored: StoredLease,
        at now: Int64,
        kind: AuditEventKind,
        reason: String,
        _ db: Database,
        event: (inout LeaseLifecycle) throws -> LeaseLifecycle.Action
    ) throws -> LeaseRecord {
        var lifecycle = LeaseLifecycle(record: stored.record)
        let action = try event(&lifecycle)
        guard action != .none else { return lifecycle.record }
        try carryOut(action, for: lifecycle.record, payload: nil, db, at: now)
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

    /// Releases waiting to be sent, oldest first. The queue survives restarts.
    public func pendingReleases() throws -> [PendingRelease] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT q.*, l.asset_id, l.device_id FROM key_release_queue q
                    JOIN key_leases l ON l.lease_id = q.lease_id ORDER BY q.queued_at, q.lease_id
                    """
            ).map { row in
                PendingRelease(
                    leaseId: row["lease_id"],
                    assetId: row["asset_id"],
                    deviceId: row["device_id"],
                    deletedAt: row["deleted_at"],
                    queuedAt: row["queued_at"],
                    attempts: row["attempts"],
                    lastError: row["last_error"],
                    lastAttemptAt: row["last_attempt_at"]
                )
            }
        }
    }

    /// The server confirmed the release (`{"released": true}`): the lease becomes released and leaves the queue.
    /// Confirming again changes nothing.
    ///
    /// - Throws: ``KeyStoreError`` `unknown_lease`; ``LeaseError`` `invalid_lease_transition` if the lease still holds
    ///   key material.
    @discardableResult
    public func markReleased(leaseId: String, at now: Int64) throws -> LeaseRecord {
        try write { db in
            guard let stored = try Self.fetchLease(leaseId, db) else { throw KeyStoreError.unknownLease(leaseId) }
            var lifecycle = LeaseLifecycle(record: stored.record)
            let action = try lifecycle.confirmRelease()
            guard action != .none else { return lifecycle.record }
            try Self.carryOut(action, for: lifecycle.record, payload: nil, db, at: now)
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

    // MARK: - Queries

    /// One stored lease.
    public func lease(id leaseId: String) throws -> StoredLease? {
        try read { db in try Self.fetchLease(leaseId, db) }
    }

    /// Stored leases, of one asset or all, oldest first.
    public func leases(assetId: String? = nil) throws -> [StoredLease] {
        try read { db in try Self.fetchLeases(assetId: assetId, db) }
    }

    /// The signed payload pair exactly as received (the latest renewal's), for unwrapping the content keys; nil once
    /// the key material is erased.
    public func storedPayload(leaseId: String) throws -> SignedPayload? {
        try read { db in try Self.fetchPayload(leaseId, db) }
    }

    // MARK: - Rows

    static func fetchLease(_ leaseId: String, _ db: Database) throws -> StoredLease? {
        try Row.fetchOne(db, sql: Self.leaseQuery + " WHERE l.lease_id = ?", arguments: [leaseId]).map(storedLease(from:))
    }

    static func fetchLeases(assetId: String?, _ db: Database) throws -> [StoredLease] {
        let rows =
            if let assetId {
                try Row.fetchAll(db, sql: Self.leaseQuery + " WHERE l.asset_id = ? ORDER BY l.persisted_at, l.lease_id", arguments: [assetId])
            } else {
                try Row.fetchAll(db, sql: Self.leaseQuery + " ORDER BY l.persisted_at, l.lease_id")
            }
        return try rows.map(storedLease(from:))
    }

    static func fetchPayload(_ leaseId: String, _ db: Database) throws -> SignedPayload? {
        try Row.fetchOne(db, sql: "SELECT payload, signature FROM key_lease_payloads WHERE lease_id = ?", arguments: [leaseId])
            .map { SignedPayload(payload: $0["payload"], signature: $0["signature"]) }
    }

    private static let leaseQuery = """
        SELECT l.*, (p.lease_id IS NOT NULL) AS has_key_material FROM key_leases l
        LEFT JOIN key_lease_payloads p ON p.lease_id = l.lease_id
        """

    private static func storedLease(from row: Row) throws -> StoredLease {
        let keyIdsText: String = row["key_ids"]
        let keyIds = try JSONDecoder().decode([String].self, from: Data(keyIdsText.utf8))
        let typeText: String = row["type"]
        let stateText: String = row["state"]
        guard let type = LeaseType(rawValue: typeText), let state = LeaseState(rawValue: stateText) else {
            throw KeyStoreError.databaseFailure("lease \(row["lease_id"] as String) has an unknown type or state")
        }
        let terms = LeaseTerms(
            leaseId: row["lease_id"],
            assetId: row["asset_id"],
            deviceId: row["device_id"],
            keyIds: keyIds,
            type: type,
            issuedAt: row["issued_at"],
            storageExpiresAt: row["storage_expires_at"],
            playbackDuration: row["playback_duration"],
            renewableUntil: row["renewable_until"]
        )
        return StoredLease(
            record: LeaseRecord(terms: terms, state: state, firstPlayedAt: row["first_played_at"]),
            hasKeyMaterial: row["has_key_material"],
            persistedAt: row["persisted_at"],
            renewedAt: row["renewed_at"],
            renewalCount: row["renewal_count"],
            endedAt: row["ended_at"],
            releasedAt: row["released_at"]
        )
    }

    /// Makes a life-cycle action true in the database (inside the caller's transaction).
    static func carryOut(
        _ action: LeaseLifecycle.Action,
        for record: LeaseRecord,
        payload: VerifiedLeasePayload?,
        _ db: Database,
        at now: Int64
    ) throws {
        let terms = record.terms
        switch action {
        case .none:
            return
        case .store:
            guard let payload else { preconditionFailure("storing a lease needs its payload") }
            try db.execute(
                sql: """
                    INSERT INTO key_leases (lease_id, asset_id, device_id, key_ids, type, issued_at, storage_expires_at,
                        playback_duration, renewable_until, first_played_at, state, persisted_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    terms.leaseId, terms.assetId, terms.deviceId, try keyIdsJSON(terms.keyIds), terms.type.rawValue, terms.issuedAt,
                    terms.storageExpiresAt, terms.playbackDuration, terms.renewableUntil, record.firstPlayedAt,
                    record.state.rawValue, now,
                ]
            )
            try db.execute(
                sql: "INSERT INTO key_lease_payloads (lease_id, payload, signature, server_time, stored_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [terms.leaseId, payload.signed.payload, payload.signed.signature, payload.payload.serverTime, now]
            )
        case .recordFirstPlay(let at):
            // The IS NULL guard keeps the first value even if two writers ever raced past the transaction.
            try db.execute(
                sql: "UPDATE key_leases SET first_played_at = ?, state = ? WHERE lease_id = ? AND first_played_at IS NULL",
                arguments: [at, record.state.rawValue, terms.leaseId]
            )
        case .replacePayload:
            guard let payload else { preconditionFailure("a renewal needs its payload") }
            try db.execute(
                sql: """
                    UPDATE key_leases SET key_ids = ?, issued_at = ?, storage_expires_at = ?, playback_duration = ?,
                        renewable_until = ?, renewed_at = ?, renewal_count = renewal_count + 1 WHERE lease_id = ?
                    """,
                arguments: [
                    try keyIdsJSON(terms.keyIds), terms.issuedAt, terms.storageExpiresAt, terms.playbackDuration,
                    terms.renewableUntil, now, terms.leaseId,
                ]
            )
            try db.execute(
                sql: "UPDATE key_lease_payloads SET payload = ?, signature = ?, server_time = ?, stored_at = ? WHERE lease_id = ?",
                arguments: [payload.signed.payload, payload.signed.signature, payload.payload.serverTime, now, terms.leaseId]
            )
            guard db.changesCount == 1 else { throw KeyStoreError.noKeyMaterial(terms.leaseId) }
        case .eraseKeyMaterialAndQueueRelease(let deletedAt):
            try db.execute(sql: "DELETE FROM key_lease_payloads WHERE lease_id = ?", arguments: [terms.leaseId])
            try db.execute(
                sql: "UPDATE key_leases SET state = ?, ended_at = ? WHERE lease_id = ?",
                arguments: [record.state.rawValue, deletedAt, terms.leaseId]
            )
            // Queuing is idempotent: a release already queued keeps its first deletedAt.
            try db.execute(
                sql: "INSERT OR IGNORE INTO key_release_queue (lease_id, deleted_at, queued_at) VALUES (?, ?, ?)",
                arguments: [terms.leaseId, deletedAt, now]
            )
        case .markReleased:
            try db.execute(sql: "DELETE FROM key_release_queue WHERE lease_id = ?", arguments: [terms.leaseId])
            try db.execute(
                sql: "UPDATE key_leases SET state = ?, released_at = ? WHERE lease_id = ?",
                arguments: [record.state.rawValue, now, terms.leaseId]
            )
        }
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
        return detail
    }
}
