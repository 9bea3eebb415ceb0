public import Foundation
import GRDB
import StowageCore
import StowageCrypto

/// The client key store: leases and their signed payloads, sealed identity keys, the release queue, the time
/// high-water mark, the pinned key-server keys and the audit journal, in the shared `stowage.sqlite` (WAL) of the data
/// directory.
///
/// Every operation is one SQLite transaction (`BEGIN IMMEDIATE`, so two processes serialize) that also appends its
/// audit entries and records the local time it was given (docs/key-protocol.md, "Client-side lease rules": every
/// local time observed raises the high-water mark). Operations take `now` from the caller's ``Clock``.
///
/// Integrity (docs/SECURITY.md): every decision derives a lease's terms from its stored signed payload, verified each
/// time with the pinned key of the key server the lease came from; the state this device adds (first play, lease
/// state, the high-water mark, the release queue, the pins) carries an HMAC-SHA256 under a key derived from the
/// store's secret, and the mark, first plays and ends are kept a second time in the sealed `key-store.anchor`. A row
/// that disagrees with its payload or its code is refused with `lease_tampered`.
///
/// No content key is ever written in the clear: lease payloads hold keys wrapped to the device, identity keys are
/// sealed with AES-256-GCM under a key-encryption key derived from `key-store.secret` (mode 0600) and the machine ID,
/// erased rows are overwritten (`PRAGMA secure_delete`) and the WAL is checkpointed after an erase. Opening the store
/// records the clock's time and erases the key material of every lease whose window has closed, so no entry point can
/// skip the purge.
///
/// ```swift
/// let store = try KeyStore(dataDirectory: home, clock: SystemClock())
/// _ = try store.persist(VerifiedLeasePayload(response, verifier: verifier), keyServer: "https://keys.example.com", at: clock.now)
/// let evaluation = try store.authorizePlayback(assetId: "movie-1", at: clock.now)
/// guard evaluation.isValid else { throw evaluation.error! }
/// ```
public final class KeyStore: Sendable {
    /// The database file, shared with the other modules.
    public static let databaseFileName = "stowage.sqlite"
    /// The random 32-byte secret that, with the machine ID, gives the key-encryption and state keys.
    public static let secretFileName = "key-store.secret"
    /// The sealed second copy of the time high-water mark and of every lease's first play and end.
    public static let anchorFileName = KeyStoreAnchor.fileName
    /// The pinned key-server signing keys.
    public static let pinsFileName = ServerKeyPins.fileName

    /// The data directory.
    public let dataDirectory: URL
    let pool: DatabasePool
    /// The derived keys, or why there are none (a missing machine ID or secret, another machine). Opening never throws
    /// for these; every operation that needs them does, so a copied data directory says what is wrong when used.
    private let secretsResult: Result<KeyStoreSecrets, any Error>

