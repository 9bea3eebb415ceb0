import Foundation
public import StowageCore
public import StowageCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a command takes a secret from (an entitlement token, a content key), never its command line: every local user
/// can read a process's arguments in `/proc/PID/cmdline` while it runs, but not its environment or standard input
/// (docs/SECURITY.md, "Another local user").
///
/// The sources: `-` as the option's value (standard input), a file of the user's own that nobody else can read
/// (`--token-file`, `--key-file`), or an environment variable (`STOWAGE_TOKEN`), which an option given on the command
/// line overrides. A value written on the command line is refused with `secret_on_command_line`.
///
/// ```swift
/// let token = try SecretInput.token(option: "-", file: nil, environment: ProcessInfo.processInfo.environment)
/// ```
public enum SecretInput {
    /// The environment variable a token may come from.
    public static let tokenVariable = "STOWAGE_TOKEN"
    /// This process's environment without the secrets it may hold (``tokenVariable``): what a program Stowage starts
    /// (a player, ffmpeg, a token command) is given, so that neither it nor its plugins see the token.
    public static var childEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.filter { $0.key != tokenVariable }
    }

    /// The most a secret read from standard input or a file may be.
    static let maximumSize = 64 * 1024

    /// The entitlement token from `--token -` or `--token-file FILE`, else `STOWAGE_TOKEN`; nil when none is given.
    ///
    /// - Parameters:
    ///   - option: the value of `--token`; only `-` (standard input) is accepted.
    ///   - file: the value of `--token-file`.
    ///   - environment: the process's environment.
    ///   - readStandardInput: reads standard input (tests pass their own).
    /// - Throws: ``SecretInputError`` `secret_on_command_line`, `secret_sources_conflict`, `secret_unreadable`;
    ///   ``PrivateFileError`` for a file others can read or that belongs to someone else.
    public static func token(
        option: String?,
        file: String?,
        environment: [String: String],
        readStandardInput: () throws -> [UInt8] = { try SecretInput.standardInput() }
    ) throws -> String? {
        if option != nil, file != nil { throw SecretInputError.conflict("--token", "--token-file", secret: "the entitlement token") }
        if let option {
            guard option == "-" else { throw SecretInputError.onCommandLine(option: "--token", alternatives: tokenAlternatives) }
            return try firstLine(try readStandardInput(), secret: "the entitlement token", source: "standard input")
        }
        if let file {
            return try firstLine(try readFile(file, secret: "the entitlement token"), secret: "the entitlement token", source: file)
        }
        return environment[tokenVariable].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// A content key from `--key -` (standard input) or `--key-file FILE`: hex digits (white space around them
    /// ignored), or else raw bytes, of one of `lengths` (16 bytes by default). Text that reads as hex of an allowed
    /// length is hex, so `printf %s 00112233445566778899aabbccddeeff` gives a 16-byte key even where 32 bytes are allowed.
    ///
    /// - Throws: ``SecretInputError`` `secret_on_command_line` (a key written as `--key HEX`), `secret_sources_conflict`,
    ///   `secret_unreadable`, `secret_missing`, `invalid_content_key`; ``PrivateFileError`` for a file others can read.
    public static func contentKey(
        option: String?,
        file: String?,
        lengths: Set<Int> = [16],
        readStandardInput: () throws -> [UInt8] = { try SecretInput.standardInput() }
    ) throws -> SecretBytes {
        if option != nil, file != nil { throw SecretInputError.conflict("--key", "--key-file", secret: "the content key") }
        let raw: [UInt8]
        let source: String
        if let option {
            guard option == "-" else {
                throw SecretInputError.onCommandLine(option: "--key", alternatives: "--key - (standard input) or --key-file FILE")
            }
            raw = try readStandardInput()
            source = "standard input"
        } else if let file {
            raw = try readFile(file, secret: "the content key")
            source = file
        } else {
            throw SecretInputError.missing("a content key", options: "--key - (standard input) or --key-file FILE")
        }
        let text = String(decoding: raw, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if let bytes = Hex.decode(text), lengths.contains(bytes.count) { return SecretBytes(bytes) }
        guard lengths.contains(raw.count) else {
            throw SecretInputError.invalidContentKey(source: source, found: raw.count, lengths: lengths)
        }
        return SecretBytes(raw)
    }

    /// Words that make a request header a credential (`Authorization`, `Cookie`, `X-Api-Key`, `X-Auth-Token`,
    /// `CDN-Signature`, ...): such a header is never taken from the command line.
    static let credentialWords = ["auth", "cookie", "token", "key", "secret", "password", "signature", "session", "credential"]

    /// Whether a header of this name carries a credential (``credentialWords``).
    public static func isCredentialHeader(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return credentialWords.contains { lowered.contains($0) }
    }

    /// Extra request headers: `--header 'Name: value'` from the command line (never a credential header:
    /// ``isCredentialHeader(_:)``), then those of `--header-file FILE` (the user's own, mode 0600: one `Name: value` per
    /// line; blank lines and lines starting with `#` are skipped).
    ///
    /// - Throws: ``SecretInputError`` `secret_on_command_line` for a credential header given on the command line,
    ///   `invalid_header` for a line that is not `Name: value`, `secret_unreadable`; ``PrivateFileError`` for a file
    ///   others can read.
    public static func headers(commandLine: [String], file: String?) throws -> [(String, String)] {
        var headers: [(String, String)] = []
        for text in commandLine {
            let header = try parseHeader(text, source: "--header '\(text)'")
            if isCredentialHeader(header.0) {
                throw SecretInputError.onCommandLine(option: "--header '\(header.0): ...'", alternatives: "--header-file FILE")
            }
            headers.append(header)
        }
        guard let file else { return headers }
        let text = String(decoding: try readFile(file, secret: "the request headers"), as: UTF8.self)
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#") else { continue }
            headers.append(try parseHeader(trimmed, source: "line \(number + 1) of \(file)"))
        }
        return headers
    }

    private static func parseHeader(_ text: String, source: String) throws -> (String, String) {
        guard let colon = text.firstIndex(of: ":") else { throw SecretInputError.invalidHeader(source: source) }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) else {
            throw SecretInputError.invalidHeader(source: source)
        }
        return (name, value)
    }

    /// A secret file's bytes: the user's own, nobody else's to read, at most 64 KiB.
    private static func readFile(_ file: String, secret: String) throws -> [UInt8] {
        guard let bytes = try PrivateFile.readSecret(file, maximumCount: maximumSize) else {
            throw SecretInputError.unreadable(secret: secret, source: file, reason: "it does not exist; check the path")
        }
        return bytes.withUnsafeBytes { [UInt8]($0) }
    }

    /// Standard input read to its end (at most 64 KiB).
    public static func standardInput() throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while bytes.count <= maximumSize {
            let count = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else {
                throw SecretInputError.unreadable(secret: "the secret", source: "standard input", reason: String(cString: strerror(errno)))
            }
            if count == 0 { return bytes }
            bytes += chunk.prefix(count)
        }
        throw SecretInputError.unreadable(secret: "the secret", source: "standard input", reason: "it holds more than 64 KiB, more than any secret")
    }

    /// Where a token may come from, in words for messages.
    public static let tokenAlternatives = "--token - (standard input), --token-file FILE or the STOWAGE_TOKEN environment variable"

    /// The first line, without surrounding white space; refused when empty.
    private static func firstLine(_ bytes: [UInt8], secret: String, source: String) throws -> String {
        let line = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        let value = line.trimmingCharacters(in: .whitespaces)
        guard !value.isEmpty else {
            throw SecretInputError.unreadable(secret: secret, source: source, reason: "its first line is empty; put \(secret) there")
        }
        return value
    }
}

