import Foundation
import GRDB
import StowageCore

/// The state this device adds to its leases, as one write transaction of the ``KeyStore`` sees it: the time
/// high-water mark merged from both copies (the authenticated `key_time_anchor` row and the sealed ``KeyStoreAnchor``
/// file), and the anchor's ledger: every lease's first play and end, and the latches each lease is held by.
///
/// ``load(_:secrets:anchorPath:now:)`` finds tampering: a copy that does not authenticate, one copy missing while the
/// other exists (or both missing while leases are stored), or an anchor put in place after Stowage last wrote it.
/// Tampering latches every lease the ledger holds, like a clock set back, until that lease is renewed, and is
/// journaled. ``save(_:at:)`` writes the row with its code and, when it changed, the anchor, before the transaction
/// commits.
///
/// The mark only rises: local times observed raise it, and nothing lowers it, not even a key server's time. A lease is
/// judged against the larger of the mark and the `serverTime` of its own signed payload (``time(for:)``), so a key
/// server's clock counts for its own leases only.
struct ClientState {
    /// The anchor is rewritten when the mark has moved this far past its copy (the leeway is 300 s, so a deleted row
    /// can cost at most this much of it).
    static let anchorLag: Int64 = 60

    let secrets: KeyStoreSecrets
    let anchorPath: String
    /// The device's mark (the merged copies), with the latest rollback and tampering found.
    private(set) var mark: TimeHighWaterMark
    /// The anchor as it will be written (its mark is brought up to date in ``save(_:at:)``).
    private(set) var anchor: KeyStoreAnchor
    /// The observation of the transaction's own local time (set by ``KeyStore/writeState(at:_:)``).
    var firstObservation: TimeHighWaterMark.Observation = .consistent
    /// What was found tampered with while loading, for the journal.
    private(set) var tampering: String?
    private let markAsStored: TimeHighWaterMark?
    /// What the time record says of the anchor file as last written: its generation and change time.
    private let anchorAsRecorded: RecordedAnchor?
    /// The anchor file as found, when the record must catch up with it: one generation ahead, written by a
    /// transaction whose commit then failed.
    private var anchorToRecord: RecordedAnchor?
    private let anchorOnDisk: KeyStoreAnchor?
    private var anchorChanged = false

    /// The anchor file as the database recorded it when the store wrote it.
    struct RecordedAnchor: Hashable {
        var generation: Int
        var changedAt: Int64
    }

    /// Loads both copies. With `now` nil (a read-only transaction) tampering is reported in the merged state but not
    /// latched on disk.
    static func load(_ db: Database, secrets: KeyStoreSecrets, anchorPath: String, now: Int64?) throws -> ClientState {
        var problems: [String] = []
        var stored: TimeHighWaterMark?
        var recorded: RecordedAnchor?
        let row = try Row.fetchOne(db, sql: "SELECT * FROM key_time_anchor WHERE id = 1")
        if let row {
            let candidate = TimeHighWaterMark(
                mark: try row.decode(forColumn: "high_water_mark"),
                rollbackDetectedAt: try row.decode(forColumn: "rollback_detected_at"),
                tamperDetectedAt: try row.decode(forColumn: "tamper_detected_at")
            )
            let generation: Int? = try row.decode(forColumn: "anchor_generation")
            let changedAt: Int64? = try row.decode(forColumn: "anchor_changed_at")
            let file = generation.flatMap { generation in changedAt.map { RecordedAnchor(generation: generation, changedAt: $0) } }
            let code = (try row.decode(forColumn: "mac") as Data?).map { [UInt8]($0) }
            if secrets.isAuthentic(code, for: fields(of: candidate, anchor: file)) {
                stored = candidate
                recorded = file
            } else {
                problems.append("the time record in \(KeyStore.databaseFileName) was altered")
            }
        }
        var onDisk: KeyStoreAnchor?
        var catchUp: RecordedAnchor?
        switch try KeyStoreAnchor.read(at: anchorPath, sealer: secrets.sealer) {
        case .anchor(let anchor, let changedAt):
            onDisk = anchor
            if let replaced = anchor.replacement(changedAt: changedAt, recorded: recorded.map { ($0.generation, $0.changedAt) }) {
                problems.append(replaced)
            } else if let recorded, let changedAt, anchor.generation == recorded.generation + 1 {
                catchUp = RecordedAnchor(generation: anchor.generation, changedAt: changedAt)
            }
        case .unreadable: problems.append("\(KeyStoreAnchor.fileName) does not open with this store's key")
        case .missing:
            if row != nil { problems.append("\(KeyStoreAnchor.fileName) was deleted") }
        }
        if row == nil, onDisk != nil {
            problems.append("the time record in \(KeyStore.databaseFileName) was deleted")
        } else if row == nil, onDisk == nil,
            try Bool.fetchOne(
                db,
                sql: "SELECT EXISTS (SELECT 1 FROM key_leases) OR EXISTS (SELECT 1 FROM key_identity_keys WHERE expires_at IS NOT NULL)"
            ) ?? false
        {
            problems.append("both copies of the time record were deleted")
        }
        var anchor = onDisk ?? KeyStoreAnchor(createdAt: now)
        let merged = Self.merged(stored, anchor.mark)
        anchor.highWaterMark = merged.mark
        var state = ClientState(
            secrets: secrets,
            anchorPath: anchorPath,
            mark: merged,
            anchor: anchor,
            tampering: problems.isEmpty ? nil : problems.joined(separator: "; "),
            markAsStored: stored,
            anchorAsRecorded: recorded,
            anchorOnDisk: onDisk
        )
        state.anchorToRecord = catchUp
        if let tampering = state.tampering {
            let at = now ?? merged.mark ?? 0
            state.anchor.tamperCount += 1
            state.anchor.tamperDetectedAt = at
            state.mark = TimeHighWaterMark(mark: merged.mark, rollbackDetectedAt: merged.rollbackDetectedAt, tamperDetectedAt: at)
            state.anchorChanged = true
            if let now {
                try AuditJournal.append(db, kind: .stateTampered, assetId: nil, leaseId: nil, detail: ["found": .string(tampering)], at: now)
            }
        }
        return state
    }

