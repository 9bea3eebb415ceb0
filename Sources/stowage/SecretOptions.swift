import ArgumentParser
import Foundation
import KeyDelivery
import StowageCrypto

/// `--token -` and `--token-file FILE` (and `STOWAGE_TOKEN`), for every command that sends an entitlement token: the
/// token never goes on the command line, where other users can read it (docs/SECURITY.md).
struct TokenOptions: ParsableArguments {
    @Option(
        name: .customLong("token"),
        help: ArgumentHelp(
            "`-` reads the entitlement token (JWT) from standard input. A token written here is refused: every user can read "
                + "command lines. Or use --token-file, or the STOWAGE_TOKEN environment variable.",
            valueName: "-"
        )
    )
    var token: String?

    @Option(name: .customLong("token-file"), help: "A file of yours (mode 0600) holding the entitlement token.")
    var tokenFile: String?

    /// The token from whichever source was given, nil when none; a refusal ends the command with its code.
    func resolve(json: Bool) -> String? {
        CommandOutput.succeeding(json: json) {
            try SecretInput.token(option: token, file: tokenFile, environment: ProcessInfo.processInfo.environment)
        }
    }

    /// The token, which `purpose` ("renewing a lease") cannot do without: its absence ends the command with
    /// `secret_missing`.
    func required(for purpose: String, json: Bool) -> String {
        CommandOutput.succeeding(json: json) {
            guard let token = try SecretInput.token(option: token, file: tokenFile, environment: ProcessInfo.processInfo.environment) else {
                throw SecretInputError.missing("the entitlement token", purpose: purpose, options: SecretInput.tokenAlternatives)
            }
            return token
        }
    }
}

/// `--key -` and `--key-file FILE`, for every command that takes a content key: the key never goes on the command line.
struct KeyOptions: ParsableArguments {
    @Option(
        name: .customLong("key"),
        help: ArgumentHelp(
            "`-` reads the content key (hex digits, or raw bytes) from standard input. A key written here is refused: every "
                + "user can read command lines.",
            valueName: "-"
        )
    )
    var key: String?

    @Option(name: .customLong("key-file"), help: "A file of yours (mode 0600) holding the content key: hex digits or raw bytes.")
    var keyFile: String?

    /// Whether a key was given at all.
    var isGiven: Bool { key != nil || keyFile != nil }

    /// Whether the key comes from standard input.
    var readsStandardInput: Bool { key == "-" }

    /// The key, of one of `lengths` bytes; a refusal ends the command with its code.
    func resolve(lengths: Set<Int>, json: Bool) -> SecretBytes {
        CommandOutput.succeeding(json: json) { try SecretInput.contentKey(option: key, file: keyFile, lengths: lengths) }
    }
}

/// `--header 'Name: value'` and `--header-file FILE`, for every command that fetches playlists: credential headers
/// (``SecretInput/isCredentialHeader(_:)``) come only from the file.
struct HeaderOptions: ParsableArguments {
    @Option(
        name: .customLong("header"),
        help: ArgumentHelp(
            "An extra request header 'Name: value' (repeatable); sent only to the playlist's origin. Credentials "
                + "(Authorization, Cookie, any name with auth, token, key, secret or session) go in --header-file."
        )
    )
    var headers: [String] = []

    @Option(name: .customLong("header-file"), help: "A file of yours (mode 0600) of request headers, one 'Name: value' per line.")
    var headerFile: String?

    /// The headers of both sources; a refusal ends the command with its code.
    func resolve(json: Bool) -> [(String, String)] {
        CommandOutput.succeeding(json: json) { try SecretInput.headers(commandLine: headers, file: headerFile) }
    }
}
