import Foundation
import GRDB

/// The state this device adds to its leases, as one write transaction of the ``KeyStore`` sees it: the time
/// high-water mark and its latches merged from both copies (the authenticated `key_time_anchor` row and the sealed
/// ``KeyStoreAnchor`` file), and the anchor's record of every lease's first play and end.
///
/// ``load(_:secrets:anchorPath:now:)`` finds tampering: a copy that does not authenticate, or one copy missing while
/// the other exists (or both missing while leases are stored). Tampering is latched like a clock rollback, refusing
/// every lease until a renewal or a new acquisition re-anchors time, and journaled. ``save(_:at:)`` writes the row
/// with its code and, when it changed, the anchor, before the transaction commits.
struct ClientState {
    /// The anchor is rewritten when the mark has moved this far past its copy (the leeway is 300 s, so a deleted row
    /// can cost at most this much of it).
    static let anchorLag: Int64 = 60

    let secrets: KeyStoreSecrets
    let anchorPath: String
    /// The merged mark and latches.
    var mark: TimeHighWaterMark
    /// The anchor as it will be written (its mark is brought up to date in ``save(_:at:)``).
    private(set) var anchor: KeyStoreAnchor
    /// The observation of the transaction's own local time (set by ``KeyStore/writeState(at:_:)``).
    var firstObservation: TimeHighWaterMark.Observation = .consistent
    /// What was found tampered with while loading, for the journal.
    private(set) var tampering: String?
    private let markAsStored: TimeHighWaterMark?
    private let anchorOnDisk: KeyStoreAnchor?
    private var anchorChanged = false