    private init(
        secrets: KeyStoreSecrets,
        anchorPath: String,
        mark: TimeHighWaterMark,
        anchor: KeyStoreAnchor,
        tampering: String?,
        markAsStored: TimeHighWaterMark?,
        anchorAsRecorded: RecordedAnchor?,
        anchorOnDisk: KeyStoreAnchor?
    ) {
        self.secrets = secrets
        self.anchorPath = anchorPath
        self.mark = mark
        self.anchor = anchor
        self.tampering = tampering
        self.markAsStored = markAsStored
        self.anchorAsRecorded = anchorAsRecorded
        self.anchorOnDisk = anchorOnDisk
    }

    /// The two copies merged: the larger mark, and the latest of each detection.
    private static func merged(_ row: TimeHighWaterMark?, _ anchor: TimeHighWaterMark) -> TimeHighWaterMark {
        func latest(_ a: Int64?, _ b: Int64?) -> Int64? { [a, b].compactMap { $0 }.max() }
        return TimeHighWaterMark(
            mark: latest(row?.mark, anchor.mark),
            rollbackDetectedAt: latest(row?.rollbackDetectedAt, anchor.rollbackDetectedAt),
            tamperDetectedAt: latest(row?.tamperDetectedAt, anchor.tamperDetectedAt)
        )
    }

    /// The anchor read without a write transaction (its ledger, counts and mark), or an empty one when it is missing or
    /// does not open: then no lease is vouched for.
    static func ledger(secrets: KeyStoreSecrets, anchorPath: String) -> KeyStoreAnchor {
        if case .anchor(let anchor, _) = try? KeyStoreAnchor.read(at: anchorPath, sealer: secrets.sealer) { return anchor }
        return KeyStoreAnchor()
    }

    // MARK: Time

    /// Records a local clock reading: raises the mark, or, when the reading is more than the leeway below it, counts a
    /// rollback (once per episode), which latches every lease stored before it.
    @discardableResult
    mutating func observe(localTime now: Int64) -> TimeHighWaterMark.Observation {
        if let current = mark.mark, now < current.addingClamped(-mark.leeway) {
            guard anchor.rolledBackSince == nil else { return .rollbackStillLatched }
            anchor.rolledBackSince = now
            anchor.rollbackCount += 1
            anchor.rollbackDetectedAt = now
            mark = TimeHighWaterMark(mark: current, rollbackDetectedAt: now, tamperDetectedAt: mark.tamperDetectedAt)
            anchorChanged = true
            return .rollbackDetected
        }
        if anchor.rolledBackSince != nil {
            anchor.rolledBackSince = nil
            anchorChanged = true
        }
        mark = TimeHighWaterMark(
            mark: max(mark.mark ?? now, now),
            rollbackDetectedAt: mark.rollbackDetectedAt,
            tamperDetectedAt: mark.tamperDetectedAt
        )
        return .consistent
    }

    /// The time record a lease is judged by: the larger of the device's mark and the lease's own `serverTime`, and the
    /// lease's latches.
    func time(for stored: StoredLease) -> TimeHighWaterMark {
        Self.time(for: stored, in: anchor, deviceMark: mark.mark)
    }

