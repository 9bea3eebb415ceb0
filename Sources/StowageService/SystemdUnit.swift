public import Foundation

/// The systemd user unit `stowage service install` writes (`~/.config/systemd/user/stowage.service`): runs
/// `stowage service run` with the same options and data directory, restarts it when it dies, and stops it with
/// SIGTERM (a graceful shutdown: downloads continue at the next start).
public struct SystemdUnit: Sendable, Hashable {
    /// The `stowage` executable (absolute).
    public var executable: String
    /// The arguments after `stowage service run`.
    public var arguments: [String]
    /// The data directory, put in the unit's environment as `STOWAGE_HOME`.
    public var dataDirectory: String

    public init(executable: String, arguments: [String], dataDirectory: String) {
        self.executable = executable
        self.arguments = arguments
        self.dataDirectory = dataDirectory
    }

    /// Where a user's units live: `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`.
    public static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let config = environment["XDG_CONFIG_HOME"], !config.isEmpty {
            return URL(fileURLWithPath: config, isDirectory: true).appendingPathComponent("systemd/user", isDirectory: true)
        }
        let home = environment["HOME"].map { URL(fileURLWithPath: $0, isDirectory: true) } ?? FileManager.default.homeDirectoryForCurrentUser
        return home.appendingPathComponent(".config/systemd/user", isDirectory: true)
    }

    /// The unit file's text.
    public var text: String {
        let command = ([executable, "service", "run"] + arguments).map(Self.quoted).joined(separator: " ")
        return """
            [Unit]
            Description=Stowage download service (offline HLS downloads and lease upkeep)
            After=network-online.target
            Wants=network-online.target

            [Service]
            Type=simple
            Environment=\(Self.quoted("STOWAGE_HOME=\(dataDirectory)"))
            ExecStart=\(command)
            Restart=on-failure
            RestartSec=5
            KillSignal=SIGTERM
            TimeoutStopSec=30

            [Install]
            WantedBy=default.target

            """
    }

    /// Writes the unit to `directory/stowage.service` (creating the directory).
    /// - Returns: the file written.
    @discardableResult
    public func write(to directory: URL = SystemdUnit.directory()) throws -> URL {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("stowage.service")
        try Data(text.utf8).write(to: file, options: .atomic)
        return file
    }

    /// systemd's quoting: double quotes around anything with a space, quote, backslash or specifier.
    static func quoted(_ word: String) -> String {
        guard word.contains(where: { " \t\"'\\%$".contains($0) }) || word.isEmpty else { return word }
        let escaped = word.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "%", with: "%%").replacingOccurrences(of: "$", with: "$$")
        return "\"\(escaped)\""
    }
}
