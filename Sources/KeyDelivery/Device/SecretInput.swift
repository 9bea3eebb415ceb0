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
/// The sources, one at a time: `-` as the option's value (standard input), a file of the user's own that nobody else can
/// read (`--token-file`, `--key-file`), or an environment variable (`STOWAGE_TOKEN`). A value written on the command
/// line is refused with `secret_on_command_line`.
///
/// ```swift
/// let token = try SecretInput.token(option: "-", file: nil, environment: ProcessInfo.processInfo.environment)
/// ```
public enum SecretInput {
    /// The environment variable a token may come from.
    public static let tokenVariable = "STOWAGE_TOKEN"
    /// The most a secret read from standard input or a file may be.
    static let maximumSize = 64 * 1024

    /// The entitlement token from `--token -`, `--token-file FILE` or `STOWAGE_TOKEN`; nil when none is given.
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
        let fromEnvironment = environment[tokenVariable].flatMap { $0.isEmpty ? nil : $0 }
        let given = [option != nil ? "--token" : nil, file != nil ? "--token-file" : nil, fromEnvironment != nil ? tokenVariable : nil]
            .compactMap { $0 }
        guard given.count <= 1 else { throw SecretInputError.conflict(given) }
        if let option {
            guard option == "-" else { throw SecretInputError.onCommandLine(option: "--token", alternatives: tokenAlternatives) }
            return try text(try readStandardInput(), source: "standard input")
        }
        if let file {
            guard let bytes = try PrivateFile.readSecret(file, maximumCount: maximumSize) else {
                throw SecretInputError.unreadable(source: file, reason: "it does not exist")
            }
            return try text(bytes.withUnsafeBytes { [UInt8]($0) }, source: file)
        }
        return fromEnvironment
    }

    /// A content key from `--key -` (standard input) or `--key-file FILE`: raw bytes, or hex digits, of one of
    /// `lengths` (16 bytes by default).
    ///
    /// - Throws: ``SecretInputError`` `secret_on_command_line` (a key written as `--key HEX`), `secret_sources_conflict`,
    ///   `secret_unreadable`, `secret_missing`, `invalid_content_key`; ``PrivateFileError`` for a file others can read.
    public static func contentKey(
        option: String?,
        file: String?,
        lengths: Set<Int> = [16],
        readStandardInput: () throws -> [UInt8] = { try SecretInput.standardInput() }
    ) throws -> SecretBytes {
        if option != nil, file != nil { throw SecretInputError.conflict(["--key", "--key-file"]) }
        let raw: [UInt8]
        let source: String
        if let option {
            guard option == "-" else {
                throw SecretInputError.onCommandLine(option: "--key", alternatives: "--key - (standard input) or --key-file FILE")
            }
            raw = try readStandardInput()
            source = "standard input"
        } else if let file {
            guard let bytes = try PrivateFile.readSecret(file, maximumCount: maximumSize) else {
                throw SecretInputError.unreadable(source: file, reason: "it does not exist")
            }
            raw = bytes.withUnsafeBytes { [UInt8]($0) }
            source = file
        } else {
            throw SecretInputError.missing(option: "--key - or --key-file FILE")
        }
        if lengths.contains(raw.count) { return SecretBytes(raw) }
        let text = String(decoding: raw, as: UTF8.self).filter { !$0.isWhitespace }
        guard let bytes = Hex.decode(text), lengths.contains(bytes.count) else {
            throw SecretInputError.invalidContentKey(source: source, lengths: lengths)
        }
        return SecretBytes(bytes)
    }

    /// Request headers whose values are credentials: never taken from the command line.
    public static let credentialHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// Extra request headers: `--header 'Name: value'` from the command line (never a credential header:
    /// ``credentialHeaders``), then those of `--header-file FILE` (the user's own, mode 0600: one `Name: value` per
    /// line; blank lines and lines starting with `#` are skipped).
    ///
    /// - Throws: ``SecretInputError`` `secret_on_command_line` for a credential header given on the command line,
    ///   `invalid_header` for a line that is not `Name: value`, `secret_unreadable`; ``PrivateFileError`` for a file
    ///   others can read.
    public static func headers(commandLine: [String], file: String?) throws -> [(String, String)] {
        var headers: [(String, String)] = []
        for text in commandLine {
            let header = try parseHeader(text, source: "--header")
            if credentialHeaders.contains(header.0.lowercased()) {
                throw SecretInputError.onCommandLine(option: "--header '\(header.0): ...'", alternatives: "--header-file FILE")
            }
            headers.append(header)
        }
        guard let file else { return headers }
        guard let bytes = try PrivateFile.readSecret(file, maximumCount: maximumSize) else {
            throw SecretInputError.unreadable(source: file, reason: "it does not exist")
        }
        let text = bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = String(line).trimmingWhitespace
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#") else { continue }
            headers.append(try parseHeader(trimmed, source: file))
        }
        return headers
    }

    private static func parseHeader(_ text: String, source: String) throws -> (String, String) {
        guard let colon = text.firstIndex(of: ":") else { throw SecretInputError.invalidHeader(source: source) }
        let name = String(text[..<colon]).trimmingWhitespace
        let value = String(text[text.index(after: colon)...]).trimmingWhitespace
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) else {
            throw SecretInputError.invalidHeader(source: source)
        }
        return (name, value)
    }

    /// Standard input read to its end (at most 64 KiB).
    public static func standardInput() throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while bytes.count <= maximumSize {
            let count = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw SecretInputError.unreadable(source: "standard input", reason: String(cString: strerror(errno))) }
            if count == 0 { return bytes }
            bytes += chunk.prefix(count)
        }
        throw SecretInputError.unreadable(source: "standard input", reason: "it holds more than 64 KiB")
    }

    private static let tokenAlternatives = "--token - (standard input), --token-file FILE or the STOWAGE_TOKEN environment variable"

    /// The first line, without surrounding white space; refused when empty.
    private static func text(_ bytes: [UInt8], source: String) throws -> String {
        let line = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        let token = line.trimmingWhitespace
        guard !token.isEmpty else { throw SecretInputError.unreadable(source: source, reason: "it is empty") }
        return token
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}

