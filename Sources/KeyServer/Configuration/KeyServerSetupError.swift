public import StowageCore

/// Why the key server's data directory, configuration or an asset could not be set up or loaded.
///
/// These are operator errors, met by `stowage keyserver ...` before any request is served; requests fail with
/// ``KeyServerError`` instead. The code is stable and the message says what to fix.
///
/// ```swift
/// do {
///     try await directory.addAsset(id: "movie-1", keyID: keyID, key: key, policy: "rental")
/// } catch let error as KeyServerSetupError where error.kind == .unknownPolicy {
///     print(error.message)
/// }
/// ```
public struct KeyServerSetupError: StowageError, Hashable {
    /// The stable codes (snake_case in JSON).
    public typealias Code = ErrorCode

    /// The kind of problem; ``code`` is its snake_case form.
    public let kind: Code
    /// What went wrong, with the file, asset, key or policy it concerns, and what to do.
    public let message: String

    init(_ kind: Code, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The stable snake_case code, e.g. `unknown_policy`.
    public var code: ErrorCode { kind }

    public var description: String { message }

    static func notInitialized(_ path: String) -> Self {
        Self(.notInitialized, "\(path) is not an initialized key server data directory; run `stowage keyserver init --data-dir \(path)`")
    }

    static func insecureFile(_ path: String, mode: Int) -> Self {
        Self(
            .insecureFile,
            "\(path) is readable by others (mode \(String(mode, radix: 8))); it holds a secret: run `chmod 600 \(path)`"
        )
    }

    static func invalidDatabaseURL(_ url: String) -> Self {
        Self(
            .invalidDatabaseURL,
            "\(url) is not a PostgreSQL URL; write postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (optionally ?sslmode=disable|require)"
        )
    }

    /// - Parameter answeredByServer: PostgreSQL itself refused (a user, password or database it does not know), so
    ///   the advice is about the URL rather than about reaching the server.
    static func databaseUnavailable(_ url: String, reason: String, answeredByServer: Bool = false) -> Self {
        let advice =
            answeredByServer
            ? "the server answered, so check the user, password and database name in the URL (createdb makes a database)"
            : "check that PostgreSQL runs at that host and port and accepts connections from this machine"
        return Self(.databaseUnavailable, "the key server database \(url) cannot be used: \(reason); \(advice)")
    }

    static func schemaOutdated(_ url: String, found: Int, expected: Int, newer: Bool) -> Self {
        if newer {
            return Self(
                .schemaOutdated,
                "the key server database \(url) has schema version \(found), newer than this build's \(expected); run a newer stowage"
            )
        }
        return Self(
            .schemaOutdated,
            "the key server database \(url) has schema version \(found) where this build needs \(expected); run `stowage keyserver init --database URL` to migrate it"
        )
    }

    static func rotationNotPrepared(_ path: String, database: String) -> Self {
        Self(
            .rotationNotPrepared,
            "the key server's state is in \(database), so other instances will need the new master key before any content key is sealed under it: run `stowage keyserver rotate-master-key --prepare --data-dir \(path)`, copy \(path)/master-key.next (mode 0600) into the data directory of every instance (running ones read it without a restart), then run this command again"
        )
    }

    static func invalidKeyFile(_ path: String, _ reason: String) -> Self { Self(.invalidKeyFile, "\(path): \(reason)") }

    static func invalidConfiguration(_ reason: String) -> Self { Self(.invalidConfiguration, "config.json: \(reason)") }

    static func unknownPolicy(_ name: String, known: [String]) -> Self {
        Self(.unknownPolicy, "no policy named \"\(name)\" in config.json (known: \(known.sorted().joined(separator: ", ")))")
    }
}
