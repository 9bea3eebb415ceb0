import ArgumentParser
import Foundation
import KeyDelivery

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