    /// Loads both copies. With `now` nil (a read-only transaction) tampering is reported in the merged mark but not
    /// latched on disk.
    static func load(_ db: Database, secrets: KeyStoreSecrets, anchorPath: String, now: Int64?) throws -> ClientState {
        var problems: [String] = []
        var stored: TimeHighWaterMark?
        let row = try Row.fetchOne(db, sql: "SELECT * FROM key_time_anchor WHERE id = 1")
        if let row {
            let candidate = TimeHighWaterMark(
                mark: try row.decode(forColumn: "high_water_mark"),
                rollbackDetectedAt: try row.decode(forColumn: "rollback_detected_at"),
                tamperDetectedAt: try row.decode(forColumn: "tamper_detected_at")
            )
            let code = (try row.decode(forColumn: "mac") as Data?).map { [UInt8]($0) }
            if secrets.isAuthentic(code, for: fields(of: candidate)) {
                stored = candidate
            } else {
                problems.append("the time record in \(KeyStore.databaseFileName) was altered")
            }
        }
        var onDisk: KeyStoreAnchor?
        switch try KeyStoreAnchor.read(at: anchorPath, sealer: secrets.sealer) {
        case .anchor(let anchor): onDisk = anchor
        case .unreadable: problems.append("\(KeyStoreAnchor.fileName) does not open with this store's key")
        case .missing:
            if row != nil { problems.append("\(KeyStoreAnchor.fileName) was deleted") }
        }
        if row == nil, onDisk != nil {
            problems.append("the time record in \(KeyStore.databaseFileName) was deleted")
        } else if row == nil, onDisk == nil, try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM key_leases)") ?? false {
            problems.append("both copies of the time record were deleted")
        }
        var merged = (stored ?? TimeHighWaterMark()).merged(with: onDisk?.mark ?? TimeHighWaterMark())
        let tampering = problems.isEmpty ? nil : problems.joined(separator: "; ")
        if tampering != nil {
            merged.latchTampering(at: now ?? merged.mark ?? 0)
        }
        var state = ClientState(
            secrets: secrets,
            anchorPath: anchorPath,
            mark: merged,
            anchor: onDisk ?? KeyStoreAnchor(),
            tampering: tampering,
            markAsStored: stored,
            anchorOnDisk: onDisk
        )
        if let tampering, let now {
            try AuditJournal.append(db, kind: .stateTampered, assetId: nil, leaseId: nil, detail: ["found": .string(tampering)], at: now)
            state.anchorChanged = true
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
        anchorOnDisk: KeyStoreAnchor?
    ) {
        self.secrets = secrets
        self.anchorPath = anchorPath
        self.mark = mark
        self.anchor = anchor
        self.tampering = tampering
        self.markAsStored = markAsStored
        self.anchorOnDisk = anchorOnDisk
    }

    /// The anchor's record of a lease read without a write transaction: the ledger only, the mark not needed.
    static func ledger(secrets: KeyStoreSecrets, anchorPath: String) -> [String: KeyStoreAnchor.Lease] {
        if case .anchor(let anchor) = try? KeyStoreAnchor.read(at: anchorPath, sealer: secrets.sealer) { return anchor.leases }
        return [:]
    }

    // MARK: Time

    /// Records a local clock reading; a rollback found now is journaled.
    @discardableResult
    mutating func observe(localTime now: Int64) -> TimeHighWaterMark.Observation {
        mark.observe(localTime: now)
    }

    mutating func observe(serverTime: Int64) {
        mark.observe(serverTime: serverTime)
    }

    /// Re-anchors time to a fresh, verified `serverTime` (a renewal or an acquisition): clears both latches.
    @discardableResult
    mutating func reanchor(serverTime: Int64, localTime: Int64) -> TimeHighWaterMark.Observation {
        mark.reanchor(serverTime: serverTime, localTime: localTime)
    }

    // MARK: Ledger

    func ledgerEntry(_ leaseId: String) -> KeyStoreAnchor.Lease? {
        anchor.leases[leaseId]
    }

    mutating func recordLease(_ leaseId: String) {
        guard anchor.leases[leaseId] == nil else { return }
        anchor.leases[leaseId] = KeyStoreAnchor.Lease()
        anchorChanged = true
    }

    mutating func recordFirstPlay(_ leaseId: String, at time: Int64) {
        var entry = anchor.leases[leaseId] ?? KeyStoreAnchor.Lease()
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

    /// Writes the row (with its authentication code) when the mark changed, and the anchor when its content changed
    /// or the mark moved more than ``anchorLag`` past its copy. Journals a rollback found by this transaction.
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
        if markAsStored != mark {
            try db.execute(
                sql: """
                    INSERT INTO key_time_anchor (id, high_water_mark, rollback_detected_at, tamper_detected_at, mac) VALUES (1, ?, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET high_water_mark = excluded.high_water_mark,
                        rollback_detected_at = excluded.rollback_detected_at, tamper_detected_at = excluded.tamper_detected_at,
                        mac = excluded.mac
                    """,
                arguments: [
                    mark.mark, mark.rollbackDetectedAt, mark.tamperDetectedAt,
                    Data(try secrets.authenticationCode(for: Self.fields(of: mark))),
                ]
            )
        }
        let onDisk = anchorOnDisk?.mark
        let latchesMoved = onDisk?.rollbackDetectedAt != mark.rollbackDetectedAt || onDisk?.tamperDetectedAt != mark.tamperDetectedAt
        let markMoved: Bool
        switch (onDisk?.mark, mark.mark) {
        case (nil, nil): markMoved = false
        case (nil, _?), (_?, nil): markMoved = true
        case (let old?, let new?): markMoved = new < old || new - old >= Self.anchorLag
        }
        guard anchorChanged || anchorOnDisk == nil || latchesMoved || markMoved else { return }
        anchor.setMark(mark)
        try anchor.write(to: anchorPath, sealer: secrets.sealer)
    }

    private static func fields(of mark: TimeHighWaterMark) -> CanonicalFields {
        var fields = CanonicalFields(domain: "stowage-time-anchor-v1")
        fields.append(mark.mark)
        fields.append(mark.rollbackDetectedAt)
        fields.append(mark.tamperDetectedAt)
        return fields
    }
}
