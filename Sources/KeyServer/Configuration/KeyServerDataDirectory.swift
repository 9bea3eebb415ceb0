import Foundation
import GRDB
import KeyDelivery
import StowageCore
public import StowageCrypto

/// The key server's data directory: its keys, its configuration and its database.
///
/// | file | holds |
/// |---|---|
/// | `signing-key.ed25519` | the Ed25519 seed that signs lease payloads: 32 raw bytes, mode 0600 |
/// | `master-key` | the key content keys are sealed under at rest: 32 raw bytes, mode 0600 |
/// | `master-key.next`, `master-key.old` | while a master key rotation runs: the new key, then the replaced one |
/// | `token-secret` | the HS256 key of entitlement tokens (its exact bytes), mode 0600 |
/// | `metrics-token` | the bearer token `GET /metrics` requires (64 hex digits), mode 0600 |
/// | `config.json` | policies, the default policy, rate limits (docs/key-server.md) |
/// | `keyserver.sqlite` | assets and sealed keys, devices, leases, nonces, audit log (WAL) |
///
/// ```swift
/// let directory = try KeyServerDataDirectory.initialize(at: "/var/lib/stowage-keys")
/// try await directory.addAsset(id: "movie-1", keyID: "000102030405060708090a0b0c0d0e0f", key: contentKey)
/// let token = try await directory.makeToken(subject: "alice", assets: ["movie-1"], ttl: 3600)
/// ```
public struct KeyServerDataDirectory: Sendable {
    public static let signingKeyFile = "signing-key.ed25519"
    public static let masterKeyFile = "master-key"
    /// The key a master key rotation re-seals under; it becomes `master-key` when every row is re-sealed.
    public static let nextMasterKeyFile = "master-key.next"
    /// The key a rotation replaced, kept until its final pass finds no row sealed under it.
    public static let oldMasterKeyFile = "master-key.old"
    /// The master key files, the one that seals first.
    static let masterKeyFiles = [masterKeyFile, nextMasterKeyFile, oldMasterKeyFile]
    public static let tokenSecretFile = "token-secret"
    /// The bearer token a scraper sends to `GET /metrics` (Prometheus: `authorization: {credentials_file: ...}`).
    public static let metricsTokenFile = "metrics-token"
    public static let configurationFile = "config.json"
    public static let databaseFile = "keyserver.sqlite"

    /// The directory.
    public let path: String
    /// The PostgreSQL database holding the server's state (`postgres://USER@HOST:PORT/DATABASE`), or nil for
    /// `keyserver.sqlite` in the directory. The keys and `config.json` stay in the directory either way: every
    /// instance of a fleet has a copy of the same directory and names the same database.
    public let database: String?

    /// A data directory at `path` (not checked until used), its state in `database` when given.
    public init(path: String, database: String? = nil) {
        self.path = path
        self.database = database
    }

    /// The path of a file of the directory.
    public func path(of file: String) -> String {
        (path as NSString).appendingPathComponent(file)
    }

    /// Creates the directory (mode 0700) with fresh random keys (mode 0600), a `config.json` holding the default
    /// policy (storage 30 days, playback 48 hours, renewable, 3 devices) and an empty database.
    ///
    /// Files that already exist are kept, never overwritten, so running it again is harmless.
    ///
    /// - Returns: The directory.
    /// - Throws: ``KeyServerSetupError`` or a file system error.
    @discardableResult
    public static func initialize(at path: String) throws -> KeyServerDataDirectory {
        try prepare(KeyServerDataDirectory(path: path))
    }

