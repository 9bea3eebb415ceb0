public import Foundation
public import StowageCore

#if canImport(Glibc)
import Glibc
#endif

/// Where Stowage keeps its state (docs/design.md, "State on disk"): `$STOWAGE_HOME`, else `$XDG_DATA_HOME/stowage`,
/// else `~/.local/share/stowage`, created with mode 0700.
public struct DataDirectory: Sendable, Hashable {
    /// The directory's location.
    public let url: URL

    /// A data directory at an explicit location (tests, `--data-dir`).
    public init(url: URL) {
        self.url = url.standardizedFileURL
    }

    /// The data directory named by the environment.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> DataDirectory {
        if let home = environment["STOWAGE_HOME"], !home.isEmpty {
            return DataDirectory(url: URL(fileURLWithPath: home, isDirectory: true))
        }
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty {
            return DataDirectory(url: URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent("stowage", isDirectory: true))
        }
        let home =
            environment["HOME"].map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.homeDirectoryForCurrentUser
        return DataDirectory(url: home.appendingPathComponent(".local/share/stowage", isDirectory: true))
    }

    /// The SQLite database holding the catalog, download state, key store and audit journal.
    public var databaseURL: URL { url.appendingPathComponent("stowage.sqlite") }

    /// Where offline packages live, one folder per asset.
    public var packagesURL: URL { url.appendingPathComponent("packages", isDirectory: true) }

    /// Creates the directory if needed and makes sure only its owner can enter it (mode 0700), since it holds
    /// device keys and sealed content keys.
    ///
    /// - Throws: ``DataDirectoryError`` `data_directory_unwritable` when it cannot be created, restricted or written (a
    ///   read-only mount, another user's folder, a file in the way): Stowage writes there even to list assets, since
    ///   every command records the time in the key store.
    @discardableResult
    public func prepare() throws(DataDirectoryError) -> URL {
        let manager = FileManager.default
        do {
            try manager.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try manager.setAttributes([.posixPermissions: 0o700], ofItemAtPath: url.path)
        } catch {
            throw DataDirectoryError(path: url.path, reason: FileErrorText.describe(error))
        }
        // Root passes permission checks, not a read-only mount; another user passes neither.
        guard access(url.path, W_OK | X_OK) == 0 else {
            throw DataDirectoryError(path: url.path, reason: FileErrorText.describe(errno: errno))
        }
        return url
    }
}

/// A data directory Stowage cannot use: it cannot be created, restricted to its owner, or written.
public struct DataDirectoryError: StowageError, Hashable {
    /// The directory.
    public let path: String
    /// Why, in a few plain words ("the file system is read-only").
    public let reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var code: ErrorCode { .dataDirectoryUnwritable }

    public var message: String {
        "The data directory \(path) cannot be used: \(reason). Stowage keeps its key store and download state there and "
            + "writes to it even to list assets; make it writable by you (check the mount and its owner), or set STOWAGE_HOME to "
            + "a folder you can write."
    }

    public var subject: ErrorSubject { ErrorSubject(path: path) }

    public var description: String { "\(code): \(message)" }
}
