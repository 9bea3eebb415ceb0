public import Foundation

/// Where Stowage keeps its state (DESIGN.md, "State on disk"): `$STOWAGE_HOME`, else `$XDG_DATA_HOME/stowage`,
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
    @discardableResult
    public func prepare() throws -> URL {
        let manager = FileManager.default
        try manager.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try manager.setAttributes([.posixPermissions: 0o700], ofItemAtPath: url.path)
        return url
    }
}