    /// ``initialize(at:)`` with the state in a PostgreSQL database: the directory's files as there, and the database's
    /// schema created or brought up to date (`stowage keyserver init --database URL`; safe to run again, and from
    /// several instances at once).
    ///
    /// - Throws: ``KeyServerSetupError`` (`invalid_database_url`, `database_unavailable`, `schema_outdated` when the
    ///   database was set up by a newer Stowage), or a file system error.
    @discardableResult
    public static func initialize(at path: String, database: String?) async throws -> KeyServerDataDirectory {
        guard let database else { return try initialize(at: path) }
        // The URL first: a typo fails before any file is written. Creating the schema is rare and may wait for another
        // instance creating it at the same moment, so it gets minutes rather than a request's 10 s (config.json, which
        // names databaseTimeout, is written by this very call).
        let store = try PostgresKeyServerStore(url: database, operationTimeout: .seconds(300))
        do {
            let directory = try prepare(KeyServerDataDirectory(path: path, database: database), openingSQLite: false)
            try await store.migrate()
            await store.close()
            return directory
        } catch {
            await store.close()
            throw error
        }
    }

    private static func prepare(_ directory: KeyServerDataDirectory, openingSQLite: Bool = true) throws -> KeyServerDataDirectory {
        let path = directory.path
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        if !fileManager.fileExists(atPath: path, isDirectory: &isDirectory) {
            try fileManager.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } else if !isDirectory.boolValue {
            throw KeyServerSetupError.notInitialized(path)
        }
        for file in [signingKeyFile, masterKeyFile, tokenSecretFile] where !fileManager.fileExists(atPath: directory.path(of: file)) {
            try SecretFile.create(directory.path(of: file), bytes: SecretBytes.random(count: 32))
        }
        if !fileManager.fileExists(atPath: directory.path(of: metricsTokenFile)) {
            // Text, so that a scraper can send the file as it is.
            let token = Hex.encode(try SecretBytes.random(count: 32).withUnsafeBytes { [UInt8]($0) })
            try SecretFile.create(directory.path(of: metricsTokenFile), bytes: SecretBytes(Array(token.utf8)))
        }
        let configurationPath = directory.path(of: configurationFile)
        if !fileManager.fileExists(atPath: configurationPath) {
            // Tokens name this server in `aud`: a token minted for another key server (sharing a token secret, say)
            // is refused here.
            let fingerprint = Hex.encode(SHA256Hasher.hash(try directory.loadSigningKey().publicKey.rawRepresentation).prefix(8))
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try (encoder.encode(KeyServerConfiguration(tokenAudience: "stowage:\(fingerprint)")) + Data("\n".utf8))
                .write(to: URL(fileURLWithPath: configurationPath))
        }
        if openingSQLite { _ = try directory.openStore() }
        return directory
    }

    /// Reads and checks `config.json`.
    ///
    /// - Throws: ``KeyServerSetupError`` (`not_initialized`, `invalid_configuration`).
    public func loadConfiguration() throws -> KeyServerConfiguration {
        let file = path(of: Self.configurationFile)
        guard let data = FileManager.default.contents(atPath: file) else { throw KeyServerSetupError.notInitialized(path) }
        let configuration: KeyServerConfiguration
        do {
            configuration = try JSONDecoder().decode(KeyServerConfiguration.self, from: data)
        } catch let error as KeyServerSetupError {
            throw error
        } catch {
            throw KeyServerSetupError.invalidConfiguration("\(error)")
        }
        try configuration.validate()
        return configuration
    }

    /// Checks and writes `config.json` (replacing it atomically); a running server reads it when it starts.
    ///
    /// - Throws: ``KeyServerSetupError`` `invalid_configuration`, or a file system error.
    public func saveConfiguration(_ configuration: KeyServerConfiguration) throws {
        try configuration.validate()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try (encoder.encode(configuration) + Data("\n".utf8)).write(to: URL(fileURLWithPath: path(of: Self.configurationFile)), options: .atomic)
    }

    /// The payload signing key from `signing-key.ed25519`.
    ///
    /// - Throws: ``KeyServerSetupError`` when it is missing, readable by others, or not 32 bytes.
    public func loadSigningKey() throws -> Ed25519.PrivateKey {
        let file = path(of: Self.signingKeyFile)
        do {
            return try Ed25519.PrivateKey(rawRepresentation: SecretFile.read(file, byteCount: 32, directory: path))
        } catch let error as CryptoError {
            throw KeyServerSetupError.invalidKeyFile(file, error.description)
        }
    }

    func loadMasterKey() throws -> SecretBytes {
        try SecretFile.read(path(of: Self.masterKeyFile), byteCount: 32, directory: path)
    }

