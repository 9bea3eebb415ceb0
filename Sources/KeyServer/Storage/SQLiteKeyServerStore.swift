import Foundation
import GRDB
public import KeyDelivery

/// The default ``KeyServerStore``: one SQLite file through GRDB, in WAL mode so reads never wait for the writer.
///
/// GRDB stays an implementation detail: nothing of it appears in this module's public API, so a store over another
/// database can replace this one.
///
/// ```swift
/// let store = try SQLiteKeyServerStore(path: "/var/lib/stowage-keys/keyserver.sqlite")
/// ```
public struct SQLiteKeyServerStore: KeyServerStore {
    let pool: DatabasePool
    /// The writes of concurrent requests (leases, first plays, releases) share one transaction.
    let commits: GroupCommit

    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    ///
    /// - Throws: the database's error when the file cannot be opened or migrated.
    public init(path: String) throws {
        var configuration = Configuration()
        // Another process (the CLI adding an asset) may hold the write lock for a moment.
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // WAL with synchronous=NORMAL: a commit is durable once the WAL is checkpointed; a power cut can lose the
            // last transactions but never corrupts the file (sqlite.org/wal.html, "Performance Considerations").
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        pool = try Self.migrator.openMigrated(path: path, configuration: configuration)
        commits = GroupCommit(pool: pool)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE asset (
                        id TEXT PRIMARY KEY NOT NULL,
                        policy TEXT NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    CREATE TABLE content_key (
                        asset_id TEXT NOT NULL REFERENCES asset(id) ON DELETE CASCADE,
                        key_id TEXT NOT NULL,
                        nonce BLOB NOT NULL,
                        sealed_key BLOB NOT NULL,
                        PRIMARY KEY (asset_id, key_id)
                    ) WITHOUT ROWID;
                    CREATE TABLE device (
                        id TEXT PRIMARY KEY NOT NULL,
                        signing_key BLOB NOT NULL,
                        agreement_key BLOB NOT NULL,
                        first_seen_at INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE TABLE lease (
                        id TEXT PRIMARY KEY NOT NULL,
                        account TEXT NOT NULL,
                        asset_id TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        key_ids TEXT NOT NULL,
                        type TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        issued_at INTEGER NOT NULL,
                        storage_expires_at INTEGER NOT NULL,
                        playback_duration INTEGER,
                        renewable_until INTEGER,
                        renewal_count INTEGER NOT NULL DEFAULT 0,
                        released_at INTEGER,
                        deleted_at INTEGER
                    );
                    CREATE INDEX lease_by_account_device ON lease (account, device_id, type, released_at, storage_expires_at);
                    CREATE TABLE request_nonce (
                        nonce BLOB PRIMARY KEY NOT NULL,
                        seen_at INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX request_nonce_by_time ON request_nonce (seen_at);
                    CREATE TABLE audit (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        time INTEGER NOT NULL,
                        event TEXT NOT NULL,
                        operation TEXT NOT NULL,
                        account TEXT,
                        device_id TEXT,
                        asset_id TEXT,
                        lease_id TEXT,
                        code TEXT,
                        detail TEXT
                    );
                    """
            )
        }
        migrator.registerMigration("v2") { db in
            // Lease integrity: first plays reported by devices (or inherited by a once-per-account rental), and audit
            // rows that stand for several aggregated refusals.
            try db.execute(
                sql: """
                    ALTER TABLE lease ADD COLUMN first_played_at INTEGER;
                    ALTER TABLE audit ADD COLUMN count INTEGER NOT NULL DEFAULT 1;
                    CREATE INDEX lease_by_account_asset ON lease (account, asset_id, type, created_at);
                    """
            )
        }
        return migrator
    }

    // MARK: Assets and keys

    public func saveAsset(_ asset: AssetRecord, keys: [ContentKeyRecord]) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO asset (id, policy, created_at) VALUES (?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET policy = excluded.policy
                    """,
                arguments: [asset.id, asset.policy, asset.createdAt]
            )
            for key in keys {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO content_key (asset_id, key_id, nonce, sealed_key) VALUES (?, ?, ?, ?)",
                    arguments: [key.assetID, key.keyID, Data(key.nonce), Data(key.sealedKey)]
                )
            }
        }
    }

