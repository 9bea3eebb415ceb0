public import Foundation
import GRDB
public import KeyDelivery
public import StowageCore
import StowageCrypto

/// The state of a download task, as iOS and Media3 name them.
public enum DownloadState: String, Sendable, Codable, Hashable, CaseIterable {
    case queued, downloading, paused, failed, completed, removing
}

/// What a download was asked to do: kept in the database so `stowage resume` in a new process does the same.
public struct DownloadRequest: Sendable, Codable, Hashable {
    public var url: String
    public var assetId: String
    public var title: String?
    public var selection: MediaSelectionOptions
    /// Extra request headers, `[name, value]` pairs (authorization, cookies), sent only to the playlist's host and to
    /// ``headerHosts``.
    public var headers: [[String]]
    /// More hosts the headers may go to (`--header-host`).
    public var headerHosts: [String]
    /// The user agent, referer and cookies (`--user-agent`, `--referer`, `--cookies`), kept with the task so a resume
    /// sends the same ones.
    public var browser: BrowserHeaders
    /// The key server the user named for this download (`--key-server`): always used.
    public var keyServerURL: String?
    /// Key servers the user trusts for this download (`--trust-key-server`), beside the data directory's list.
    public var trustedKeyServers: [String]
    /// The key server the multivariant playlist advertises, recorded at planning so a resume decides the same way.
    public var advertisedKeyServerURL: String?
    public var token: String?
    public var concurrency: Int
    /// When a live or EVENT recording stops by itself (`--duration`, `--until`); ignored for VOD.
    public var recording: RecordingLimits

    public init(
        url: String,
        assetId: String,
        title: String? = nil,
        selection: MediaSelectionOptions = MediaSelectionOptions(),
        headers: [(String, String)] = [],
        headerHosts: [String] = [],
        browser: BrowserHeaders = .none,
        keyServerURL: String? = nil,
        trustedKeyServers: [String] = [],
        token: String? = nil,
        concurrency: Int = 4,
        recording: RecordingLimits = RecordingLimits()
    ) {
        self.recording = recording
        self.url = url
        self.assetId = assetId
        self.title = title
        self.selection = selection
        self.headers = headers.map { [$0.0, $0.1] }
        self.headerHosts = headerHosts
        self.browser = browser
        self.keyServerURL = keyServerURL
        self.trustedKeyServers = trustedKeyServers
        self.token = token
        self.concurrency = concurrency
    }

    var headerPairs: [(String, String)] { headers.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil } }

    /// The headers, scoped to the playlist's host and ``headerHosts``.
    public var scopedHeaders: ScopedHeaders {
        ScopedHeaders(headerPairs, playlistURL: URL(string: url), extraHosts: headerHosts, browser: browser)
    }

    private enum CodingKeys: String, CodingKey {
        case url, assetId, title, selection, headers, headerHosts, browser, keyServerURL, trustedKeyServers, advertisedKeyServerURL, token
        case concurrency, recording
    }

    /// Requests stored before `headerHosts`, `browser` and `trustedKeyServers` existed read back with empty ones.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        url = try container.decode(String.self, forKey: .url)
        assetId = try container.decode(String.self, forKey: .assetId)
        title = try container.decodeIfPresent(String.self, forKey: .title)
        selection = try container.decode(MediaSelectionOptions.self, forKey: .selection)
        headers = try container.decode([[String]].self, forKey: .headers)
        headerHosts = try container.decodeIfPresent([String].self, forKey: .headerHosts) ?? []
        browser = try container.decodeIfPresent(BrowserHeaders.self, forKey: .browser) ?? .none
        keyServerURL = try container.decodeIfPresent(String.self, forKey: .keyServerURL)
        trustedKeyServers = try container.decodeIfPresent([String].self, forKey: .trustedKeyServers) ?? []
        advertisedKeyServerURL = try container.decodeIfPresent(String.self, forKey: .advertisedKeyServerURL)
        token = try container.decodeIfPresent(String.self, forKey: .token)
        concurrency = try container.decode(Int.self, forKey: .concurrency)
        recording = try container.decodeIfPresent(RecordingLimits.self, forKey: .recording) ?? RecordingLimits()
    }

    /// An asset ID derived from a URL: the last path components without extensions, made safe, plus a short hash.
    public static func assetID(for url: String) -> String {
        let parsed = URL(string: url)
        let parts = (parsed?.pathComponents ?? []).filter { $0 != "/" }.map { ($0 as NSString).deletingPathExtension }
        let meaningful = parts.filter { !["index", "master", "main", "playlist", "manifest", "prog_index"].contains($0.lowercased()) }
        let base = DownloadPlanner.slug((meaningful.last ?? parsed?.host ?? "asset"))
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in url.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return "\(base.prefix(48))-\(String(hash & 0xffff_ffff, radix: 16))"
    }
}