    /// `master-key`, then `master-key.next` and `master-key.old` when they exist (a rotation under way).
    func loadMasterKeys() throws -> [(file: String, key: SecretBytes)] {
        var keys = [(Self.masterKeyFile, try loadMasterKey())]
        for file in [Self.nextMasterKeyFile, Self.oldMasterKeyFile] {
            do {
                keys.append((file, try SecretFile.read(path(of: file), byteCount: 32, directory: path)))
            } catch let error as KeyServerSetupError where error.kind == .notInitialized {
                continue  // not there: no rotation under way (or it was renamed away while being read)
            }
        }
        return keys
    }

    func loadTokenSecret() throws -> SecretBytes {
        try SecretFile.read(path(of: Self.tokenSecretFile), directory: path)
    }

    /// The bearer token of `GET /metrics`, or nil when the directory has none (one made before it existed: running
    /// `keyserver init` on it again adds it).
    func loadMetricsToken() throws -> SecretBytes? {
        guard FileManager.default.fileExists(atPath: path(of: Self.metricsTokenFile)) else { return nil }
        return try SecretFile.read(path(of: Self.metricsTokenFile), directory: path)
    }

    /// Opens the SQLite store in the directory, creating and migrating it if needed.
    ///
    /// - Throws: ``KeyServerSetupError`` `database_unavailable` naming the file: damaged, held locked by another
    ///   process, or not openable.
    public func openStore() throws -> SQLiteKeyServerStore {
        let file = path(of: Self.databaseFile)
        do {
            return try SQLiteKeyServerStore(path: file)
        } catch let error as DatabaseError {
            let reason = error.message ?? "SQLite error \(error.resultCode.rawValue)"
            let message: String
            switch error.resultCode {
            case .SQLITE_CORRUPT, .SQLITE_NOTADB:
                message =
                    "the key server database \(file) is damaged (SQLite: \(reason)); the content keys sealed in it can only "
                    + "come back from a backup of that file: restore one, or move it aside and register the assets again"
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                message =
                    "the key server database \(file) stayed locked by another process (SQLite: \(reason)); close what holds it "
                    + "(`fuser \(file)` names it) and try again"
            default:
                message =
                    "the key server database \(file) cannot be opened (SQLite: \(reason)); check the directory's permissions "
                    + "and free space"
            }
            throw KeyServerSetupError(.databaseUnavailable, message)
        }
    }

    /// The store this directory names: ``database`` when set, its schema checked (a server never runs on a schema it
    /// does not know), else the SQLite file. The caller closes it (``KeyServerStore/close()``).
    ///
    /// - Throws: ``KeyServerSetupError`` `invalid_database_url`, `database_unavailable`, `schema_outdated`.
    public func connect() async throws -> any KeyServerStore {
        guard let database else { return try openStore() }
        let timeout = try loadConfiguration().databaseTimeout
        let store = try PostgresKeyServerStore(url: database, operationTimeout: .milliseconds(Int64(timeout * 1_000)))
        do {
            try await store.checkSchema()
        } catch {
            await store.close()
            throw error
        }
        return store
    }

    /// Runs `body` on ``connect()``'s store and closes it.
    func withStore<T: Sendable>(_ body: (any KeyServerStore) async throws -> T) async throws -> T {
        let store = try await connect()
        do {
            let result = try await body(store)
            await store.close()
            return result
        } catch {
            await store.close()
            throw error
        }
    }

