import Foundation
import GRDB
import KeyDelivery
import NIOCore
import PostgresNIO
import StowageCore
import StowageCrypto

/// `stowage keyserver migrate --from DATA_DIR --database URL`: moves a key server from its SQLite file to PostgreSQL.
///
/// Every row of every table (assets and sealed keys, devices, leases, the nonces of the replay window, the audit log
/// in order) is copied in one PostgreSQL transaction, so the target gets all of it or nothing. Before committing, the
/// rows of each table are counted on both sides, and a sample of content keys is opened with the data directory's
/// master key from both databases and compared: a copy that would not decrypt is never committed. The target must
/// be empty (its schema is created if need be); the source is read in primary-key order, a batch at a time, so memory
/// does not grow with its size.
///
/// ```swift
/// let report = try await KeyServerStoreMigration.copy(from: directory, to: "postgres://stowage@db/keys")
/// print(report.counts)   // [("asset", 12), ("content_key", 30), ...]
/// ```
public enum KeyServerStoreMigration {
    /// What was copied.
    public struct Report: Sendable {
        /// Rows per table, in copy order.
        public var counts: [(table: String, rows: Int)]
        /// Content keys opened from both databases and found equal.
        public var keysCompared: Int
    }

    /// A table, its columns, and the key it is read in order of.
    struct Table {
        var name: String
        var columns: [String]
        var orderBy: [String]
    }

    static let tables: [Table] = [
        Table(name: "asset", columns: ["id", "policy", "created_at"], orderBy: ["id"]),
        Table(name: "content_key", columns: ["asset_id", "key_id", "nonce", "sealed_key"], orderBy: ["asset_id", "key_id"]),
        Table(name: "device", columns: ["id", "signing_key", "agreement_key", "first_seen_at"], orderBy: ["id"]),
        Table(
            name: "lease",
            columns: [
                "id", "account", "asset_id", "device_id", "key_ids", "type", "created_at", "issued_at", "storage_expires_at",
                "playback_duration", "renewable_until", "renewal_count", "released_at", "deleted_at", "first_played_at",
            ],
            orderBy: ["id"]
        ),
        Table(name: "request_nonce", columns: ["nonce", "seen_at"], orderBy: ["nonce"]),
        // The audit log keeps its order; PostgreSQL numbers the rows afresh.
        Table(
            name: "audit",
            columns: ["time", "event", "operation", "account", "device_id", "asset_id", "lease_id", "code", "detail", "count"],
            orderBy: ["id"]
        ),
    ]

    static let batchSize = 1_000

    /// Copies the SQLite store of `dataDirectory` into the PostgreSQL database at `url`.
    ///
    /// - Throws: ``KeyServerSetupError``: `not_initialized` (no SQLite store in the directory), `database_not_empty`,
    ///   `migration_mismatch` (the source changed while copying, or a key did not open the same), and the database
    ///   errors of ``PostgresKeyServerStore``.
    public static func copy(from dataDirectory: KeyServerDataDirectory, to url: String) async throws -> Report {
        let sqlitePath = dataDirectory.path(of: KeyServerDataDirectory.databaseFile)
        guard FileManager.default.fileExists(atPath: sqlitePath) else { throw KeyServerSetupError.notInitialized(dataDirectory.path) }
        let keys = try MasterKeyRing(directory: dataDirectory)
        let source = try SQLiteKeyServerStore(path: sqlitePath)
        let target = try PostgresKeyServerStore(url: url, operationTimeout: .seconds(3_600))
        do {
            try await target.migrate()
            let report = try await target.copyIn(from: source, keys: keys)
            await target.close()
            return report
        } catch {
            await target.close()
            throw error
        }
    }
}

extension SQLiteKeyServerStore {
    /// Up to `limit` rows of `table` after `after` (its order-by values), each value as stored.
    func rows(of table: KeyServerStoreMigration.Table, after: [DatabaseValue]?, limit: Int) async throws -> [[DatabaseValue]] {
        try await pool.read { db in
            let columns = (table.columns + table.orderBy).joined(separator: ", ")
            var sql = "SELECT \(columns) FROM \(table.name)"
            var arguments = StatementArguments()
            if let after {
                sql += " WHERE (\(table.orderBy.joined(separator: ", "))) > (\(table.orderBy.map { _ in "?" }.joined(separator: ", ")))"
                arguments = StatementArguments(after)
            }
            sql += " ORDER BY \(table.orderBy.joined(separator: ", ")) LIMIT \(limit)"
            return try Row.fetchAll(db, sql: sql, arguments: arguments).map { Array($0.databaseValues) }
        }
    }

