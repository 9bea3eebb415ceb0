import Foundation
public import GRDB
import StowageCore

#if canImport(Glibc)
import Glibc
#endif

extension DatabasePool {
    /// Opens the SQLite file at `path` and runs `setUp` (creating or migrating its schema) when other processes may be
    /// doing the same at the same moment: a `stowage play` started beside the first `stowage download` of a new data
    /// directory, the service and a command, or two key server instances starting on one new SQLite file.
    ///
    /// Turning a new file to WAL needs it to itself: a process that finds another doing so gets `SQLITE_BUSY` at once,
    /// not after its busy timeout. That, and any other `DatabaseError` from opening or `setUp`, is tried again every
    /// 50 ms, up to `tries` times; a failure that lasts (a damaged, read-only or full file) is thrown at once, and so is
    /// one that came only after a second or more: a lock another process held through the whole busy timeout (an
    /// sqlite3 shell left in a transaction) is not waited out `tries` times over (20 times 30 s, before).
    public static func openBesideOtherProcesses(
        path: String,
        configuration: Configuration,
        tries: Int = 20,
        setUp: (DatabasePool) throws -> Void
    ) throws -> DatabasePool {
        var pool: DatabasePool?
        for attempt in 1...max(1, tries) {
            let started = ContinuousClock.now
            do {
                let opened = try pool ?? DatabasePool(path: path, configuration: configuration)
                pool = opened
                try setUp(opened)
                return opened
            } catch let error as DatabaseError {
                // A damaged, read-only or full file stays so: said at once, not after a second of tries.
                guard attempt < tries, !StateDatabase.isLasting(error), ContinuousClock.now - started < .seconds(1) else { throw error }
                usleep(50_000)
            }
        }
        preconditionFailure("the loop returns or throws")
    }

    /// Moves the WAL into the database file and truncates it (`PRAGMA wal_checkpoint(TRUNCATE)`), so that erased rows
    /// do not linger in old WAL frames; best effort. A truncating checkpoint holds the writer's lock while it waits for
    /// readers of an older snapshot, and with the connection's own busy timeout (30 s) a reader streaming a segment
    /// made every other process's write wait that long and fail (`database is locked` in a recording played while it
    /// ran). It waits for readers `milliseconds` at most, then leaves the frames to the next checkpoint.
    public func truncateWAL(waitingAtMost milliseconds: Int = 250) {
        _ = try? writeWithoutTransaction { db in
            let previous = try Int.fetchOne(db, sql: "PRAGMA busy_timeout") ?? StateDatabase.busyTimeoutSeconds * 1_000
            try db.execute(sql: "PRAGMA busy_timeout = \(milliseconds)")
            defer { try? db.execute(sql: "PRAGMA busy_timeout = \(previous)") }
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }
}

extension DatabaseMigrator {
    /// Opens the SQLite file at `path` and migrates it, beside other processes doing the same
    /// (``GRDB/DatabasePool/openBesideOtherProcesses(path:configuration:tries:setUp:)``).
    ///
    /// GRDB decides which migrations to run before it opens each migration's transaction, so the second process to get
    /// there runs a migration the first has just committed, and its `CREATE TABLE` fails ("table key_leases already
    /// exists"). Each migration is one transaction, so nothing of the failed one stays: when the schema is complete by
    /// then it is done, else the migrator runs again and takes up where the other process got to.
    public func openMigrated(path: String, configuration: Configuration, tries: Int = 20) throws -> DatabasePool {
        try DatabasePool.openBesideOtherProcesses(path: path, configuration: configuration, tries: tries) { pool in
            do {
                try migrate(pool)
            } catch let error as DatabaseError {
                guard try pool.read({ try hasCompletedMigrations($0) }) else { throw error }
            }
        }
    }
}

/// How a failure of an SQLite state file is told: the key store and the download state share `stowage.sqlite`, so a
/// damaged file reads the same from either, with what is lost, what is not, and the way out.
public enum StateDatabase {
    /// SQLite says the file is not a database or its pages do not hold together (`SQLITE_CORRUPT`, `SQLITE_NOTADB`):
    /// a truncated file, a disk error, a file overwritten by hand.
    /// A column holding a value of another type than Stowage wrote there (text in a number column, bytes that are
    /// not UTF-8 in a text one: an edit made by hand with the sqlite3 shell) is damage too.
    public static func isDamaged(_ error: any Error) -> Bool {
        if error is RowDecodingError { return true }
        guard let error = error as? DatabaseError else { return false }
        return [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode)
    }

    /// Another connection held the file locked for longer than the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`).
    public static func isLocked(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return [.SQLITE_BUSY, .SQLITE_LOCKED].contains(error.resultCode)
    }

    /// How long a connection to `stowage.sqlite` waits for another's lock before it fails (GRDB's busy mode).
    public static let busyTimeoutSeconds = 30

    /// A failure that trying again does not mend: damage, a read-only or unopenable file, a full disk, an I/O error.
    public static func isLasting(_ error: DatabaseError) -> Bool {
        [.SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_FULL, .SQLITE_PERM, .SQLITE_IOERR]
            .contains(error.resultCode)
    }

    /// SQLite's own words for `error` ("database disk image is malformed"), without the statement that failed.
    public static func reason(_ error: any Error) -> String {
        if error is RowDecodingError {
            // GRDB's text names the type and column, then lists the whole row: only the first part is said.
            let text = String(describing: error)
            if let match = text.firstMatch(of: /could not decode (.+?) from database value .* - column: "([^"]+)"/) {
                return "the column \(match.output.2) holds a value that is not a \(match.output.1)"
            }
            return String(text.prefix { $0 != "," })
        }
        guard let error = error as? DatabaseError else { return String(describing: type(of: error)) }
        return error.message ?? "SQLite error \(error.resultCode.rawValue)"
    }

    /// What a user reads when `stowage.sqlite` at `path` is damaged: the leases and download records in it are lost,
    /// the packages are not, and `stowage recover` then `stowage keys fetch` bring the assets back.
    public static func damagedMessage(path: String, reason: String) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        return "The state database \(path) is damaged (SQLite: \(reason)), so the leases, keys and download records in it "
            + "cannot be read. The packages in \(directory)/packages are untouched. Run `stowage recover` to set the damaged "
            + "file aside and start a new one, then, while online, `stowage keys fetch ASSET --key-server URL --token-file FILE` "
            + "for each asset `stowage list` shows."
    }
}

extension StateDatabase {
    /// Why the SQLite file at `path` is damaged, or nil when SQLite's `quick_check` finds it whole. A missing file is
    /// whole (a new one is made on first use).
    public static func damage(at path: String) -> String? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let queue = try DatabaseQueue(path: path)
            let rows = try queue.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") }
            try queue.close()
            return rows == ["ok"] ? nil : rows.prefix(3).joined(separator: "; ")
        } catch {
            return reason(error)
        }
    }

    /// Moves the SQLite file at `path` and its `-wal` and `-shm` companions aside, to `PATH.damaged-STAMP` (a WAL left
    /// beside a new file would be replayed into it). Nothing is deleted.
    ///
    /// - Returns: the file's new path.
    public static func setAside(_ path: String, stamp: String) throws -> String {
        let target = "\(path).damaged-\(stamp)"
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            guard rename(path + suffix, target + suffix) == 0 else {
                throw KeyStoreError.databaseFailure(
                    "\(path + suffix) could not be moved to \(target + suffix): \(FileErrorText.describe(errno: errno))"
                )
            }
        }
        return target
    }
}
