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
            .map { (sequence: try $0.decode(forColumn: "sequence") as Int64, hash: try $0.decode(forColumn: "hash") as String) }
        return AuditChain.verify(all, head: head)
    }

    private static func entry(from row: Row) throws -> AuditEntry {
        AuditEntry(
            sequence: try row.decode(forColumn: "sequence"),
            time: try row.decode(forColumn: "time"),
            kind: AuditEventKind(rawValue: try row.decode(forColumn: "kind")),
            assetId: try row.decode(forColumn: "asset_id"),
            leaseId: try row.decode(forColumn: "lease_id"),
            detail: try row.decode(forColumn: "detail"),
            previousHash: try row.decode(forColumn: "previous_hash"),
            hash: try row.decode(forColumn: "hash")
        )
    }
}
