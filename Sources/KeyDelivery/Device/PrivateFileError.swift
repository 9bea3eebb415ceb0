#if canImport(Glibc)
public import StowageCore
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A secret file or the data directory is unsafe or unreadable: it can be read by group or others, belongs to
/// someone else, is not what it should be, or an I/O call failed.
///
/// Codes are stable snake_case. The message names the path and says what to do; it never contains file contents.
public struct PrivateFileError: Error, Hashable, Sendable, CustomStringConvertible {
    private typealias Code = ErrorCode

    private let _code: Code
    /// The file or directory concerned.
    public let path: String
    /// What is wrong and what to do.
    public let message: String

    private init(_ code: Code, path: String, message: String) {
        self._code = code
        self.path = path
        self.message = message
    }

    /// The stable code, e.g. `insecure_permissions`.
    public var code: ErrorCode { _code }

    public var description: String { "\(code): \(message)" }

    /// The file or directory grants access to group or others (`mode` is its permission bits).
    public static func insecurePermissions(path: String, mode: UInt32, directory: Bool) -> Self {
        let wanted = directory ? "700" : "600"
        return .init(
            .insecurePermissions,
            path: path,
            message: "\(path) has mode \(String(mode & 0o7777, radix: 8)) and is open to group or others; it holds secrets. "
                + "Run `chmod \(wanted) \(path)` if nobody else could have read it, otherwise delete it."
        )
    }

    /// The file or directory belongs to another user.
    public static func notOwned(path: String, owner: UInt32) -> Self {
        .init(.notOwned, path: path, message: "\(path) belongs to user \(owner), not to the user running Stowage.")
    }

    /// A directory was expected and something else is there, or the other way round.
    public static func wrongFileType(path: String, expected: String) -> Self {
        .init(.wrongFileType, path: path, message: "\(path) is not a \(expected).")
    }

    /// The file does not hold what it should (wrong length, say).
    public static func malformedFile(path: String, reason: String) -> Self {
        .init(.malformedFile, path: path, message: "\(path) is damaged: \(reason). Restore it from a backup or delete it.")
    }

    /// A system call failed.
    public static func ioFailure(path: String, operation: String, errno: Int32) -> Self {
        .init(.ioFailure, path: path, message: "\(operation) \(path) failed: \(String(cString: strerror(errno))) (errno \(errno)).")
    }
}

extension PrivateFileError: StowageError {
    public var subject: ErrorSubject { ErrorSubject(path: path) }
}
