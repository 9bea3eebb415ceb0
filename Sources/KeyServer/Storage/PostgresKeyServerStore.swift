import Foundation
public import KeyDelivery
public import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The ``KeyServerStore`` for fleets: one PostgreSQL database shared by any number of stateless key server instances
/// (postgres-nio, a pool of connections per instance).
///
/// Every invariant that SQLite gets from its single writer is decided here in one transaction at `READ COMMITTED`
/// (docs/key-server.md, "PostgreSQL"):
/// - a lease's device and stream limits, the once-per-account rental and the identity-stream reuse are decided under
///   a transaction-scoped advisory lock on the lease's account (`pg_advisory_xact_lock`), so two instances saving
///   leases of one account take turns, and the count each sees includes the other's commit;
/// - the replay window is one atomic `INSERT ... ON CONFLICT DO UPDATE ... WHERE` on the nonce's primary key: of two
///   requests with the same nonce, the second waits on the first's row and then finds it inside the window;
/// - first plays and releases are single-row updates that never widen what a device holds.
///
/// ```swift
/// let store = try PostgresKeyServerStore(url: "postgres://stowage@127.0.0.1:5432/keys?sslmode=disable")
/// try await store.migrate()       // `stowage keyserver init --database URL`
/// try await store.checkSchema()   // `stowage keyserver run` refuses an old schema
/// ```
public final class PostgresKeyServerStore: KeyServerStore {
    /// The schema version this build reads and writes.
    public static let schemaVersion = 1

    /// The database's URL with any password removed, for messages.
    public let displayURL: String
    let client: PostgresClient
    /// The same server for one connection outside the pool (``probe()``).
    private let probeConfiguration: PostgresConnection.Configuration
    private let maximumConnections: Int
    private let operations = Atomic<Int>(0)

    public var connectionUse: (operations: Int, maximumConnections: Int)? {
        (operations.load(ordering: .relaxed), maximumConnections)
    }
    private let runner: Task<Void, Never>
    let logger: Logger
    /// The longest one operation (a lease decision, a lookup) may take, waiting for a connection included.
    private let operationTimeout: Duration

    /// Connects lazily to the database at `url`: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`, with
    /// `?sslmode=disable|prefer|require` (default `prefer`) and `?pool=N` connections (default 20).
    ///
    /// - Parameter operationTimeout: the longest one operation may take, waiting for a connection included; past it
    ///   the request fails with `database_unavailable` (so a database that went away fails requests in bounded time).
    /// - Throws: ``KeyServerSetupError`` `invalid_database_url`.
    /// - Parameter logger: where the pool reports connection trouble; by default warnings and errors only (each failed
    ///   connection attempt is an info line that would flood a terminal while the database is down).
    public init(url: String, operationTimeout: Duration = .seconds(10), logger: Logger? = nil) throws {
        let parsed = try Self.configuration(from: url)
        displayURL = parsed.display
        probeConfiguration = parsed.probe
        var fallback = Logger(label: "stowage.keyserver.postgres")
        fallback.logLevel = .warning
        let logger = logger ?? fallback
        self.logger = logger
        self.operationTimeout = operationTimeout
        maximumConnections = parsed.configuration.options.maximumConnections
        let client = PostgresClient(configuration: parsed.configuration, backgroundLogger: logger)
        self.client = client
        runner = Task { await client.run() }
    }

    deinit { runner.cancel() }

    /// `url` with any password removed, for messages.
    static func redacted(_ url: String) -> String {
        (try? configuration(from: url).display) ?? "the PostgreSQL database"
    }

    /// Closes the pool's connections.
    public func close() async {
        runner.cancel()
        _ = await runner.value
    }

