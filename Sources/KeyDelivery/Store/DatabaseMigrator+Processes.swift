public import GRDB

#if canImport(Glibc)
import Glibc
#endif

extension DatabaseMigrator {
    /// Opens the SQLite file at `path` and migrates its schema when other processes may be doing the same at the same
    /// moment: a `stowage play` started beside the first `stowage download` of a new data directory, or two key server
    /// instances starting on one new SQLite file.
    ///
    /// Two races are waited out, each found by starting stores together on a new file:
    /// - Turning a new file to WAL needs it to itself: a process that finds another doing so gets `SQLITE_BUSY` at once,
    ///   not after its busy timeout, and opens again.
    /// - GRDB decides which migrations to run before it opens each migration's transaction, so the second process to get
    ///   there runs a migration the first has just committed, and its `CREATE TABLE` fails ("table key_leases already
    ///   exists"). Each migration is one transaction, so nothing of the failed one stays: the migrator runs again and
    ///   takes up where the other process got to.
    ///
    /// Any other failure (a full disk, a damaged file), or one of these that lasts, is thrown after the last try, about a
    /// second later.
    public func openMigrated(path: String, configuration: Configuration, tries: Int = 20) throws -> DatabasePool {
        var pool: DatabasePool?
        for attempt in 1...max(1, tries) {
            do {
                let opened = try pool ?? DatabasePool(path: path, configuration: configuration)
                pool = opened
                try migrate(opened)
                return opened
            } catch let error as DatabaseError {
                if let pool, try pool.read({ try hasCompletedMigrations($0) }) { return pool }
                guard attempt < tries else { throw error }
                usleep(50_000)
            }
        }
        preconditionFailure("the loop returns or throws")
    }
}
