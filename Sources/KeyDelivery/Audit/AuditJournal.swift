import GRDB

/// Reads and appends the audit journal inside the key store's transactions, so an entry is written if and only if
/// the change it records is (tables `key_audit_journal` and `key_audit_head`).
enum AuditJournal {
    @discardableResult
    static func append(
        _ db: Database,
        kind: AuditEventKind,
        assetId: String?,
        leaseId: String?,
        detail: AuditDetail,
        at time: Int64
    ) throws -> AuditEntry {
        let head = try Row.fetchOne(db, sql: "SELECT sequence, hash FROM key_audit_head WHERE id = 1")
        let sequence: Int64 = (head?["sequence"] as Int64? ?? 0) + 1
        let previousHash: String = head?["hash"] ?? AuditChain.genesisHash
        let text = detail.canonicalJSON
        let hash = AuditChain.hash(
            sequence: sequence,
            time: time,
            kind: kind,
            assetId: assetId,
            leaseId: leaseId,
            detail: text,
            previousHash: previousHash
        )
        try db.execute(
            sql: """
                INSERT INTO key_audit_journal (sequence, time, kind, asset_id, lease_id, detail, previous_hash, hash)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [sequence, time, kind.rawValue, assetId, leaseId, text, previousHash, hash]
        )
        try db.execute(
            sql: "INSERT INTO key_audit_head (id, sequence, hash) VALUES (1, ?, ?) "
                + "ON CONFLICT(id) DO UPDATE SET sequence = excluded.sequence, hash = excluded.hash",
            arguments: [sequence, hash]
        )
        return AuditEntry(
            sequence: sequence,
            time: time,
            kind: kind,
            assetId: assetId,
            leaseId: leaseId,
            detail: text,
            previousHash: previousHash,
            hash: hash
        )
    }

    static func entries(_ db: Database, assetId: String? = nil, leaseId: String? = nil) throws -> [AuditEntry] {
        var conditions: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        if let assetId {
            conditions.append("asset_id = ?")
            arguments.append(assetId)
        }
        if let leaseId {
            conditions.append("lease_id = ?")
            arguments.append(leaseId)
        }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        return try Row.fetchAll(
            db,
            sql: "SELECT * FROM key_audit_journal \(filter) ORDER BY sequence",
            arguments: StatementArguments(arguments)
        ).map(entry(from:))
    }

    static func verify(_ db: Database) throws -> AuditVerification {
        let all = try entries(db)
        let head = try Row.fetchOne(db, sql: "SELECT sequence, hash FROM key_audit_head WHERE id = 1")
            .map { (sequence: $0["sequence"] as Int64, hash: $0["hash"] as String) }
        return AuditChain.verify(all, head: head)
    }

    private static func entry(from row: Row) -> AuditEntry {
        AuditEntry(
            sequence: row["sequence"],
            time: row["time"],
            kind: AuditEventKind(rawValue: row["kind"]),
            assetId: row["asset_id"],
            leaseId: row["lease_id"],
            detail: row["detail"],
            previousHash: row["previous_hash"],
            hash: row["hash"]
        )
    }
}