    static func configuration(
        from url: String
    ) throws -> (
        configuration: PostgresClient.Configuration, probe: PostgresConnection.Configuration, display: String
    ) {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
            let host = components.host, !host.isEmpty, let user = components.user, !user.isEmpty
        else {
            throw KeyServerSetupError.invalidDatabaseURL(url.replacingOccurrences(of: #":[^:@/]*@"#, with: ":***@", options: .regularExpression))
        }
        let database = String(components.path.drop { $0 == "/" })
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let tls: PostgresClient.Configuration.TLS
        let probeTLS: PostgresConnection.Configuration.TLS
        let context = { () throws -> NIOSSLContext in
            do {
                return try NIOSSLContext(configuration: .makeClientConfiguration())
            } catch {
                throw KeyServerSetupError.databaseUnavailable(url, reason: "TLS could not be set up: \(error)")
            }
        }
        switch query["sslmode"] ?? "prefer" {
        case "disable":
            tls = .disable
            probeTLS = .disable
        case "require", "verify-ca", "verify-full":
            tls = .require(.makeClientConfiguration())
            probeTLS = .require(try context())
        default:
            tls = .prefer(.makeClientConfiguration())
            probeTLS = .prefer(try context())
        }
        var configuration = PostgresClient.Configuration(
            host: host,
            port: components.port ?? 5432,
            username: user,
            password: components.password,
            database: database.isEmpty ? nil : database,
            tls: tls
        )
        configuration.options.connectTimeout = .seconds(5)
        if let pool = query["pool"].flatMap(Int.init), pool > 0 { configuration.options.maximumConnections = pool }
        var probe = PostgresConnection.Configuration(
            host: host,
            port: components.port ?? 5432,
            username: user,
            password: components.password,
            database: database.isEmpty ? nil : database,
            tls: probeTLS
        )
        probe.options.connectTimeout = .seconds(5)
        var display = components
        if display.password != nil { display.password = "***" }
        return (configuration, probe, display.string ?? "postgres://\(host)")
    }

    /// Opens one connection outside the pool and closes it: the pool retries a failing connection until an operation
    /// times out and keeps the reason to its log, so setup (`init`, `run`) asks once itself and reports why.
    /// - Throws: ``KeyServerSetupError`` `database_unavailable` with the reason: refused, no such host, bad password,
    ///   no such database, no TLS.
    func probe() async throws {
        do {
            let connection = try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(),
                configuration: probeConfiguration,
                id: 0,
                logger: logger
            )
            try? await connection.close()
        } catch {
            throw KeyServerSetupError.databaseUnavailable(
                displayURL,
                reason: Self.describe(error),
                answeredByServer: (error as? PSQLError)?.serverInfo != nil
            )
        }
    }

    // MARK: Schema

    /// Each migration, in order; ``schemaVersion`` is their count.
    private static let migrations: [String] = [
        """
        CREATE TABLE asset (
            id TEXT PRIMARY KEY,
            policy TEXT NOT NULL,
            created_at BIGINT NOT NULL
        );
        CREATE TABLE content_key (
            asset_id TEXT NOT NULL REFERENCES asset(id) ON DELETE CASCADE,
            key_id TEXT NOT NULL,
            nonce BYTEA NOT NULL,
            sealed_key BYTEA NOT NULL,
            PRIMARY KEY (asset_id, key_id)
        );
        CREATE TABLE device (
            id TEXT PRIMARY KEY,
            signing_key BYTEA NOT NULL,
            agreement_key BYTEA NOT NULL,
            first_seen_at BIGINT NOT NULL
        );
        CREATE TABLE lease (
            id TEXT PRIMARY KEY,
            account TEXT NOT NULL,
            asset_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            key_ids TEXT NOT NULL,
            type TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            issued_at BIGINT NOT NULL,
            storage_expires_at BIGINT NOT NULL,
            playback_duration BIGINT,
            renewable_until BIGINT,
            renewal_count INTEGER NOT NULL DEFAULT 0,
            released_at BIGINT,
            deleted_at BIGINT,
            first_played_at BIGINT
        );
        CREATE INDEX lease_by_account_device ON lease (account, device_id, type, released_at, storage_expires_at);
        CREATE INDEX lease_by_account_asset ON lease (account, asset_id, type, created_at);
        CREATE TABLE request_nonce (
            nonce BYTEA PRIMARY KEY,
            seen_at BIGINT NOT NULL
        );
        CREATE INDEX request_nonce_by_time ON request_nonce (seen_at);
        CREATE TABLE audit (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            time BIGINT NOT NULL,
            event TEXT NOT NULL,
            operation TEXT NOT NULL,
            account TEXT,
            device_id TEXT,
            asset_id TEXT,
            lease_id TEXT,
            code TEXT,
            detail TEXT,
            count INTEGER NOT NULL DEFAULT 1
        );
        """
    ]

    /// A fixed key for the advisory lock that serializes migrations (two `init`s at once apply each one once).
    private static let migrationLock: Int64 = 0x5354_4F57_4147_4531

    /// Brings the schema up to ``schemaVersion``, each migration in its own transaction.
    /// - Throws: ``KeyServerSetupError`` `database_unavailable`, or `schema_outdated` when the database is newer than
    ///   this build.
    public func migrate() async throws {
        try await probe()
        try await reachable { [self] in
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
                try await connection.query(
                    "CREATE TABLE IF NOT EXISTS stowage_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)",
                    logger: logger
                )
                let current = try await Self.version(connection, logger: logger)
                guard current <= Self.schemaVersion else {
                    throw KeyServerSetupError.schemaOutdated(self.displayURL, found: current, expected: Self.schemaVersion, newer: true)
                }
                for index in current..<Self.schemaVersion {
                    // One statement per query: the extended protocol refuses several in one.
                    for statement in Self.migrations[index].split(separator: ";").map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) })
                    where !statement.isEmpty {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    let applied = Int64(Date().timeIntervalSince1970)
                    try await connection.query("INSERT INTO stowage_schema (version, applied_at) VALUES (\(index + 1), \(applied))", logger: logger)
                }
            }
        }
    }

    /// The schema version found in the database (0 before `init`).
    public func schemaVersionFound() async throws -> Int {
        try await schemaVersion(within: nil)
    }

    private func schemaVersion(within limit: Duration?) async throws -> Int {
        try await reachable(within: limit) { [self] in
            try await client.withConnection { connection in
                let exists =
                    try await connection.query("SELECT to_regclass('stowage_schema') IS NOT NULL", logger: logger)
                    .collect().first?.decode(Bool.self) ?? false
                return exists ? try await Self.version(connection, logger: logger) : 0
            }
        }
    }

    /// Refuses a database whose schema is not the one this build uses.
    /// - Throws: ``KeyServerSetupError`` `schema_outdated` (with the command that fixes it) or `database_unavailable`.
    public func checkSchema() async throws {
        try await probe()
        let found = try await schemaVersionFound()
        guard found == Self.schemaVersion else {
            throw KeyServerSetupError.schemaOutdated(displayURL, found: found, expected: Self.schemaVersion, newer: found > Self.schemaVersion)
        }
    }

    private static func version(_ connection: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await connection.query("SELECT COALESCE(MAX(version), 0) FROM stowage_schema", logger: logger).collect()
        return try rows.first?.decode(Int.self) ?? 0
    }

    /// Runs `body` within ``operationTimeout``, turning a database that cannot be reached (or does not answer in
    /// time) into `database_unavailable`. SQL errors (a bug, not an outage) pass through as they are.
    ///
    /// The limit holds even when `body` does not stop when cancelled (a connection lease waiting on a pool, a query in
    /// flight): the answer is whichever comes first, and `body` is cancelled and left to end on its own. A task group
    /// would wait for it, and a request could then hang past any limit.
    func reachable<T: Sendable>(within limit: Duration? = nil, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let timeout = limit ?? operationTimeout
        let url = displayURL
        operations.add(1, ordering: .relaxed)
        defer { operations.subtract(1, ordering: .relaxed) }
        let race = FirstAnswer<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.start(continuation) {
                    [
                        Task {
                            do {
                                race.finish(.success(try await body()))
                            } catch {
                                race.finish(.failure(Self.classify(error, url: url)))
                            }
                        },
                        Task {
                            try? await Task.sleep(for: timeout)
                            race.finish(.failure(KeyServerSetupError.databaseUnavailable(url, reason: "no answer within \(timeout)")))
                        },
                    ]
                }
            }
        } onCancel: {
            race.finish(.failure(CancellationError()))
        }
    }

    /// A connection failure is `database_unavailable`; anything the server answered (or our own errors) is kept.
    static func classify(_ error: any Error, url: String) -> any Error {
        switch error {
        case is KeyServerSetupError, is CancellationError:
            return error
        case let error as PostgresTransactionError:
            if let inner = error.closureError ?? error.beginError ?? error.commitError { return classify(inner, url: url) }
            return error
        case let error as PSQLError where error.code == .server:
            return error
        default:
            return KeyServerSetupError.databaseUnavailable(url, reason: describe(error))
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if error.code == .sslUnsupported {
                return "the server does not offer TLS (add ?sslmode=disable only on a network you trust)"
            }
            if let underlying = error.underlying { return describe(underlying) }
            return "\(error.code)"
        }
        if let error = error as? NIOConnectionError {
            if error.dnsAError != nil || error.dnsAAAAError != nil || error.connectionErrors.isEmpty {
                return "the host name \(error.host) could not be resolved"
            }
            return error.connectionErrors.map { describe($0.error) }.joined(separator: "; ")
        }
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)).lowercased() }
        if error is ChannelError { return "the connection failed (\(error))" }
        return "\(error)"
    }

    // MARK: Assets and keys

    public func saveAsset(_ asset: AssetRecord, keys: [ContentKeyRecord]) async throws {
        try await reachable { [self] in
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query(
                    """
                    INSERT INTO asset (id, policy, created_at) VALUES (\(asset.id), \(asset.policy), \(asset.createdAt))
                    ON CONFLICT (id) DO UPDATE SET policy = EXCLUDED.policy
                    """,
                    logger: logger
                )
                for key in keys {
                    try await connection.query(
                        """
                        INSERT INTO content_key (asset_id, key_id, nonce, sealed_key)
                        VALUES (\(key.assetID), \(key.keyID), \(ByteBuffer(bytes: key.nonce)), \(ByteBuffer(bytes: key.sealedKey)))
                        ON CONFLICT (asset_id, key_id) DO UPDATE SET nonce = EXCLUDED.nonce, sealed_key = EXCLUDED.sealed_key
                        """,
                        logger: logger
                    )
                }
            }
        }
    }

    public func asset(id: String) async throws -> AssetRecord? {
        try await reachable { [self] in
            let rows = try await client.query("SELECT id, policy, created_at FROM asset WHERE id = \(id)", logger: logger).collect()
            return try rows.first.map { row in
                let (id, policy, createdAt) = try row.decode((String, String, Int64).self)
                return AssetRecord(id: id, policy: policy, createdAt: createdAt)
            }
        }
    }

    public func contentKeys(assetID: String, keyIDs: [String]) async throws -> [ContentKeyRecord] {
        guard !keyIDs.isEmpty else { return [] }
        return try await reachable { [self] in
            let rows = try await client.query(
                "SELECT key_id, nonce, sealed_key FROM content_key WHERE asset_id = \(assetID) AND key_id = ANY(\(keyIDs))",
                logger: logger
            ).collect()
            return try rows.map { row in
                let (keyID, nonce, sealed) = try row.decode((String, ByteBuffer, ByteBuffer).self)
                return ContentKeyRecord(
                    assetID: assetID,
                    keyID: keyID,
                    nonce: Array(nonce.readableBytesView),
                    sealedKey: Array(sealed.readableBytesView)
                )
            }
        }
    }

    public func contentKeys(after position: ContentKeyPosition?, limit: Int) async throws -> [ContentKeyRecord] {
        try await reachable { [self] in
            let rows =
                if let position {
                    try await client.query(
                        """
                        SELECT asset_id, key_id, nonce, sealed_key FROM content_key
                        WHERE (asset_id, key_id) > (\(position.assetID), \(position.keyID)) ORDER BY asset_id, key_id LIMIT \(limit)
                        """,
                        logger: logger
                    ).collect()
                } else {
                    try await client.query(
                        "SELECT asset_id, key_id, nonce, sealed_key FROM content_key ORDER BY asset_id, key_id LIMIT \(limit)",
                        logger: logger
                    ).collect()
                }
            return try rows.map { row in
                let (assetID, keyID, nonce, sealed) = try row.decode((String, String, ByteBuffer, ByteBuffer).self)
                return ContentKeyRecord(assetID: assetID, keyID: keyID, nonce: Array(buffer: nonce), sealedKey: Array(buffer: sealed))
            }
        }
    }

    public func replaceSealedKeys(_ changes: [SealedKeyChange]) async throws -> Int {
        guard !changes.isEmpty else { return 0 }
        return try await reachable { [self] in
            try await client.withTransaction(logger: logger) { connection in
                var changed = 0
                for change in changes {
                    let rows = try await connection.query(
                        """
                        UPDATE content_key SET nonce = \(ByteBuffer(bytes: change.new.nonce)), sealed_key = \(ByteBuffer(bytes: change.new.sealedKey))
                        WHERE asset_id = \(change.old.assetID) AND key_id = \(change.old.keyID)
                          AND nonce = \(ByteBuffer(bytes: change.old.nonce)) AND sealed_key = \(ByteBuffer(bytes: change.old.sealedKey))
                        RETURNING key_id
                        """,
                        logger: logger
                    ).collect()
                    changed += rows.count
                }
                return changed
            }
        }
    }

    // MARK: Devices

    public func registerDevice(_ device: DeviceRecord) async throws -> DeviceRecord {
        try await reachable { [self] in
            try await client.withTransaction(logger: logger) { connection in
                // First seen wins: an existing row is kept and returned.
                try await connection.query(
                    """
                    INSERT INTO device (id, signing_key, agreement_key, first_seen_at)
                    VALUES (\(device.id), \(ByteBuffer(bytes: device.signingKey)), \(ByteBuffer(bytes: device.agreementKey)), \(device.firstSeenAt))
                    ON CONFLICT (id) DO NOTHING
                    """,
                    logger: logger
                )
                return try await Self.fetchDevice(connection, id: device.id, logger: logger) ?? device
            }
        }
    }

    public func device(id: String) async throws -> DeviceRecord? {
        try await reachable { [self] in
            try await client.withConnection { connection in try await Self.fetchDevice(connection, id: id, logger: logger) }
        }
    }

    private static func fetchDevice(_ connection: PostgresConnection, id: String, logger: Logger) async throws -> DeviceRecord? {
        let rows = try await connection.query(
            "SELECT id, signing_key, agreement_key, first_seen_at FROM device WHERE id = \(id)",
            logger: logger
        ).collect()
        return try rows.first.map { row in
            let (id, signing, agreement, firstSeen) = try row.decode((String, ByteBuffer, ByteBuffer, Int64).self)
            return DeviceRecord(
                id: id,
                signingKey: Array(signing.readableBytesView),
                agreementKey: Array(agreement.readableBytesView),
                firstSeenAt: firstSeen
            )
        }
    }

    // MARK: Nonces and leases

    /// Records `nonce` unless it was seen within its window; false for a replay. One statement: the primary key makes
    /// a concurrent request with the same nonce wait for this transaction, then see the nonce inside its window.
    private static func recordNonce(_ nonce: RequestNonce, now: Int64, in connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let horizon = now - nonce.window
        let value = ByteBuffer(bytes: nonce.value)
        let recorded = try await connection.query(
            """
            INSERT INTO request_nonce (nonce, seen_at) VALUES (\(value), \(now))
            ON CONFLICT (nonce) DO UPDATE SET seen_at = EXCLUDED.seen_at WHERE request_nonce.seen_at <= \(horizon)
            RETURNING 1
            """,
            logger: logger
        ).collect()
        // Nonces that left the window are forgotten in the background (forgetNonces), off the request's path.
        return !recorded.isEmpty
    }

    /// Makes every other transaction saving a lease of `account` wait until this one ends.
    private static func lockAccount(_ account: String, in connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(account), 0))", logger: logger)
    }

    private static let leaseColumns = """
        id, account, asset_id, device_id, key_ids, type, created_at, issued_at, storage_expires_at, playback_duration,
        renewable_until, renewal_count, released_at, deleted_at, first_played_at
        """

    private static func leases(_ rows: [PostgresRow]) throws -> [IssuedLease] {
        try rows.map { row in
            let columns = try row.decode(
                (String, String, String, String, String, String, Int64, Int64, Int64, Int64?, Int64?, Int, Int64?, Int64?, Int64?).self
            )
            return IssuedLease(
                id: columns.0,
                account: columns.1,
                assetID: columns.2,
                deviceID: columns.3,
                keyIDs: columns.4.split(separator: ",").map(String.init),
                type: LeaseType(rawValue: columns.5) ?? .streaming,
                createdAt: columns.6,
                issuedAt: columns.7,
                storageExpiresAt: columns.8,
                playbackDuration: columns.9,
                renewableUntil: columns.10,
                renewalCount: columns.11,
                releasedAt: columns.12,
                deletedAt: columns.13,
                firstPlayedAt: columns.14
            )
        }
    }

    private static func fetchLease(_ connection: PostgresConnection, id: String, logger: Logger) async throws -> IssuedLease? {
        try leases(try await connection.query("SELECT \(unescaped: leaseColumns) FROM lease WHERE id = \(id)", logger: logger).collect()).first
    }

    public func saveLease(
        _ request: IssuanceRequest,
        audit: AuditRecord,
        sign: @escaping @Sendable (IssuedLease) throws -> SignedPayload?
    ) async throws -> LeaseSaveResult {
        // `sign` escapes: an operation past its time limit is answered `database_unavailable` and left to end on its
        // own (``reachable(within:_:)``), so the closure may outlive this call.
        let logger = self.logger
        return try await reachable { [self] in
            try await client.withTransaction(logger: logger) { connection -> LeaseSaveResult in
                let lease = request.lease
                let now = request.now
                // Two requests of one account are judged one after the other, each seeing what the other wrote.
                try await Self.lockAccount(lease.account, in: connection, logger: logger)
                if let nonce = request.nonce, try await !Self.recordNonce(nonce, now: now, in: connection, logger: logger) { return .replayed }
                let facts = IssuanceFacts(
                    existing: try await Self.fetchLease(connection, id: lease.id, logger: logger),
                    accountLeases: try Self.leases(
                        try await connection.query(
                            """
                            SELECT \(unescaped: Self.leaseColumns) FROM lease WHERE account = \(lease.account)
                                AND (asset_id = \(lease.assetID) OR (released_at IS NULL AND storage_expires_at > \(now)))
                            """,
                            logger: logger
                        ).collect()
                    )
                )
                let decision = try LeaseIssuance.settle(request, facts: facts, audit: audit, sign: sign)
                try await Self.apply(decision.writes, now: now, in: connection, logger: logger)
                return decision.result
            }
        }
    }

    /// Writes what ``LeaseIssuance`` decided, inside the caller's transaction.
    private static func apply(_ writes: IssuanceWrites, now: Int64, in connection: PostgresConnection, logger: Logger) async throws {
        for id in writes.released {
            try await connection.query("UPDATE lease SET released_at = \(now) WHERE id = \(id) AND released_at IS NULL", logger: logger)
        }
        for (id, time) in writes.firstPlays.sorted(by: { $0.key < $1.key }) {
            try await connection.query(
                "UPDATE lease SET first_played_at = \(time) WHERE id = \(id) AND first_played_at IS NULL",
                logger: logger
            )
        }
        if let lease = writes.upsert {
            try await connection.query(
                """
                INSERT INTO lease (\(unescaped: Self.leaseColumns))
                VALUES (\(lease.id), \(lease.account), \(lease.assetID), \(lease.deviceID), \(lease.keyIDs.joined(separator: ",")),
                        \(lease.type.rawValue), \(lease.createdAt), \(lease.issuedAt), \(lease.storageExpiresAt),
                        \(lease.playbackDuration), \(lease.renewableUntil), \(lease.renewalCount), \(lease.releasedAt),
                        \(lease.deletedAt), \(lease.firstPlayedAt))
                ON CONFLICT (id) DO UPDATE SET
                    issued_at = EXCLUDED.issued_at, storage_expires_at = EXCLUDED.storage_expires_at,
                    playback_duration = EXCLUDED.playback_duration, renewable_until = EXCLUDED.renewable_until,
                    renewal_count = EXCLUDED.renewal_count, first_played_at = EXCLUDED.first_played_at
                """,
                logger: logger
            )
        }
        for record in writes.audits { try await insert(record, into: connection, logger: logger) }
    }

    public func recordFirstPlay(
        leaseID: String,
        deviceID: String,
        at time: Int64,
        nonce: RequestNonce?,
        now: Int64,
        audit: AuditRecord
    ) async throws -> FirstPlayResult {
        let logger = self.logger
        return try await reachable { [self] in
            try await client.withTransaction(logger: logger) { connection -> FirstPlayResult in
                if let nonce, try await !Self.recordNonce(nonce, now: now, in: connection, logger: logger) { return .replayed }
                // The earliest reported wins, in one statement: a concurrent report cannot move it later.
                let rows = try await connection.query(
                    """
                    UPDATE lease SET first_played_at = LEAST(COALESCE(first_played_at, \(time)), \(time))
                    WHERE id = \(leaseID) AND device_id = \(deviceID) RETURNING first_played_at
                    """,
                    logger: logger
                ).collect()
                guard let first = try rows.first?.decode(Int64.self) else { return .unknownLease }
                try await Self.insert(audit, into: connection, logger: logger)
                return .recorded(firstPlayedAt: first)
            }
        }
    }

    public func lease(id: String) async throws -> IssuedLease? {
        try await reachable { [self] in
            try await client.withConnection { connection in try await Self.fetchLease(connection, id: id, logger: logger) }
        }
    }

    public func releaseLease(id: String, at time: Int64, deletedAt: Int64?, nonce: RequestNonce, audit: AuditRecord) async throws -> Bool {
        let logger = self.logger
        return try await reachable { [self] in
            try await client.withTransaction(logger: logger) { connection -> Bool in
                guard try await Self.recordNonce(nonce, now: time, in: connection, logger: logger) else { return false }
                try await connection.query(
                    "UPDATE lease SET released_at = \(time), deleted_at = \(deletedAt) WHERE id = \(id) AND released_at IS NULL",
                    logger: logger
                )
                try await Self.insert(audit, into: connection, logger: logger)
                return true
            }
        }
    }

    // MARK: Audit

    public func appendAudit(_ record: AuditRecord) async throws {
        try await reachable { [self] in
            try await client.withConnection { connection in try await Self.insert(record, into: connection, logger: logger) }
        }
    }

    /// Rows another transaction holds are skipped, not waited for: instances cleaning at once never wait on, or
    /// deadlock with, each other or with a request recording a nonce.
    public func forgetNonces(seenAtOrBefore horizon: Int64, limit: Int) async throws -> Int {
        try await reachable { [self] in
            try await client.query(
                """
                DELETE FROM request_nonce WHERE nonce IN (
                    SELECT nonce FROM request_nonce WHERE seen_at <= \(horizon) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
                """,
                logger: logger
            ).collect().count
        }
    }

    /// Within 3 seconds at most, like ``checkReady()``: a scrape gives up soon.
    public func activeLeaseCounts(now: Int64) async throws -> [LeaseType: Int] {
        try await reachable(within: min(operationTimeout, .seconds(3))) { [self] in
            let rows = try await client.query(
                "SELECT type, COUNT(*)::BIGINT FROM lease WHERE released_at IS NULL AND storage_expires_at > \(now) GROUP BY type",
                logger: logger
            ).collect()
            var counts: [LeaseType: Int] = [:]
            for row in rows {
                let (type, count) = try row.decode((String, Int64).self)
                if let type = LeaseType(rawValue: type) { counts[type] = Int(count) }
            }
            return counts
        }
    }

    /// Reachable through the pool and on the current schema (no probe connection: a load balancer asks every few
    /// seconds), within 3 seconds or the operation timeout if shorter (balancers give up on a check after a few).
    public func checkReady() async throws {
        let found = try await schemaVersion(within: min(operationTimeout, .seconds(3)))
        guard found == Self.schemaVersion else {
            throw KeyServerSetupError.schemaOutdated(displayURL, found: found, expected: Self.schemaVersion, newer: found > Self.schemaVersion)
        }
    }

    public func auditRecords(limit: Int) async throws -> [AuditRecord] {
        try await reachable { [self] in
            let rows = try await client.query(
                """
                SELECT time, event, operation, account, device_id, asset_id, lease_id, code, detail, count
                FROM audit ORDER BY id LIMIT \(limit)
                """,
                logger: logger
            ).collect()
            return try rows.map { row in
                let columns = try row.decode((Int64, String, String, String?, String?, String?, String?, String?, String?, Int).self)
                return AuditRecord(
                    time: columns.0,
                    event: AuditRecord.Event(rawValue: columns.1) ?? .refused,
                    operation: columns.2,
                    account: columns.3,
                    deviceID: columns.4,
                    assetID: columns.5,
                    leaseID: columns.6,
                    code: columns.7,
                    detail: columns.8,
                    count: columns.9
                )
            }
        }
    }

    private static func insert(_ record: AuditRecord, into connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO audit (time, event, operation, account, device_id, asset_id, lease_id, code, detail, count)
            VALUES (\(record.time), \(record.event.rawValue), \(record.operation), \(record.account), \(record.deviceID),
                    \(record.assetID), \(record.leaseID), \(record.code), \(record.detail), \(record.count))
            """,
            logger: logger
        )
    }
}

/// The first of several answers to one awaited operation (``PostgresKeyServerStore/reachable(within:_:)``): the
/// continuation is resumed once, with whichever result comes first, and the tasks racing for it are then cancelled.
private final class FirstAnswer<T: Sendable>: Sendable {
    private enum State {
        case waiting
        case running(CheckedContinuation<T, any Error>, [Task<Void, Never>])
        case answered
    }

    private let state = Mutex<State>(.waiting)

    /// Stores the continuation and starts the racing tasks; when an answer came first (the caller was cancelled), it
    /// is resumed with that at once and nothing is started.
    func start(_ continuation: CheckedContinuation<T, any Error>, tasks: () -> [Task<Void, Never>]) {
        let started = state.withLock { state -> Bool in
            guard case .waiting = state else { return false }
            state = .running(continuation, [])
            return true
        }
        guard started else {
            continuation.resume(throwing: CancellationError())
            return
        }
        let racing = tasks()
        let late = state.withLock { state -> Bool in
            guard case .running(let continuation, _) = state else { return true }
            state = .running(continuation, racing)
            return false
        }
        if late { for task in racing { task.cancel() } }
    }

    func finish(_ result: Result<T, any Error>) {
        let winner = state.withLock { state -> (CheckedContinuation<T, any Error>, [Task<Void, Never>])? in
            switch state {
            case .running(let continuation, let tasks):
                state = .answered
                return (continuation, tasks)
            case .waiting:
                state = .answered
                return nil
            case .answered:
                return nil
            }
        }
        guard let (continuation, tasks) = winner else { return }
        for task in tasks { task.cancel() }
        continuation.resume(with: result)
    }
}