    func count(of table: String) async throws -> Int {
        try await pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0 }
    }
}

extension PostgresKeyServerStore {
    func copyIn(from source: SQLiteKeyServerStore, keys: MasterKeyRing) async throws -> KeyServerStoreMigration.Report {
        try await reachable { [self] in
            try await client.withTransaction(logger: logger) { connection in
                let existing =
                    try await connection.query(
                        "SELECT (SELECT COUNT(*) FROM asset) + (SELECT COUNT(*) FROM device) + (SELECT COUNT(*) FROM lease) + (SELECT COUNT(*) FROM audit)",
                        logger: logger
                    ).collect().first?.decode(Int64.self) ?? 0
                guard existing == 0 else {
                    throw KeyServerSetupError(
                        .databaseNotEmpty,
                        "\(displayURL) already holds a key server's assets, devices, leases or audit; migrate into an empty database (create a new one with createdb)"
                    )
                }
                var counts: [(table: String, rows: Int)] = []
                for table in KeyServerStoreMigration.tables {
                    var copied = 0
                    var after: [DatabaseValue]?
                    let placeholders = (1...table.columns.count).map { "$\($0)" }.joined(separator: ", ")
                    let insert = "INSERT INTO \(table.name) (\(table.columns.joined(separator: ", "))) VALUES (\(placeholders))"
                    while true {
                        let batch = try await source.rows(of: table, after: after, limit: KeyServerStoreMigration.batchSize)
                        for row in batch {
                            var bindings = PostgresBindings(capacity: table.columns.count)
                            for value in row.prefix(table.columns.count) { Self.bind(value, into: &bindings) }
                            try await connection.query(PostgresQuery(unsafeSQL: insert, binds: bindings), logger: logger)
                        }
                        copied += batch.count
                        guard batch.count == KeyServerStoreMigration.batchSize, let last = batch.last else { break }
                        after = Array(last.suffix(table.orderBy.count))
                    }
                    // The source must not have changed under the copy: a running server would have written after its
                    // rows were read.
                    let sourceRows = try await source.count(of: table.name)
                    let targetRows =
                        try await connection.query(PostgresQuery(unsafeSQL: "SELECT COUNT(*) FROM \(table.name)"), logger: logger)
                        .collect().first?.decode(Int64.self) ?? -1
                    guard sourceRows == copied, targetRows == Int64(copied) else {
                        throw KeyServerSetupError(
                            .migrationMismatch,
                            "table \(table.name): \(sourceRows) rows in the SQLite store, \(copied) read, \(targetRows) in \(displayURL); stop the key server using the SQLite store and run the migration again (nothing was committed)"
                        )
                    }
                    counts.append((table.name, copied))
                }
                // A sample of keys (first, last and a spread between) must open to the same bytes from both sides;
                // chosen by the server so only the sample comes over.
                let total = counts.first { $0.table == "content_key" }?.rows ?? 0
                let step = max(1, total / 16)
                let sample = try await connection.query(
                    """
                    SELECT asset_id, key_id, nonce, sealed_key FROM (
                        SELECT *, row_number() OVER (ORDER BY asset_id, key_id) - 1 AS position FROM content_key) numbered
                    WHERE position % \(step) = 0 OR position = \(total - 1)
                    """,
                    logger: logger
                ).collect()
                var compared = 0
                for row in sample {
                    let (assetID, keyID, nonce, sealed) = try row.decode((String, String, ByteBuffer, ByteBuffer).self)
                    let copiedRecord = ContentKeyRecord(assetID: assetID, keyID: keyID, nonce: Array(buffer: nonce), sealedKey: Array(buffer: sealed))
                    let original = try await source.contentKeys(assetID: assetID, keyIDs: [keyID]).first
                    guard let original, let expected = try? keys.open(original), let found = try? keys.open(copiedRecord), expected == found
                    else {
                        throw KeyServerSetupError(
                            .migrationMismatch,
                            "the content key \(keyID) of asset \(assetID) does not open the same from \(displayURL) as from the SQLite store with this data directory's master key; nothing was committed"
                        )
                    }
                    compared += 1
                }
                return KeyServerStoreMigration.Report(counts: counts, keysCompared: compared)
            }
        }
    }

    private static func bind(_ value: DatabaseValue, into bindings: inout PostgresBindings) {
        switch value.storage {
        case .null: bindings.appendNull()
        case .int64(let integer): bindings.append(integer)
        case .double(let number): bindings.append(number)
        case .string(let text): bindings.append(text)
        case .blob(let data): bindings.append(ByteBuffer(bytes: data))
        }
    }
}