/// Why a secret could not be taken.
public struct SecretInputError: StowageError, Hashable {
    /// The stable code.
    public let code: String
    public let message: String

    public var description: String { "\(code): \(message)" }

    /// A secret written on the command line.
    static func onCommandLine(option: String, alternatives: String) -> Self {
        .init(
            code: "secret_on_command_line",
            message: "\(option) was given a value on the command line, where every user of this machine can read it "
                + "(/proc/PID/cmdline); pass it with \(alternatives)"
        )
    }

    /// More than one source given.
    static func conflict(_ sources: [String]) -> Self {
        .init(code: "secret_sources_conflict", message: "\(sources.joined(separator: " and ")) both give the secret; give one of them")
    }

    /// The source could not be read, or held nothing.
    static func unreadable(source: String, reason: String) -> Self {
        .init(code: "secret_unreadable", message: "the secret could not be read from \(source): \(reason)")
    }

    /// No source given where one is needed.
    static func missing(option: String) -> Self {
        .init(code: "secret_missing", message: "no secret was given; pass it with \(option)")
    }

    /// A proxy URL with a password, given on the command line.
    public static let proxyPasswordOnCommandLine = SecretInputError(
        code: "secret_on_command_line",
        message: "--proxy was given a URL with a password, where every user of this machine can read it (/proc/PID/cmdline); "
            + "put the proxy URL in the HTTPS_PROXY (or HTTP_PROXY, ALL_PROXY) environment variable instead"
    )

    /// A header that is not `Name: value`.
    static func invalidHeader(source: String) -> Self {
        .init(
            code: "invalid_header",
            message: "a header from \(source) is not of the form 'Name: value'; write one per line, e.g. 'Authorization: Bearer ...'"
        )
    }

    /// The content key is not of a length the command takes.
    static func invalidContentKey(source: String, lengths: Set<Int>) -> Self {
        let sizes = lengths.sorted().map { "\($0) raw bytes or \($0 * 2) hex digits" }.joined(separator: ", or ")
        return .init(code: "invalid_content_key", message: "the content key from \(source) is not \(sizes); check what it holds")
    }
}
