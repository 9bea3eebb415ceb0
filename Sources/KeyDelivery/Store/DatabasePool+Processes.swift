public import GRDB

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
    /// 50 ms; a failure that lasts (a full disk, a damaged file) is thrown after the last try, about a second later.
    public static func openBesideOtherProcesses(
        path: String,
        configuration: Configuration,
        tries: Int = 20,
        setUp: (DatabasePool) throws -> Void
    ) throws -> DatabasePool {
        var pool: DatabasePool?
        for attempt in 1...max(1, tries) {
            do {
                let opened = try pool ?? DatabasePool(path: path, configuration: configuration)
                pool = opened
                try setUp(opened)
                return opened
            } catch let error as DatabaseError {
                guard attempt < tries else { throw error }
                usleep(50_000)
            }
        }
        preconditionFailure("the loop returns or throws")
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