/// When a live or EVENT recording stops by itself, besides EXT-X-ENDLIST and ``DownloadTask/stopRecording()``.
public struct RecordingLimits: Sendable, Codable, Hashable {
    /// Recorded media seconds after which recording stops (`--duration 2h`): it ends with the segment that reaches it.
    public var maximumDuration: Double?
    /// The time at which recording stops (`--until`), seconds since 1970.
    public var until: Int64?

    public init(maximumDuration: Double? = nil, until: Int64? = nil) {
        self.maximumDuration = maximumDuration
        self.until = until
    }
}

/// One task as stored.
public struct DownloadTaskRecord: Sendable, Hashable {
    public var assetId: String
    public var session: String
    public var request: DownloadRequest
    public var state: DownloadState
    /// The code of the failure that stopped the task (`failed` for a code this version does not know).
    public var failureCode: ErrorCode?
    public var failureMessage: String?
    public var keysAcquired: Bool
    /// Place in a service's queue: higher runs first (0 by default).
    public var priority: Int
    public var createdAt: Int64
    public var updatedAt: Int64
    /// Why the stored request could not be read (a damaged row, or one written by a newer Stowage), when it could not:
    /// `request` then holds only the asset ID, and the task must not run on it.
    public var requestDamage: String?
    /// Why the request's sealed secrets (token, headers, cookies) did not open, when they did not (another machine, an
    /// altered row): `request` then has none of them, and whatever needs them says so with this.
    public var secretsDamage: ReportedError?
}

/// A file recorded complete.
/// A file the downloader put in place, as it recorded it.
public struct CompletedFile: Sendable, Hashable {
    public var size: Int64
    /// Lowercase hex SHA-256.
    public var sha256: String
}

/// Download tasks and completed files in `stowage.sqlite` (tables `download_tasks`, `download_files`, owned by this
/// module). Every state change is committed here before it is acted on, so a killed process resumes where it stopped.
///
/// A task's secrets (its entitlement token, `--header` values and cookies) are never stored in the clear: they are
/// sealed under the key store's key-encryption key (``KeyDelivery/DataSealer``) in the `secrets` column, bound to the
/// asset, and the `request` JSON holds everything else.
public final class DownloadStore: Sendable {
    private let pool: DatabasePool
    private let path: String
    /// Gives the sealer for the tasks' secrets; nil: tasks with secrets cannot be stored, and stored ones read back
    /// without them.
    private let sealer: (@Sendable () throws -> DataSealer)?