    /// Opens (creating if needed) the key store in `dataDirectory`, records the clock's time and erases the key material
    /// of leases whose window has closed (queuing their releases).
    ///
    /// - Parameters:
    ///   - dataDirectory: created with mode 0700 if missing; refused if open to group or others.
    ///   - machineID: the machine's ID; nil reads ``MachineID/system()``.
    ///   - clock: the wall clock; its time is observed (raising the high-water mark) and expired leases are purged.
    ///   - busyTimeout: how long to wait for a lock another process holds on the file before failing.
    /// - Throws: ``PrivateFileError`` for an unsafe directory, ``KeyStoreError`` if the database cannot be opened.
    ///   Problems with the secret (no machine ID, a missing secret, another machine) do not throw here but from every
    ///   operation that needs it.
    public init(
        dataDirectory: URL,
        machineID: MachineID? = nil,
        clock: any Clock,
        busyTimeout: TimeInterval = TimeInterval(StateDatabase.busyTimeoutSeconds)
    ) throws {
        self.dataDirectory = dataDirectory
        try PrivateFile.prepareDirectory(dataDirectory.path)
        // What a writer killed mid-write left (a private file's temporary copy, 0600 but never put in place).
        AtomicFile.removeLeftovers(in: dataDirectory.path)
        let databasePath = dataDirectory.appendingPathComponent(Self.databaseFileName).path
        var configuration = Configuration()
        configuration.label = "KeyStore"
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in
            // Deleted content (erased payloads and sealed keys) is overwritten with zeros, not left in free pages.
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        let pool: DatabasePool
        do {
            pool = try KeyStoreSchema.migrator.openMigrated(path: databasePath, configuration: configuration)
        } catch let error as DatabaseError {
            throw KeyStoreError.database(error, path: databasePath)
        }
        self.pool = pool
        for suffix in ["", "-wal", "-shm"] { PrivateFile.restrict(databasePath + suffix) }
        secretsResult = Result {
            do {
                return try Self.makeSecrets(
                    secretPath: dataDirectory.appendingPathComponent(Self.secretFileName).path,
                    machineID: machineID,
                    pool: pool
                )
            } catch let error as DatabaseError {
                throw KeyStoreError.database(error, path: databasePath)
            } catch let error as RowDecodingError {
                throw KeyStoreError.database(error, path: databasePath)
            }
        }
        if case .success = secretsResult {
            try purgeExpired(at: clock.now)
        }
    }

