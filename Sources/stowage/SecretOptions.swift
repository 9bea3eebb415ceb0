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
        do {
            return try SecretInput.token(option: token, file: tokenFile, environment: ProcessInfo.processInfo.environment)
        } catch {
            CommandOutput.fail(error, json: json)
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
        do {
            return try SecretInput.contentKey(option: key, file: keyFile, lengths: lengths)
        } catch {
            CommandOutput.fail(error, json: json)
        }
    }
}