    /// Opens (and creates) the tables in the database at `databaseURL`.
    ///
    /// - Parameter sealer: gives the sealer of the tasks' secrets (the key store's), called when one is stored or read.
    public init(databaseURL: URL, sealer: (@Sendable () throws -> DataSealer)? = nil) throws(DownloadError) {
        var configuration = Configuration()
        configuration.label = "DownloadStore"
        configuration.busyMode = .timeout(TimeInterval(StateDatabase.busyTimeoutSeconds))
        configuration.prepareDatabase { db in
            // A replaced request (its sealed secrets) is overwritten, not left in free pages.
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        self.sealer = sealer
        path = databaseURL.path
        do {
            try FileManager.default.createDirectory(at: databaseURL.deletingLastPathComponent(), withIntermediateDirectories: true)
            pool = try DatabasePool.openBesideOtherProcesses(path: databaseURL.path, configuration: configuration) { pool in
                try pool.write { db in
                    try db.execute(
                        sql: """
                            CREATE TABLE IF NOT EXISTS download_tasks (
                                asset_id TEXT PRIMARY KEY NOT NULL,
                                session TEXT NOT NULL,
                                request TEXT NOT NULL,
                                state TEXT NOT NULL,
                                failure_code TEXT,
                                failure_message TEXT,
                                keys_acquired INTEGER NOT NULL DEFAULT 0,
                                created_at INTEGER NOT NULL,
                                updated_at INTEGER NOT NULL
                            );
                            CREATE TABLE IF NOT EXISTS download_files (
                                asset_id TEXT NOT NULL,
                                path TEXT NOT NULL,
                                size INTEGER NOT NULL,
                                sha256 TEXT NOT NULL,
                                PRIMARY KEY (asset_id, path)
                            );
                            CREATE TABLE IF NOT EXISTS download_wanted (
                                asset_id TEXT NOT NULL,
                                path TEXT NOT NULL,
                                wanted_at INTEGER NOT NULL,
                                PRIMARY KEY (asset_id, path)
                            );
                            """
                    )
                    // Added with the download service's queue; older databases get it here.
                    if try !db.columns(in: "download_tasks").contains(where: { $0.name == "priority" }) {
                        try db.execute(sql: "ALTER TABLE download_tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0")
                    }
                    // Added when tokens and headers were sealed at rest.
                    if try !db.columns(in: "download_tasks").contains(where: { $0.name == "secrets" }) {
                        try db.execute(sql: "ALTER TABLE download_tasks ADD COLUMN secrets BLOB")
                    }
                }
            }
        } catch {
            throw Self.failure(error, path: databaseURL.path)
        }
    }

    /// `error` from the database at `path`: damage said as such, with the way out; anything else in SQLite's words.
    static func failure(_ error: any Error, path: String) -> DownloadError {
        if StateDatabase.isDamaged(error) { return .databaseDamaged(path: path, reason: StateDatabase.reason(error)) }
        if error is DatabaseError { return .database(StateDatabase.reason(error)) }
        return .database(FileErrorText.describe(error))
    }

    func insert(_ request: DownloadRequest, session: String, priority: Int = 0, at now: Int64) throws(DownloadError) {
        let (json, secrets) = try encode(request)
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO download_tasks (asset_id, session, request, secrets, state, priority, created_at, updated_at)
                    VALUES (?, ?, ?, ?, 'queued', ?, ?, ?)
                    """,
                arguments: [request.assetId, session, json, secrets.map { Data($0) }, priority, now, now]
            )
        }
    }

    func updateRequest(_ request: DownloadRequest, at now: Int64) throws(DownloadError) {
        let (json, secrets) = try encode(request)
        try write { db in
            try db.execute(
                sql: "UPDATE download_tasks SET request = ?, secrets = ?, updated_at = ? WHERE asset_id = ?",
                arguments: [json, secrets.map { Data($0) }, now, request.assetId]
            )
        }
    }

    /// Seals the secrets of tasks stored in the clear by a Stowage from before they were sealed. Returns how many tasks
    /// it changed.
    @discardableResult
    public func sealClearSecrets() throws(DownloadError) -> Int {
        guard sealer != nil else { return 0 }
        // Read from the rows themselves: a record has its sealed secrets applied already.
        let clear: [DownloadRequest] = try read { db in
            try Row.fetchAll(db, sql: "SELECT request FROM download_tasks WHERE secrets IS NULL").compactMap { row in
                let json: String = (try? row.decode(forColumn: "request")) ?? ""
                guard let request = try? JSONDecoder().decode(DownloadRequest.self, from: Data(json.utf8)) else { return nil }
                return RequestSecrets(of: request) == nil ? nil : request
            }
        }
        for request in clear {
            let (json, secrets) = try encode(request)
            try write { db in
                try db.execute(
                    sql: "UPDATE download_tasks SET request = ?, secrets = ? WHERE asset_id = ? AND secrets IS NULL",
                    arguments: [json, secrets.map { Data($0) }, request.assetId]
                )
            }
        }
        if !clear.isEmpty { pool.truncateWAL() }
        return clear.count
    }

    /// Applies `action` to the task's stored state in one transaction, through ``DownloadStateMachine``.
    /// - Returns: the new state.
    /// - Throws: ``DownloadError/notFound(assetId:)``, ``DownloadError/invalidState(assetId:state:action:)``.
    @discardableResult
    public func transition(
        _ assetId: String,
        _ action: DownloadAction,
        failure: DownloadError? = nil,
        at now: Int64
    ) throws(DownloadError)
        -> DownloadState
    {
        var outcome: Result<DownloadState, DownloadError> = .failure(.notFound(assetId: assetId))
        try write { db in
            guard let text = try String.fetchOne(db, sql: "SELECT state FROM download_tasks WHERE asset_id = ?", arguments: [assetId]) else {
                return
            }
            let state = DownloadState(rawValue: text) ?? .failed
            do {
                let next = try DownloadStateMachine.next(from: state, on: action, assetId: assetId)
                try db.execute(
                    sql: "UPDATE download_tasks SET state = ?, failure_code = ?, failure_message = ?, updated_at = ? WHERE asset_id = ?",
                    arguments: [next.rawValue, failure?.code.rawValue, failure?.description, now, assetId]
                )
                outcome = .success(next)
            } catch let error as DownloadError {
                outcome = .failure(error)
            }
        }
        return try outcome.get()
    }

    /// Sets a task's place in a service's queue: higher runs first.
    public func setPriority(_ assetId: String, _ priority: Int, at now: Int64) throws(DownloadError) {
        try write { db in
            try db.execute(sql: "UPDATE download_tasks SET priority = ?, updated_at = ? WHERE asset_id = ?", arguments: [priority, now, assetId])
        }
    }

    func setState(_ assetId: String, _ state: DownloadState, failure: DownloadError? = nil, at now: Int64) throws(DownloadError) {
        try write { db in
            try db.execute(
                sql: "UPDATE download_tasks SET state = ?, failure_code = ?, failure_message = ?, updated_at = ? WHERE asset_id = ?",
                arguments: [state.rawValue, failure?.code.rawValue, failure?.description, now, assetId]
            )
        }
    }

    func setKeysAcquired(_ assetId: String, _ acquired: Bool, at now: Int64) throws(DownloadError) {
        try write { db in
            try db.execute(
                sql: "UPDATE download_tasks SET keys_acquired = ?, updated_at = ? WHERE asset_id = ?",
                arguments: [acquired, now, assetId]
            )
        }
    }

    func recordFile(_ assetId: String, path: String, size: Int64, sha256: String) throws(DownloadError) {
        try write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO download_files (asset_id, path, size, sha256) VALUES (?, ?, ?, ?)",
                arguments: [assetId, path, size, sha256]
            )
            try db.execute(sql: "DELETE FROM download_wanted WHERE asset_id = ? AND path = ?", arguments: [assetId, path])
        }
    }

    /// Asks the running download of `assetId` (in this process or another) to fetch `path` next: a player is waiting
    /// for it (it seeked ahead of the download). The latest wish comes first; it is forgotten once the file is in place.
    public func want(_ assetId: String, path: String) throws(DownloadError) {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO download_wanted (asset_id, path, wanted_at) VALUES (?, ?, ?)",
                arguments: [assetId, path, now]
            )
        }
    }

    /// The files of `assetId` a player waits for, the latest wish first.
    func wanted(_ assetId: String) throws(DownloadError) -> [String] {
        try read { db in
            try String.fetchAll(db, sql: "SELECT path FROM download_wanted WHERE asset_id = ? ORDER BY wanted_at DESC", arguments: [assetId])
        }
    }

    /// The file at `path` of `assetId`'s package once the downloader has put it in place and recorded it.
    public func completedFile(_ assetId: String, path: String) throws(DownloadError) -> CompletedFile? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT size, sha256 FROM download_files WHERE asset_id = ? AND path = ?", arguments: [assetId, path])
                .map { CompletedFile(size: try $0.decode(forColumn: "size"), sha256: try $0.decode(forColumn: "sha256")) }
        }
    }

    func completedFiles(_ assetId: String) throws(DownloadError) -> [String: CompletedFile] {
        try read { db in
            var files: [String: CompletedFile] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT path, size, sha256 FROM download_files WHERE asset_id = ?", arguments: [assetId]) {
                files[try row.decode(forColumn: "path")] = CompletedFile(
                    size: try row.decode(forColumn: "size"),
                    sha256: try row.decode(forColumn: "sha256")
                )
            }
            return files
        }
    }

    /// The task of `assetId`, if any.
    public func task(_ assetId: String) throws(DownloadError) -> DownloadTaskRecord? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM download_tasks WHERE asset_id = ?", arguments: [assetId]).map(record)
        }
    }

    /// Every task, oldest first; of one session when `session` is given.
    public func tasks(session: String? = nil) throws(DownloadError) -> [DownloadTaskRecord] {
        try read { db in
            let rows =
                if let session {
                    try Row.fetchAll(db, sql: "SELECT * FROM download_tasks WHERE session = ? ORDER BY created_at, asset_id", arguments: [session])
                } else {
                    try Row.fetchAll(db, sql: "SELECT * FROM download_tasks ORDER BY created_at, asset_id")
                }
            return try rows.map(record)
        }
    }

    /// Forgets a task and its files (after cancel or delete).
    public func remove(_ assetId: String) throws(DownloadError) {
        try write { db in
            try db.execute(sql: "DELETE FROM download_files WHERE asset_id = ?", arguments: [assetId])
            try db.execute(sql: "DELETE FROM download_wanted WHERE asset_id = ?", arguments: [assetId])
            try db.execute(sql: "DELETE FROM download_tasks WHERE asset_id = ?", arguments: [assetId])
        }
    }

    /// - Throws: GRDB's `RowDecodingError` when a column holds a value of another type (written by hand): the file is
    /// damaged (``StateDatabase/isDamaged(_:)``). A request that is not JSON is not: the record says so.
    private func record(_ row: Row) throws -> DownloadTaskRecord {
        let json: String = (try? row.decode(forColumn: "request")) ?? ""
        // A row that does not decode still lists (one damaged task must not hide the others); running it is refused.
        var request: DownloadRequest
        var damage: String?
        do {
            request = try JSONDecoder().decode(DownloadRequest.self, from: Data(json.utf8))
        } catch {
            request = DownloadRequest(url: "", assetId: try row.decode(forColumn: "asset_id"))
            damage = "\(error)"
        }
        var secretsDamage: ReportedError?
        if damage == nil, let sealed = (try? row.decode(forColumn: "secrets") as Data?).flatMap({ $0 }) {
            // Secrets that do not open (another machine, an altered row) are left out, and the record says why: what
            // needs the token asks for it again.
            do {
                guard let sealer else { throw DownloadError.database("nothing can open the sealed secrets of \(request.assetId) here") }
                let opened = try sealer().open([UInt8](sealed), context: Self.secretsContext(request.assetId))
                try JSONDecoder().decode(RequestSecrets.self, from: opened.withUnsafeBytes { Data($0) }).apply(to: &request)
            } catch {
                let error = (error as? any StowageError) ?? DownloadError.database("\(error)")
                secretsDamage = ReportedError(code: error.code, message: error.message)
            }
        }
        return DownloadTaskRecord(
            assetId: try row.decode(forColumn: "asset_id"),
            session: try row.decode(forColumn: "session"),
            request: request,
            state: DownloadState(rawValue: try row.decode(forColumn: "state")) ?? .failed,
            failureCode: (try row.decode(forColumn: "failure_code") as String?).map { ErrorCode($0, fallback: .failed) },
            failureMessage: try row.decode(forColumn: "failure_message"),
            keysAcquired: try row.decode(forColumn: "keys_acquired"),
            priority: try row.decode(forColumn: "priority"),
            createdAt: try row.decode(forColumn: "created_at"),
            updatedAt: try row.decode(forColumn: "updated_at"),
            requestDamage: damage,
            secretsDamage: secretsDamage
        )
    }

    /// The request's JSON without its secrets, and the secrets sealed (nil when it has none).
    private func encode(_ request: DownloadRequest) throws(DownloadError) -> (json: String, secrets: [UInt8]?) {
        var clear = request
        let secrets = RequestSecrets(of: request)
        RequestSecrets.strip(&clear)
        do {
            let json = String(decoding: try JSONEncoder().encode(clear), as: UTF8.self)
            guard let secrets else { return (json, nil) }
            guard let sealer else {
                throw DownloadError.database("the download of \(request.assetId) has a token or headers, and nothing to seal them with")
            }
            let sealed = try sealer().seal(SecretBytes(Array(try JSONEncoder().encode(secrets))), context: Self.secretsContext(request.assetId))
            return (json, sealed)
        } catch let error as DownloadError {
            throw error
        } catch {
            throw .database((error as? any StowageError)?.message ?? String(describing: error))
        }
    }

    private static func secretsContext(_ assetId: String) -> String { "download secrets of \(assetId)" }

    private func write(_ body: (Database) throws -> Void) throws(DownloadError) {
        do {
            try pool.write(body)
        } catch {
            throw Self.failure(error, path: path)
        }
    }

    private func read<T>(_ body: (Database) throws -> T) throws(DownloadError) -> T {
        do {
            return try pool.read(body)
        } catch {
            throw Self.failure(error, path: path)
        }
    }
}

/// The parts of a ``DownloadRequest`` that are credentials: sealed apart from the rest (``DownloadStore``).
struct RequestSecrets: Codable, Hashable {
    var token: String?
    var headers: [[String]]
    var cookies: [BrowserHeaders.Cookie]

    /// The request's secrets, nil when it has none.
    init?(of request: DownloadRequest) {
        guard request.token != nil || !request.headers.isEmpty || !request.browser.cookies.isEmpty else { return nil }
        token = request.token
        headers = request.headers
        cookies = request.browser.cookies
    }

    static func strip(_ request: inout DownloadRequest) {
        request.token = nil
        request.headers = []
        request.browser.cookies = []
    }

    func apply(to request: inout DownloadRequest) {
        request.token = token
        request.headers = headers
        request.browser.cookies = cookies
    }
}