    public func asset(id: String) async throws -> AssetRecord? {
        try await pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT id, policy, created_at FROM asset WHERE id = ?"), arguments: [id]).map { row in
                AssetRecord(
                    id: try row.decode(forColumn: "id"),
                    policy: try row.decode(forColumn: "policy"),
                    createdAt: try row.decode(forColumn: "created_at")
                )
            }
        }
    }

    public func contentKeys(assetID: String, keyIDs: [String]) async throws -> [ContentKeyRecord] {
        guard !keyIDs.isEmpty else { return [] }
        return try await pool.read { db in
            let placeholders = Array(repeating: "?", count: keyIDs.count).joined(separator: ", ")
            var arguments: StatementArguments = [assetID]
            arguments += StatementArguments(keyIDs)
            return try Row.fetchAll(
                db.cachedStatement(sql: "SELECT key_id, nonce, sealed_key FROM content_key WHERE asset_id = ? AND key_id IN (\(placeholders))"),
                arguments: arguments
            ).map { row in
                ContentKeyRecord(
                    assetID: assetID,
                    keyID: try row.decode(forColumn: "key_id"),
                    nonce: [UInt8](try row.decode(forColumn: "nonce") as Data),
                    sealedKey: [UInt8](try row.decode(forColumn: "sealed_key") as Data)
                )
            }
        }
    }

    public func contentKeys(after position: ContentKeyPosition?, limit: Int) async throws -> [ContentKeyRecord] {
        try await pool.read { db in
            let rows =
                if let position {
                    try Row.fetchAll(
                        db.cachedStatement(
                            sql: """
                                SELECT asset_id, key_id, nonce, sealed_key FROM content_key WHERE (asset_id, key_id) > (?, ?)
                                ORDER BY asset_id, key_id LIMIT ?
                                """
                        ),
                        arguments: [position.assetID, position.keyID, limit]
                    )
                } else {
                    try Row.fetchAll(
                        db.cachedStatement(sql: "SELECT asset_id, key_id, nonce, sealed_key FROM content_key ORDER BY asset_id, key_id LIMIT ?"),
                        arguments: [limit]
                    )
                }
            return try rows.map { row in
                ContentKeyRecord(
                    assetID: try row.decode(forColumn: "asset_id"),
                    keyID: try row.decode(forColumn: "key_id"),
                    nonce: [UInt8](try row.decode(forColumn: "nonce") as Data),
                    sealedKey: [UInt8](try row.decode(forColumn: "sealed_key") as Data)
                )
            }
        }
    }

    public func replaceSealedKeys(_ changes: [SealedKeyChange]) async throws -> Int {
        guard !changes.isEmpty else { return 0 }
        return try await pool.write { db in
            var changed = 0
            for change in changes {
                try db.execute(
                    sql: """
                        UPDATE content_key SET nonce = ?, sealed_key = ?
                        WHERE asset_id = ? AND key_id = ? AND nonce = ? AND sealed_key = ?
                        """,
                    arguments: [
                        Data(change.new.nonce), Data(change.new.sealedKey), change.old.assetID, change.old.keyID, Data(change.old.nonce),
                        Data(change.old.sealedKey),
                    ]
                )
                changed += db.changesCount
            }
            return changed
        }
    }

    // MARK: Devices

    public func registerDevice(_ device: DeviceRecord) async throws -> DeviceRecord {
        try await pool.write { db in
            // First seen wins: an existing row is kept and returned.
            try db.cachedStatement(
                sql: "INSERT INTO device (id, signing_key, agreement_key, first_seen_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
            ).execute(arguments: [device.id, Data(device.signingKey), Data(device.agreementKey), device.firstSeenAt])
            return try Self.fetchDevice(db, id: device.id) ?? device
        }
    }

    public func device(id: String) async throws -> DeviceRecord? {
        try await pool.read { db in try Self.fetchDevice(db, id: id) }
    }

    private static func fetchDevice(_ db: Database, id: String) throws -> DeviceRecord? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM device WHERE id = ?"), arguments: [id]).map { row in
            DeviceRecord(
                id: try row.decode(forColumn: "id"),
                signingKey: [UInt8](try row.decode(forColumn: "signing_key") as Data),
                agreementKey: [UInt8](try row.decode(forColumn: "agreement_key") as Data),
                firstSeenAt: try row.decode(forColumn: "first_seen_at")
            )
        }
    }

    // MARK: Nonces and leases

    /// Records `nonce` unless it was seen within its window; returns false for a replay. Runs inside a write transaction.
    private static func recordNonce(_ nonce: RequestNonce, now: Int64, in db: Database) throws -> Bool {
        let horizon = now - nonce.window
        let value = Data(nonce.value)
        let seen = try db.cachedStatement(sql: "SELECT seen_at FROM request_nonce WHERE nonce = ?")
        if let seenAt = try Int64.fetchOne(seen, arguments: [value]), seenAt > horizon {
            return false
        }
        try db.cachedStatement(
            sql: "INSERT INTO request_nonce (nonce, seen_at) VALUES (?, ?) ON CONFLICT (nonce) DO UPDATE SET seen_at = excluded.seen_at"
        ).execute(arguments: [value, now])
        // Nonces that left the window are forgotten in the background (forgetNonces), not here.
        return true
    }

    public func saveLease(
        _ request: IssuanceRequest,
        audit: AuditRecord,
        sign: @escaping @Sendable (IssuedLease) throws -> SignedPayload?
    ) async throws -> LeaseSaveResult {
        try await commits.write { db in
            if let nonce = request.nonce, try !Self.recordNonce(nonce, now: request.now, in: db) { return .replayed }
            let facts = IssuanceFacts(
                existing: try Self.fetchLease(db, id: request.lease.id),
                accountLeases: try Row.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT * FROM lease WHERE account = ?
                                AND (asset_id = ? OR (released_at IS NULL AND storage_expires_at > ?))
                            """
                    ),
                    arguments: [request.lease.account, request.lease.assetID, request.now]
                ).map(Self.lease(from:))
            )
            let decision = try LeaseIssuance.settle(request, facts: facts, audit: audit, sign: sign)
            try Self.apply(decision.writes, now: request.now, in: db)
            return decision.result
        }
    }

    /// Writes what ``LeaseIssuance`` decided, inside the caller's transaction.
    private static func apply(_ writes: IssuanceWrites, now: Int64, in db: Database) throws {
        for id in writes.released {
            try db.cachedStatement(sql: "UPDATE lease SET released_at = ? WHERE id = ? AND released_at IS NULL").execute(arguments: [now, id])
        }
        for (id, time) in writes.firstPlays.sorted(by: { $0.key < $1.key }) {
            try db.cachedStatement(sql: "UPDATE lease SET first_played_at = ? WHERE id = ? AND first_played_at IS NULL")
                .execute(arguments: [time, id])
        }
        if let lease = writes.upsert {
            try db.cachedStatement(
                sql: """
                    INSERT INTO lease (id, account, asset_id, device_id, key_ids, type, created_at, issued_at, storage_expires_at,
                                       playback_duration, renewable_until, renewal_count, released_at, deleted_at, first_played_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET
                        issued_at = excluded.issued_at, storage_expires_at = excluded.storage_expires_at,
                        playback_duration = excluded.playback_duration, renewable_until = excluded.renewable_until,
                        renewal_count = excluded.renewal_count, first_played_at = excluded.first_played_at
                    """
            ).execute(arguments: [
                lease.id, lease.account, lease.assetID, lease.deviceID, lease.keyIDs.joined(separator: ","), lease.type.rawValue,
                lease.createdAt, lease.issuedAt, lease.storageExpiresAt, lease.playbackDuration, lease.renewableUntil,
                lease.renewalCount, lease.releasedAt, lease.deletedAt, lease.firstPlayedAt,
            ])
        }
        for record in writes.audits { try insert(record, into: db) }
    }

    public func recordFirstPlay(
        leaseID: String,
        deviceID: String,
        at time: Int64,
        nonce: RequestNonce?,
        now: Int64,
        audit: AuditRecord
    ) async throws -> FirstPlayResult {
        try await commits.write { db in
            if let nonce, try !Self.recordNonce(nonce, now: now, in: db) { return .replayed }
            guard let lease = try Self.fetchLease(db, id: leaseID), lease.deviceID == deviceID else { return .unknownLease }
            let first = min(lease.firstPlayedAt ?? time, time)
            try db.cachedStatement(sql: "UPDATE lease SET first_played_at = ? WHERE id = ?").execute(arguments: [first, leaseID])
            try Self.insert(audit, into: db)
            return .recorded(firstPlayedAt: first)
        }
    }

    public func lease(id: String) async throws -> IssuedLease? {
        try await pool.read { db in try Self.fetchLease(db, id: id) }
    }

    private static func fetchLease(_ db: Database, id: String) throws -> IssuedLease? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM lease WHERE id = ?"), arguments: [id]).map(lease(from:))
    }

    private static func lease(from row: Row) throws -> IssuedLease {
        let keyIDs: String = try row.decode(forColumn: "key_ids")
        let type: String = try row.decode(forColumn: "type")
        return IssuedLease(
            id: try row.decode(forColumn: "id"),
            account: try row.decode(forColumn: "account"),
            assetID: try row.decode(forColumn: "asset_id"),
            deviceID: try row.decode(forColumn: "device_id"),
            keyIDs: keyIDs.split(separator: ",").map(String.init),
            type: LeaseType(rawValue: type) ?? .streaming,
            createdAt: try row.decode(forColumn: "created_at"),
            issuedAt: try row.decode(forColumn: "issued_at"),
            storageExpiresAt: try row.decode(forColumn: "storage_expires_at"),
            playbackDuration: try row.decode(forColumn: "playback_duration"),
            renewableUntil: try row.decode(forColumn: "renewable_until"),
            renewalCount: try row.decode(forColumn: "renewal_count"),
            releasedAt: try row.decode(forColumn: "released_at"),
            deletedAt: try row.decode(forColumn: "deleted_at"),
            firstPlayedAt: try row.decode(forColumn: "first_played_at")
        )
    }

    public func releaseLease(id: String, at time: Int64, deletedAt: Int64?, nonce: RequestNonce, audit: AuditRecord) async throws -> Bool {
        try await commits.write { db in
            guard try Self.recordNonce(nonce, now: time, in: db) else { return false }
            try db.cachedStatement(sql: "UPDATE lease SET released_at = ?, deleted_at = ? WHERE id = ? AND released_at IS NULL")
                .execute(arguments: [time, deletedAt, id])
            try Self.insert(audit, into: db)
            return true
        }
    }

    // MARK: Audit

    public func appendAudit(_ record: AuditRecord) async throws {
        try await pool.write { db in try Self.insert(record, into: db) }
    }

    public func forgetNonces(seenAtOrBefore horizon: Int64, limit: Int) async throws -> Int {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM request_nonce WHERE nonce IN (SELECT nonce FROM request_nonce WHERE seen_at <= ? LIMIT ?)",
                arguments: [horizon, limit]
            )
            return db.changesCount
        }
    }

    public func activeLeaseCounts(now: Int64) async throws -> [LeaseType: Int] {
        try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT type, COUNT(*) AS count FROM lease WHERE released_at IS NULL AND storage_expires_at > ? GROUP BY type",
                arguments: [now]
            )
            var counts: [LeaseType: Int] = [:]
            for row in rows {
                if let type = LeaseType(rawValue: try row.decode(forColumn: "type")) { counts[type] = try row.decode(forColumn: "count") }
            }
            return counts
        }
    }

    public func checkReady() async throws {
        _ = try await pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM asset LIMIT 1") }
    }

    public func auditRecords(limit: Int) async throws -> [AuditRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM audit ORDER BY id LIMIT ?", arguments: [limit]).map { row in
                let event: String = try row.decode(forColumn: "event")
                return AuditRecord(
                    time: try row.decode(forColumn: "time"),
                    event: AuditRecord.Event(rawValue: event) ?? .refused,
                    operation: try row.decode(forColumn: "operation"),
                    account: try row.decode(forColumn: "account"),
                    deviceID: try row.decode(forColumn: "device_id"),
                    assetID: try row.decode(forColumn: "asset_id"),
                    leaseID: try row.decode(forColumn: "lease_id"),
                    code: try row.decode(forColumn: "code"),
                    detail: try row.decode(forColumn: "detail"),
                    count: try row.decode(forColumn: "count")
                )
            }
        }
    }

    private static func insert(_ record: AuditRecord, into db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO audit (time, event, operation, account, device_id, asset_id, lease_id, code, detail, count)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(
            arguments: [
                record.time, record.event.rawValue, record.operation, record.account, record.deviceID, record.assetID,
                record.leaseID, record.code, record.detail, record.count,
            ]
        )
    }
}