/// Why a secret could not be taken.
public struct SecretInputError: StowageError, Hashable {
    /// The stable code.
    public let code: ErrorCode
    public let message: String

    public var description: String { "\(code): \(message)" }

    /// A secret written on the command line.
    static func onCommandLine(option: String, alternatives: String) -> Self {
        .init(
            code: .secretOnCommandLine,
            message: "\(option) was given a value on the command line, where every user of this machine can read it "
                + "(/proc/PID/cmdline); pass it with \(alternatives)"
        )
    }

    /// Two options give the same secret.
    static func conflict(_ first: String, _ second: String, secret: String) -> Self {
        .init(code: .secretSourcesConflict, message: "\(first) and \(second) both give \(secret); give only one of them")
    }

    /// The source could not be read, or held nothing.
    static func unreadable(secret: String, source: String, reason: String) -> Self {
        .init(code: .secretUnreadable, message: "\(secret) could not be read from \(source): \(reason)")
    }

    /// No source given where one is needed.
    /// - Parameters:
    ///   - secret: what is missing, with its article ("a content key").
    ///   - purpose: why it is needed, if the command does more than one thing ("renewing a lease").
    ///   - options: where it may come from.
    public static func missing(_ secret: String, purpose: String? = nil, options: String) -> Self {
        let what = purpose.map { "\($0) needs \(secret), and none was given" } ?? "\(secret) is needed and none was given"
        return .init(code: .secretMissing, message: "\(what); pass it with \(options)")
    }

    /// A proxy URL with a password, given on the command line.
    public static let proxyPasswordOnCommandLine = SecretInputError(
        code: .secretOnCommandLine,
        message: "--proxy was given a URL with a password, where every user of this machine can read it (/proc/PID/cmdline); "
            + "put the proxy URL in the HTTPS_PROXY (or HTTP_PROXY, ALL_PROXY) environment variable instead"
    )

    /// A header that is not `Name: value`.
    static func invalidHeader(source: String) -> Self {
        .init(
            code: .invalidHeader,
            message: "the header at \(source) is not of the form 'Name: value' (a name of letters, digits, '-' and '_'); "
                + "write one header per line, e.g. 'Authorization: Bearer ...'"
        )
    }

    /// The content key is not of a length the command takes.
    static func invalidContentKey(source: String, found: Int, lengths: Set<Int>) -> Self {
        let sizes = lengths.sorted().map { "\($0 * 2) hex digits or \($0) raw bytes" }.joined(separator: ", or ")
        return .init(
            code: .invalidContentKey,
            message: "the content key from \(source) is \(found) bytes that are not hex of the right length; a key is \(sizes): "
                + "check what the file or standard input holds"
        )
    }
}