    /// Finds or creates the key-store secret and checks the derived key against the check value stored when the store
    /// was first set up.
    private static func makeSecrets(secretPath: String, machineID: MachineID?, pool: DatabasePool) throws -> KeyStoreSecrets {
        let machine = try machineID ?? MachineID.system()
        let check = try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT value FROM key_store_meta WHERE name = 'kek_check'")
                .map { row -> LocalKeySealer.Sealed in
                    let bytes = [UInt8](try row.decode(forColumn: "value") as Data)
                    return LocalKeySealer.Sealed(nonce: Array(bytes.prefix(12)), ciphertext: [], tag: Array(bytes.dropFirst(12)))
                }
        }
        var secret = try PrivateFile.readSecret(secretPath, count: LocalKeySealer.secretByteCount)
        if secret == nil {
            // Keys were sealed here with a secret that is gone: never make a new one silently.
            guard check == nil else { throw KeyStoreError.sealingSecretMissing(path: secretPath) }
            let fresh = try SecretBytes.random(count: LocalKeySealer.secretByteCount)
            secret =
                try PrivateFile.createExclusively(secretPath, contents: fresh)
                ? fresh : PrivateFile.readSecret(secretPath, count: LocalKeySealer.secretByteCount)
        }
        guard let secret else { throw KeyStoreError.sealingSecretMissing(path: secretPath) }
        let secrets = try KeyStoreSecrets(secret: secret, machineID: machine)
        let sealer = secrets.sealer
        if let check {
            guard sealer.matches(check) else { throw KeyStoreError.sealingKeyMismatch }
        } else {
            let value = try sealer.makeCheckValue()
            try pool.write { db in
                try db.execute(
                    sql: "INSERT OR IGNORE INTO key_store_meta (name, value) VALUES ('kek_check', ?)",
                    arguments: [Data(value.nonce + value.tag)]
                )
            }
            // Another process may have set up the store at the same moment with the same secret file.
            let stored = try pool.read { db in
                try Row.fetchOne(db, sql: "SELECT value FROM key_store_meta WHERE name = 'kek_check'")
                    .map { [UInt8](try $0.decode(forColumn: "value") as Data) }
            }
            if let stored, !sealer.matches(.init(nonce: Array(stored.prefix(12)), ciphertext: [], tag: Array(stored.dropFirst(12)))) {
                throw KeyStoreError.sealingKeyMismatch
            }
        }
        return secrets
    }

    func secrets() throws -> KeyStoreSecrets {
        try secretsResult.get()
    }

    func sealer() throws -> LocalKeySealer {
        try secrets().sealer
    }

    var databaseURL: URL { dataDirectory.appendingPathComponent(Self.databaseFileName) }
    var anchorPath: String { dataDirectory.appendingPathComponent(Self.anchorFileName).path }
    var pinsPath: String { dataDirectory.appendingPathComponent(Self.pinsFileName).path }

    // MARK: - Transactions

    /// Runs `body` in one `BEGIN IMMEDIATE` transaction, mapping SQLite failures to ``KeyStoreError``.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.writeWithoutTransaction { db in
                var result: T?
                try db.inTransaction(.immediate) {
                    result = try body(db)
                    return .commit
                }
                return result!
            }
        } catch let error as DatabaseError {
            throw KeyStoreError.database(error, path: databaseURL.path)
        } catch let error as RowDecodingError {
            throw KeyStoreError.database(error, path: databaseURL.path)
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.read { db in try body(db) }
        } catch let error as DatabaseError {
            throw KeyStoreError.database(error, path: databaseURL.path)
        } catch let error as RowDecodingError {
            throw KeyStoreError.database(error, path: databaseURL.path)
        }
    }

    /// Moves the WAL's content into the database file and truncates the WAL, so erased material does not linger in
    /// old WAL frames. Best effort: a reader holding an old snapshot can keep frames until it is done.
    func checkpoint() {
        pool.truncateWAL()
    }

    /// Runs one write transaction with the client's own state loaded (both copies of the time record merged, the
    /// anchor's ledger, tampering latched) and written back before the commit. Observes `now` first, as every operation
    /// records the local time it was given.
    func writeState<T>(at now: Int64, _ body: (Database, inout ClientState) throws -> T) throws -> T {
        let secrets = try secrets()
        let path = anchorPath
        return try write { db in
            var state = try ClientState.load(db, secrets: secrets, anchorPath: path, now: now)
            state.firstObservation = state.observe(localTime: now)
            let result = try body(db, &state)
            try state.save(db, at: now)
            return result
        }
    }

    /// Runs raw SQL outside the store's rules. For tests that tamper with the tables (the audit journal, say).
    func executeUncheckedForTesting(_ sql: String) throws {
        try pool.writeWithoutTransaction { db in try db.execute(sql: sql) }
    }

    // MARK: - Time

    /// The device's time high-water mark (both copies, the database row and the sealed anchor, merged: it only rises),
    /// with when a rollback and tampering were last found. Those hold every lease stored before them until each is
    /// renewed; each lease is judged with its own record (docs/SECURITY.md, "Time"). Reading records nothing; a copy
    /// found missing here is latched by the next operation that writes.
    public func timeHighWaterMark() throws -> TimeHighWaterMark {
        let secrets = try secrets()
        let path = anchorPath
        return try read { db in try ClientState.load(db, secrets: secrets, anchorPath: path, now: nil).mark }
    }

    /// Records a local clock reading (raising the mark, or latching a rollback and journaling it).
    @discardableResult
    public func observe(localTime now: Int64) throws -> TimeHighWaterMark.Observation {
        try writeState(at: now) { _, state in state.firstObservation }
    }

    // MARK: - Audit journal

    /// Appends an entry for an event the store does not see itself (a streaming lease acquired, say).
    @discardableResult
    public func appendAuditEntry(
        _ kind: AuditEventKind,
        assetId: String?,
        leaseId: String?,
        detail: AuditDetail = [:],
        at now: Int64
    ) throws -> AuditEntry {
        try write { db in try AuditJournal.append(db, kind: kind, assetId: assetId, leaseId: leaseId, detail: detail, at: now) }
    }

    /// The journal's entries in order, optionally only those about one asset or lease.
    public func auditEntries(assetId: String? = nil, leaseId: String? = nil) throws -> [AuditEntry] {
        try read { db in try AuditJournal.entries(db, assetId: assetId, leaseId: leaseId) }
    }

    /// Checks the whole hash chain; reports the first bad sequence number if an entry was edited, inserted, deleted
    /// or moved.
    public func verifyAuditJournal() throws -> AuditVerification {
        try read { db in try AuditJournal.verify(db) }
    }
}
