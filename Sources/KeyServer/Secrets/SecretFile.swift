import StowageCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
// Other files of the module import Foundation, which brings CoreFoundation's view of `struct stat`; with
// MemberImportVisibility its members are then only visible when CoreFoundation is imported here too.
#if canImport(CoreFoundation)
import CoreFoundation
#endif
// In the full package Dispatch's C module is what declares the `struct stat` members this file reads.
#if canImport(CDispatch)
import CDispatch
#endif

/// Reads and writes the data directory's secret files (signing key, master key, token secret): owner-only, never
/// overwritten, and refused when others could have read them (the way ssh refuses a loose private key).
enum SecretFile {
    /// Creates `path` with mode 0600 holding `bytes`, unless it exists. The bytes are written and synced to a temporary
    /// file first and then linked into place, so `path` never exists half-written and an existing key is never replaced.
    static func create(_ path: String, bytes: SecretBytes) throws {
        let temporary = path + ".tmp-\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure(temporary, "create") }
        defer { unlink(temporary) }
        do {
            defer { close(descriptor) }
            try bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0, errno == EINTR { continue }
                    guard written > 0 else { throw failure(temporary, "write") }
                    offset += written
                }
            }
            guard fsync(descriptor) == 0 else { throw failure(temporary, "fsync") }
        }
        guard link(temporary, path) == 0 || errno == EEXIST else { throw failure(path, "link") }
    }

    /// Reads a secret file straight into zeroizing memory, refusing it unless it is a regular file of this user that
    /// group and others cannot access.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - byteCount: The exact length required, or nil for any length up to 4 KiB.
    ///   - directory: The data directory, named in the error when the file is missing.
    /// - Throws: ``KeyServerSetupError`` (`not_initialized` when missing, `insecure_file`, `invalid_key_file`).
    static func read(_ path: String, byteCount: Int? = nil, directory: String) throws -> SecretBytes {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { throw KeyServerSetupError.notInitialized(directory) }
            throw failure(path, "open")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw failure(path, "stat") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw KeyServerSetupError.invalidKeyFile(path, "it is not a regular file") }
        guard info.st_uid == geteuid() else { throw KeyServerSetupError.invalidKeyFile(path, "it belongs to another user") }
        let mode = Int(info.st_mode) & 0o777
        guard mode & 0o077 == 0 else { throw KeyServerSetupError.insecureFile(path, mode: mode) }
        let size = Int(info.st_size)
        if let byteCount, size != byteCount {
            throw KeyServerSetupError.invalidKeyFile(path, "expected \(byteCount) raw bytes, found \(size)")
        }
        guard size > 0, size <= 4_096 else { throw KeyServerSetupError.invalidKeyFile(path, "expected a small binary key, found \(size) bytes") }
        return try SecretBytes(count: size) { buffer in
            var offset = 0
            while offset < size {
                let count = readBytes(descriptor, buffer.baseAddress! + offset, size - offset)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { throw failure(path, "read") }
                offset += count
            }
        }
    }

    /// `read(2)`, named apart from ``read(_:byteCount:directory:)``.
    private static func readBytes(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.read(descriptor, buffer, count)
        #else
        Darwin.read(descriptor, buffer, count)
        #endif
    }

    private static func failure(_ path: String, _ operation: String) -> KeyServerSetupError {
        KeyServerSetupError.invalidKeyFile(path, "\(operation) failed: \(String(cString: strerror(errno)))")
    }
}
