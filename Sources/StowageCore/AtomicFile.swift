#if canImport(Glibc)
import Glibc
#endif

/// A file replaced all at once: the new contents go to a temporary file beside it (a unique hidden name, created
/// exclusively, never through a link), which is synced, renamed over the file and its directory synced, so a reader,
/// or the same program after a crash, sees the old file or the new one and never a mix. Every writer of a file that
/// must not be seen half-written goes through it: manifests and local playlists, the key store's private files,
/// decrypted playlists and segments.
///
/// ```swift
/// let file = try AtomicFile(replacing: "/data/packages/movie/manifest.json")
/// try file.write(bytes)          // as many times as needed
/// try file.commit()              // or nothing: an uncommitted file is removed when it goes away
/// ```
public final class AtomicFile {
    /// A system call that failed, on which file, with its `errno`.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// What was being done: `create`, `chmod`, `write`, `sync`, `rename`, `link`.
        public let operation: String
        /// The file it was done to: the temporary file, or the file being replaced.
        public let path: String
        public let errorNumber: Int32

        /// The C library's words for the error, e.g. "No space left on device".
        public var reason: String { String(cString: strerror(errorNumber)) }
        public var description: String { "cannot \(operation) \(path): \(reason)" }
    }

    /// The file being replaced.
    public let path: String
    /// The temporary file the contents go to until ``commit(durable:)``.
    public let temporaryPath: String
    /// The temporary file's descriptor, for writers that write themselves.
    public let descriptor: Int32
    private var open = true
    private var committed = false

    /// Creates the temporary file beside `path` (whose folder must exist).
    /// - Parameters:
    ///   - permissions: the new file's mode; the umask applies unless `exactly` is true (a private file is 0600 under
    ///     any umask).
    public init(replacing path: String, permissions: UInt32 = 0o644, exactly: Bool = false) throws(Failure) {
        self.path = path
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        temporaryPath = "\(folder).\(name).\(getpid()).\(UInt32.random(in: .min ... .max)).tmp"
        descriptor = Glibc.open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(permissions))
        guard descriptor >= 0 else { throw Failure(operation: "create", path: temporaryPath, errorNumber: errno) }
        if exactly, fchmod(descriptor, mode_t(permissions)) != 0 {
            let code = errno
            discard()
            throw Failure(operation: "chmod", path: temporaryPath, errorNumber: code)
        }
    }

    deinit { discard() }

    /// Writes all of `bytes` (a write interrupted by a signal is resumed).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            let count = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw Failure(operation: "write", path: temporaryPath, errorNumber: count == 0 ? EIO : errno) }
            offset += count
        }
    }

    /// Writes all of `bytes`.
    public func write(_ bytes: some Sequence<UInt8>) throws(Failure) {
        let array = Array(bytes)
        try array.withUnsafeBytes { raw in Result { () throws(Failure) in try write(raw) } }.get()
    }

    /// Puts the new contents in place of the file: synced first (when `durable`), renamed over it, and the folder
    /// synced so that the rename itself survives a crash. On failure the temporary file is removed and the file is
    /// as it was.
    public func commit(durable: Bool = true) throws(Failure) {
        try finish(durable: durable)
        guard rename(temporaryPath, path) == 0 else {
            let code = errno
            discard()
            throw Failure(operation: "rename", path: path, errorNumber: code)
        }
        committed = true
        if durable { Self.syncFolder(of: path) }
    }

    /// Puts the new contents in place only if no file is there yet (a hard link, which never replaces): true when
    /// this call created the file, false when another was there first. The temporary file is removed either way.
    public func commitIfAbsent(durable: Bool = true) throws(Failure) -> Bool {
        try finish(durable: durable)
        defer { discard() }
        guard link(temporaryPath, path) == 0 else {
            if errno == EEXIST { return false }
            throw Failure(operation: "link", path: path, errorNumber: errno)
        }
        if durable { Self.syncFolder(of: path) }
        return true
    }

    /// Closes and removes the temporary file, unless it was committed; the file being replaced is left as it is.
    public func discard() {
        closeDescriptor()
        if !committed {
            unlink(temporaryPath)
            committed = true
        }
    }

    /// Replaces `path` with `bytes` in one call.
    public static func replace(
        _ path: String,
        with bytes: UnsafeRawBufferPointer,
        permissions: UInt32 = 0o644,
        exactly: Bool = false,
        durable: Bool = true
    ) throws(Failure) {
        let file = try AtomicFile(replacing: path, permissions: permissions, exactly: exactly)
        try file.write(bytes)
        try file.commit(durable: durable)
    }

    /// Removes the temporary files that writers killed before their commit left in `folder`: names of the form
    /// `.NAME.PID.RANDOM.tmp` whose process no longer runs (a live writer's are kept, and so is every other file).
    /// - Returns: how many were removed.
    @discardableResult
    public static func removeLeftovers(in folder: String) -> Int {
        var removed = 0
        for name in DirectoryListing.names(folder) ?? [] where name.hasPrefix(".") && name.hasSuffix(".tmp") {
            let parts = name.dropLast(4).split(separator: ".", omittingEmptySubsequences: false)
            // "", NAME (which may hold dots), PID, RANDOM.
            guard parts.count >= 4, let pid = Int32(parts[parts.count - 2]), pid > 0, UInt32(parts[parts.count - 1]) != nil else { continue }
            guard kill(pid, 0) != 0, errno == ESRCH else { continue }
            let path = folder.hasSuffix("/") ? folder + name : folder + "/" + name
            if unlink(path) == 0 { removed += 1 }
        }
        return removed
    }

    private func finish(durable: Bool) throws(Failure) {
        if durable, fsync(descriptor) != 0 {
            let code = errno
            discard()
            throw Failure(operation: "sync", path: temporaryPath, errorNumber: code)
        }
        closeDescriptor()
    }

    private func closeDescriptor() {
        guard open else { return }
        open = false
        _ = Glibc.close(descriptor)
    }

    private static func syncFolder(of path: String) {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let descriptor = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        _ = Glibc.close(descriptor)
    }
}
