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
    public enum Code: String, Hashable, Sendable {
        case notInitialized = "not_initialized"
        case insecureFile = "insecure_file"
        case invalidKeyFile = "invalid_key_file"
        case invalidConfiguration = "invalid_configuration"
        case unknownPolicy = "unknown_policy"
        case invalidAssetID = "invalid_asset_id"
        case invalidKeyID = "invalid_key_id"
        case invalidContentKey = "invalid_content_key"
        case keyConflict = "key_conflict"
    }

    /// The kind of problem; ``code`` is its snake_case form.
    public let kind: Code
    /// What went wrong, with the file, asset, key or policy it concerns, and what to do.
    public let message: String

    init(_ kind: Code, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The stable snake_case code, e.g. `unknown_policy`.
    public var code: String { kind.rawValue }

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

    static func invalidKeyFile(_ path: String, _ reason: String) -> Self { Self(.invalidKeyFile, "\(path): \(reason)") }

    static func invalidConfiguration(_ reason: String) -> Self { Self(.invalidConfiguration, "config.json: \(reason)") }

    static func unknownPolicy(_ name: String, known: [String]) -> Self {
        Self(.unknownPolicy, "no policy named \"\(name)\" in config.json (known: \(known.sorted().joined(separator: ", ")))")
    }
}
