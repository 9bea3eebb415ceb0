import StowageCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files only their owner may read, in a directory only its owner may enter: the device's private keys and the
/// key store's secret (shared/KEY-PROTOCOL.md, "Device identity"; DESIGN.md, "State on disk").
///
/// Reading refuses a file open to group or others, or owned by another user, the way ssh refuses a loose private
/// key: a key that others could have copied is not a secret any more. Creating never replaces an existing file
/// (`link(2)` from a fully written temporary file), so two processes starting at once end up with the same key.
enum PrivateFile {
    /// Creates `path` with mode 0700 (and missing parents) if it does not exist; refuses an existing directory that is
    /// open to group or others or owned by someone else.
    static func prepareDirectory(_ path: String) throws(PrivateFileError) {
        var info = stat()
        if lstat(path, &info) != 0 {
            guard errno == ENOENT else { throw .ioFailure(path: path, operation: "stat", errno: errno) }
            let parent = parentPath(of: path)
            if parent != path, access(parent, F_OK) != 0 {
                try createParents(parent)
            }
            if mkdir(path, 0o700) != 0, errno != EEXIST {
                throw .ioFailure(path: path, operation: "mkdir", errno: errno)
            }
            guard lstat(path, &info) == 0 else { throw .ioFailure(path: path, operation: "stat", errno: errno) }
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { throw .wrongFileType(path: path, expected: "directory") }
        guard info.st_uid == geteuid() else { throw .notOwned(path: path, owner: info.st_uid) }
        guard info.st_mode & 0o077 == 0 else {
            throw .insecurePermissions(path: path, mode: UInt32(info.st_mode), directory: true)
        }
    }

    /// Reads a secret file of exactly `count` bytes straight into zeroizing memory; nil if it does not exist.
    static func readSecret(_ path: String, count: Int) throws(PrivateFileError) -> SecretBytes? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw .ioFailure(path: path, operation: "open", errno: errno)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw .ioFailure(path: path, operation: "stat", errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw .wrongFileType(path: path, expected: "regular file") }
        guard info.st_uid == geteuid() else { throw .notOwned(path: path, owner: info.st_uid) }
        guard info.st_mode & 0o077 == 0 else {
            throw .insecurePermissions(path: path, mode: UInt32(info.st_mode), directory: false)
        }
        guard Int(info.st_size) == count else {
            throw .malformedFile(path: path, reason: "it has \(info.st_size) bytes instead of \(count)")
        }
        do {
            return try SecretBytes(count: count) { buffer in
                var offset = 0
                while offset < count {
                    let got = read(descriptor, buffer.baseAddress! + offset, count - offset)
                    if got < 0, errno == EINTR { continue }
                    guard got > 0 else {
                        throw got == 0
                            ? PrivateFileError.malformedFile(path: path, reason: "it ended early")
                            : PrivateFileError.ioFailure(path: path, operation: "read", errno: errno)
                    }
                    offset += got
                }
            }
        } catch let error as PrivateFileError {
            throw error
        } catch {
            throw .ioFailure(path: path, operation: "read", errno: EIO)
        }
    }

    /// Writes `contents` to `path` with mode 0600 unless the file exists. The bytes are written and synced to a
    /// temporary file first and then linked into place, so `path` never exists half-written.
    ///
    /// - Returns: false if `path` already existed (another process won the race); the caller reads it then.
    @discardableResult
    static func createExclusively(_ path: String, contents: SecretBytes) throws(PrivateFileError) -> Bool {
        let temporary = "\(path).\(getpid()).\(UInt32.random(in: .min ... .max)).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .ioFailure(path: temporary, operation: "create", errno: errno) }
        defer { unlink(temporary) }
        // The mode passed to open is masked by the umask; set it explicitly.
        guard fchmod(descriptor, 0o600) == 0 else {
            let code = errno
            close(descriptor)
            throw .ioFailure(path: temporary, operation: "chmod", errno: code)
        }
        let written: Int = contents.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let result = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if result < 0, errno == EINTR { continue }
                guard result > 0 else { return -1 }
                offset += result
            }
            return offset
        }
        guard written == contents.count, fsync(descriptor) == 0 else {
            let code = errno
            close(descriptor)
            throw .ioFailure(path: temporary, operation: "write", errno: code)
        }
        close(descriptor)
        if link(temporary, path) != 0 {
            if errno == EEXIST { return false }
            throw .ioFailure(path: path, operation: "link", errno: errno)
        }
        syncDirectory(parentPath(of: path))
        return true
    }

    /// Reads a small owner-only file (a sealed state file, the pins file) of at most `limit` bytes; nil if it does not
    /// exist. Refuses what ``readSecret(_:count:)`` refuses: another owner, group or other access, a link.
    static func readSmall(_ path: String, limit: Int) throws(PrivateFileError) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw .ioFailure(path: path, operation: "open", errno: errno)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw .ioFailure(path: path, operation: "stat", errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw .wrongFileType(path: path, expected: "regular file") }
        guard info.st_uid == geteuid() else { throw .notOwned(path: path, owner: info.st_uid) }
        guard info.st_mode & 0o077 == 0 else {
            throw .insecurePermissions(path: path, mode: UInt32(info.st_mode), directory: false)
        }
        guard Int(info.st_size) <= limit else { throw .malformedFile(path: path, reason: "it is larger than \(limit) bytes") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < bytes.count {
            let got = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else {
                throw got == 0 ? .malformedFile(path: path, reason: "it ended early") : .ioFailure(path: path, operation: "read", errno: errno)
            }
            offset += got
        }
        return bytes
    }

    /// Replaces `path` with `contents`, mode 0600, atomically: written and synced to a temporary file, renamed over the
    /// old one, and the directory synced, so a reader sees the old file or the new one and never a mix.
    static func replaceAtomically(_ path: String, contents: [UInt8]) throws(PrivateFileError) {
        let temporary = "\(path).\(getpid()).\(UInt32.random(in: .min ... .max)).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .ioFailure(path: temporary, operation: "create", errno: errno) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        guard fchmod(descriptor, 0o600) == 0 else {
            let code = errno
            close(descriptor)
            throw .ioFailure(path: temporary, operation: "chmod", errno: code)
        }
        let written: Int = contents.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let result = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if result < 0, errno == EINTR { continue }
                guard result > 0 else { return -1 }
                offset += result
            }
            return offset
        }
        guard written == contents.count, fsync(descriptor) == 0 else {
            let code = errno
            close(descriptor)
            throw .ioFailure(path: temporary, operation: "write", errno: code)
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else { throw .ioFailure(path: path, operation: "rename", errno: errno) }
        renamed = true
        syncDirectory(parentPath(of: path))
    }

    /// Applies mode 0600 to a file that exists (the database and its WAL, which SQLite creates with the umask's mode).
    static func restrict(_ path: String) {
        _ = chmod(path, 0o600)
    }

    static func parentPath(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    private static func createParents(_ path: String) throws(PrivateFileError) {
        let parent = parentPath(of: path)
        if parent != path, access(parent, F_OK) != 0 {
            try createParents(parent)
        }
        if mkdir(path, 0o755) != 0, errno != EEXIST {
            throw .ioFailure(path: path, operation: "mkdir", errno: errno)
        }
    }

    private static func syncDirectory(_ path: String) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }
}
