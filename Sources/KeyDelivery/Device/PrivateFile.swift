import StowageCore
package import StowageCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files only their owner may read, in a directory only its owner may enter: the device's private keys and the
/// key store's secret (docs/key-protocol.md, "Device identity"; docs/design.md, "State on disk").
///
/// Reading refuses a file open to group or others, or owned by another user, the way ssh refuses a loose private
/// key: a key that others could have copied is not a secret any more. Creating never replaces an existing file
/// (`link(2)` from a fully written temporary file), so two processes starting at once end up with the same key.
///
/// `package` access: the key server keeps its own secrets (signing key, master key, token secret) with the same code.
package enum PrivateFile {
    /// Creates `path` with mode 0700 (and missing parents) if it does not exist; refuses an existing directory that is
    /// open to group or others or owned by someone else.
    package static func prepareDirectory(_ path: String) throws(PrivateFileError) {
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
    package static func readSecret(_ path: String, count: Int) throws(PrivateFileError) -> SecretBytes? {
        guard let (descriptor, size) = try openOwnerOnly(path) else { return nil }
        defer { close(descriptor) }
        guard size == count else { throw .malformedFile(path: path, reason: "it has \(size) bytes instead of \(count)") }
        do {
            return try SecretBytes(count: count) { buffer in try readFully(descriptor, into: buffer, path: path) }
        } catch let error as PrivateFileError {
            throw error
        } catch {
            throw .ioFailure(path: path, operation: "read", errno: EIO)
        }
    }

    /// Reads a secret file of 1 to `maximumCount` bytes straight into zeroizing memory; nil if it does not exist.
    package static func readSecret(_ path: String, maximumCount: Int) throws(PrivateFileError) -> SecretBytes? {
        guard let (descriptor, size) = try openOwnerOnly(path) else { return nil }
        defer { close(descriptor) }
        guard size > 0, size <= maximumCount else {
            throw .malformedFile(path: path, reason: "it has \(size) bytes, expected 1 to \(maximumCount)")
        }
        do {
            return try SecretBytes(count: size) { buffer in try readFully(descriptor, into: buffer, path: path) }
        } catch let error as PrivateFileError {
            throw error
        } catch {
            throw .ioFailure(path: path, operation: "read", errno: EIO)
        }
    }

    /// Reads a small owner-only file (a sealed state file, the pins file) of at most `limit` bytes; nil if it does not
    /// exist. Refuses what ``readSecret(_:count:)`` refuses: another owner, group or other access, a link.
    package static func readSmall(_ path: String, limit: Int) throws(PrivateFileError) -> [UInt8]? {
        try readSmall(path, limit: limit) { _ in () }?.bytes
    }

    /// ``readSmall(_:limit:)``, with what `inspect` learns from the open descriptor of the very file read (its change
    /// time from the kernel, say), so the two cannot be of different files.
    package static func readSmall<Inspection>(
        _ path: String,
        limit: Int,
        inspecting inspect: (Int32) -> Inspection
    ) throws(PrivateFileError) -> (bytes: [UInt8], inspection: Inspection)? {
        guard let (descriptor, size) = try openOwnerOnly(path) else { return nil }
        defer { close(descriptor) }
        guard size <= limit else { throw .malformedFile(path: path, reason: "it is larger than \(limit) bytes") }
        var bytes = [UInt8](repeating: 0, count: size)
        try bytes.withUnsafeMutableBytes { buffer in Result { () throws(PrivateFileError) in try readFully(descriptor, into: buffer, path: path) } }
            .get()
        return (bytes, inspect(descriptor))
    }

    /// Opens `path` for reading, refusing a link, anything but a regular file, another owner and any access by group or
    /// others (the way ssh refuses a loose private key). Nil if it does not exist; else the descriptor and the size.
    private static func openOwnerOnly(_ path: String) throws(PrivateFileError) -> (Int32, Int)? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw .ioFailure(path: path, operation: "open", errno: errno)
        }
        var info = stat()
        let problem: PrivateFileError? =
            if fstat(descriptor, &info) != 0 {
                .ioFailure(path: path, operation: "stat", errno: errno)
            } else if (info.st_mode & S_IFMT) != S_IFREG {
                .wrongFileType(path: path, expected: "regular file")
            } else if info.st_uid != geteuid() {
                .notOwned(path: path, owner: info.st_uid)
            } else if info.st_mode & 0o077 != 0 {
                .insecurePermissions(path: path, mode: UInt32(info.st_mode), directory: false)
            } else {
                nil
            }
        if let problem {
            close(descriptor)
            throw problem
        }
        return (descriptor, Int(info.st_size))
    }

    /// Reads exactly `buffer.count` bytes.
    private static func readFully(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String) throws(PrivateFileError) {
        var offset = 0
        while offset < buffer.count {
            let got = read(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if got < 0, errno == EINTR { continue }
            guard got > 0 else {
                throw got == 0 ? .malformedFile(path: path, reason: "it ended early") : .ioFailure(path: path, operation: "read", errno: errno)
            }
            offset += got
        }
    }

    /// Writes `contents` to `path` with mode 0600 unless the file exists. The bytes are written and synced to a
    /// temporary file first and then linked into place (``AtomicFile/commitIfAbsent(durable:)``), so `path` never exists
    /// half-written.
    ///
    /// - Returns: false if `path` already existed (another process won the race); the caller reads it then.
    @discardableResult
    package static func createExclusively(_ path: String, contents: SecretBytes) throws(PrivateFileError) -> Bool {
        do {
            let file = try AtomicFile(replacing: path, permissions: 0o600, exactly: true)
            // Straight from the zeroizing buffer: no copy of the secret is made.
            try contents.withUnsafeBytes { bytes in Result { () throws(AtomicFile.Failure) in try file.write(bytes) } }.get()
            return try file.commitIfAbsent()
        } catch {
            throw .ioFailure(path: error.path, operation: error.operation, errno: error.errorNumber)
        }
    }

    /// Replaces `path` with `contents`, mode 0600, atomically (``AtomicFile``): a reader sees the old file or the new one
    /// and never a mix.
    package static func replaceAtomically(_ path: String, contents: [UInt8]) throws(PrivateFileError) {
        do {
            try contents.withUnsafeBytes { bytes in
                Result { () throws(AtomicFile.Failure) in try AtomicFile.replace(path, with: bytes, permissions: 0o600, exactly: true) }
            }.get()
        } catch {
            throw .ioFailure(path: error.path, operation: error.operation, errno: error.errorNumber)
        }
    }

    /// Applies mode 0600 to a file that exists (the database and its WAL, which SQLite creates with the umask's mode).
    package static func restrict(_ path: String) {
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
}