    /// Adds a content key to an asset (creating the asset), sealed under the master key.
    ///
    /// Adding the same key again is harmless; giving a key ID of the asset another key is refused, since clients may
    /// already hold content encrypted with the first. A `policy` changes the asset's policy; nil keeps it (or, for a new
    /// asset, takes the default policy).
    ///
    /// - Parameters:
    ///   - id: The asset ID, `[A-Za-z0-9._-]{1,128}`.
    ///   - keyID: 32 lowercase hex digits.
    ///   - key: The 16-byte content key.
    ///   - policy: A policy name of `config.json`.
    ///   - clock: Gives the asset's creation time.
    /// - Throws: ``KeyServerSetupError`` (`invalid_asset_id`, `invalid_key_id`, `invalid_content_key`, `unknown_policy`,
    ///   `key_conflict`, or a file error), or the database's error.
    public func addAsset(id: String, keyID: String, key: SecretBytes, policy: String? = nil, clock: KeyServerClock = .system) async throws {
        guard KeyProtocol.isValidAssetID(id) else {
            throw KeyServerSetupError(.invalidAssetID, "asset ID \"\(id)\" must match [A-Za-z0-9._-]{1,128}")
        }
        guard KeyProtocol.isValidKeyID(keyID) else {
            throw KeyServerSetupError(.invalidKeyID, "key ID \"\(keyID)\" must be 32 lowercase hex digits (16 bytes)")
        }
        guard key.count == KeyWrapping.contentKeyByteCount else {
            throw KeyServerSetupError(.invalidContentKey, "the content key must be 16 bytes (32 hex digits), not \(key.count)")
        }
        let configuration = try loadConfiguration()
        if let policy, configuration.policies[policy] == nil {
            throw KeyServerSetupError.unknownPolicy(policy, known: Array(configuration.policies.keys))
        }
        // Sealed under master-key while a rotation cannot replace it; one under way opens the stored keys with any key.
        try await withSealingLock(exclusive: false) {
            let keys = try MasterKeyRing(directory: self)
            try await withStore { store in
                let existing = try await store.asset(id: id)
                if let stored = try await store.contentKeys(assetID: id, keyIDs: [keyID]).first {
                    guard (try? keys.open(stored)) == key else {
                        throw KeyServerSetupError(.keyConflict, "asset \(id) already has a different key \(keyID); choose a new key ID")
                    }
                }
                let asset = AssetRecord(
                    id: id,
                    policy: policy ?? existing?.policy ?? configuration.defaultPolicy,
                    createdAt: existing?.createdAt ?? clock.now
                )
                try await store.saveAsset(asset, keys: [keys.current.seal(key, assetID: id, keyID: keyID)])
            }
        }
    }

    /// Signs an entitlement token with `token-secret`, as the service that sells the content would: `sub`, `assets`,
    /// `iat` (now), `exp` (now + `ttl`) and `aud` (config.json's `tokenAudience`).
    ///
    /// - Parameters:
    ///   - subject: The account (`sub`).
    ///   - assets: The asset IDs it may play, or `["*"]` (accepted only where config.json allows it).
    ///   - ttl: Seconds until it expires (`exp`); at most config.json's `maxTokenLifetime`.
    ///   - clock: Gives the current time.
    /// - Returns: The compact JWT.
    /// - Throws: ``KeyServerSetupError`` `invalid_configuration` for a `ttl` over the maximum or a wildcard not allowed.
    public func makeToken(subject: String, assets: [String], ttl: Int64, clock: KeyServerClock = .system) async throws -> String {
        let configuration = try loadConfiguration()
        guard ttl > 0, ttl <= configuration.maxTokenLifetime else {
            throw KeyServerSetupError.invalidConfiguration(
                "a token may live at most \(HumanTime.duration(configuration.maxTokenLifetime)) (maxTokenLifetime); ask for a shorter --ttl"
            )
        }
        if assets.contains("*"), !configuration.allowWildcardAssets {
            throw KeyServerSetupError.invalidConfiguration(
                "this key server refuses tokens for every asset (\"*\"); name the assets, or set allowWildcardAssets to true"
            )
        }
        let verifier = await EntitlementVerifier(secret: try loadTokenSecret(), configuration: configuration)
        return try await verifier.makeToken(subject: subject, assets: assets, ttl: ttl, now: clock.now)
    }

    /// Seals `key` into this key server's store for `assetID` (``addAsset(id:keyID:key:policy:clock:)`` with the
    /// default policy): what content packaging registers its keys with (`KeyRegistrar(directory.register)`).
    public func register(assetID: String, keyID: String, key: SecretBytes) async throws {
        try await addAsset(id: assetID, keyID: keyID, key: key)
    }
}