    /// ``time(for:)`` against an anchor read on its own (read-only views).
    static func time(for stored: StoredLease, in anchor: KeyStoreAnchor, deviceMark: Int64?) -> TimeHighWaterMark {
        let latches = anchor.latches(stored.leaseId)
        return TimeHighWaterMark(
            mark: [deviceMark, stored.serverTime].compactMap { $0 }.max(),
            rollbackDetectedAt: latches.rollback ? (anchor.rollbackDetectedAt ?? 0) : nil,
            tamperDetectedAt: latches.tamper ? (anchor.tamperDetectedAt ?? 0) : nil
        )
    }

    // MARK: Ledger

    func ledgerEntry(_ leaseId: String) -> KeyStoreAnchor.Lease? {
        anchor.leases[leaseId]
    }

    /// Enters a lease just stored, or renewed from the key server that issued it, in the ledger with the current counts:
    /// its latches clear (the only way they do) and it is vouched for from now on.
    mutating func vouch(for leaseId: String, assetId: String, keyServer: String) {
        var entry = anchor.leases[leaseId] ?? KeyStoreAnchor.Lease()
        entry.assetId = assetId
        if entry.keyServer == nil { entry.keyServer = keyServer }
        entry.rollbackCount = anchor.rollbackCount
        entry.tamperCount = anchor.tamperCount
        guard entry != anchor.leases[leaseId] else { return }
        anchor.leases[leaseId] = entry
        anchorChanged = true
    }

    mutating func recordFirstPlay(_ leaseId: String, at time: Int64) {
        guard var entry = anchor.leases[leaseId] else { return }
        guard entry.firstPlayedAt.map({ time < $0 }) ?? true else { return }
        entry.firstPlayedAt = time
        anchor.leases[leaseId] = entry
        anchorChanged = true
    }

    mutating func recordEnd(_ leaseId: String, at time: Int64) {
        var entry = anchor.leases[leaseId] ?? KeyStoreAnchor.Lease()
        guard entry.endedAt == nil else { return }
        entry.endedAt = time
        anchor.leases[leaseId] = entry
        anchorChanged = true
    }

    // MARK: Saving

    /// Writes the anchor when its content changed or the mark moved more than ``anchorLag`` past its copy, and the row
    /// (with its authentication code and what it records of the anchor file) when either changed. Journals a rollback
    /// found by this transaction.
    mutating func save(_ db: Database, at now: Int64) throws {
        if firstObservation == .rollbackDetected {
            try AuditJournal.append(
                db,
                kind: .rollbackDetected,
                assetId: nil,
                leaseId: nil,
                detail: ["localTime": .integer(now), "highWaterMark": .integer(mark.mark ?? now)],
                at: now
            )
        }
        let markMoved: Bool
        switch (anchorOnDisk?.highWaterMark, mark.mark) {
        case (nil, nil): markMoved = false
        case (nil, _?), (_?, nil): markMoved = true
        case (let old?, let new?): markMoved = new < old || new - old >= Self.anchorLag
        }
        var recorded = anchorToRecord ?? anchorAsRecorded
        if anchorChanged || anchorOnDisk == nil || markMoved {
            anchor.highWaterMark = mark.mark
            anchor.rollbackDetectedAt = mark.rollbackDetectedAt
            anchor.tamperDetectedAt = mark.tamperDetectedAt
            let changedAt = try anchor.write(to: anchorPath, sealer: secrets.sealer)
            recorded = changedAt.map { RecordedAnchor(generation: anchor.generation, changedAt: $0) }
        }
        guard markAsStored != mark || recorded != anchorAsRecorded else { return }
        try db.execute(
            sql: """
                INSERT INTO key_time_anchor (id, high_water_mark, rollback_detected_at, tamper_detected_at, anchor_generation,
                    anchor_changed_at, mac) VALUES (1, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET high_water_mark = excluded.high_water_mark,
                    rollback_detected_at = excluded.rollback_detected_at, tamper_detected_at = excluded.tamper_detected_at,
                    anchor_generation = excluded.anchor_generation, anchor_changed_at = excluded.anchor_changed_at, mac = excluded.mac
                """,
            arguments: [
                mark.mark, mark.rollbackDetectedAt, mark.tamperDetectedAt, recorded?.generation, recorded?.changedAt,
                Data(try secrets.authenticationCode(for: Self.fields(of: mark, anchor: recorded))),
            ]
        )
    }

    /// The authenticated fields of the time record: version 1 without a record of the anchor file, version 2 with it.
    private static func fields(of mark: TimeHighWaterMark, anchor: RecordedAnchor?) -> CanonicalFields {
        var fields = CanonicalFields(domain: anchor == nil ? "stowage-time-anchor-v1" : "stowage-time-anchor-v2")
        fields.append(mark.mark)
        fields.append(mark.rollbackDetectedAt)
        fields.append(mark.tamperDetectedAt)
        if let anchor {
            fields.append(Int64(anchor.generation))
            fields.append(anchor.changedAt)
        }
        return fields
    }
}
