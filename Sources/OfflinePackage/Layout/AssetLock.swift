public import Foundation
import StowageCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One task's exclusive hold on one asset, across processes: a download holds it while it runs; cancel and delete
/// take it before they remove anything, so two processes never write (or remove) the same package at once.
///
/// It is an `flock(2)` on `DATA/locks/ASSET_ID.lock`: the kernel drops it when the holder exits, killed or not, so a
/// crash never leaves an asset locked. The file names the holder (process ID and what it does) for the error another
/// process gets. Two holds in one process conflict too (each opens the file anew).
///
/// ```swift
/// let lock = try AssetLock.acquire(assetId: "movie-1", in: dataDirectory, purpose: "a download")
/// defer { lock.release() }
/// ```
public final class AssetLock: Sendable {
    public let assetId: String
    private let descriptor: Mutex<Int32?>

    private init(assetId: String, descriptor: Int32) {
        self.assetId = assetId
        self.descriptor = Mutex(descriptor)
    }

    /// Where the lock files live.
    public static func directory(in dataDirectory: DataDirectory) -> URL {
        dataDirectory.url.appendingPathComponent("locks", isDirectory: true)
    }

    /// Takes the asset's lock without waiting.
    /// - Parameter purpose: what the holder does, for the message another process gets ("a download").
    /// - Throws: ``PackageError/busy(assetId:holder:)`` when another task holds it; ``PackageError/invalidAssetID(_:)``;
    ///   ``PackageError/io(_:_:)`` when the lock file cannot be opened.
    public static func acquire(assetId: String, in dataDirectory: DataDirectory, purpose: String) throws(PackageError) -> AssetLock {
        _ = try PackageDirectory(assetId: assetId, in: dataDirectory)  // validates the ID: it names a file below
        let folder = directory(in: dataDirectory)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .io(folder.path, FileErrorText.describe(error))
        }
        let attempt = try tryAcquire(file: folder.appendingPathComponent("\(assetId).lock"), name: assetId, purpose: purpose)
        guard let lock = attempt.lock else { throw .busy(assetId: assetId, holder: attempt.holder ?? "another task") }
        return lock
    }

    /// Takes the lock of any file without waiting (the download service's `service.lock`, one running service).
    /// - Returns: the lock, or nil and what the holder wrote (`process 1234 (the download service)`).
    /// - Throws: ``PackageError/io(_:_:)`` when the file cannot be opened.
    public static func tryAcquire(file: URL, name: String, purpose: String) throws(PackageError) -> (lock: AssetLock?, holder: String?) {
        let path = file.path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io(path, String(cString: strerror(errno))) }
        // A child being spawned by any thread of this process holds copies of every descriptor until it closes them
        // (before its exec), and with them the flock of a lock just released here. A released file is empty, so a
        // refusal with an empty file is retried for up to a second (a loaded machine can take that long to run the
        // child); a holder names itself within microseconds of taking the lock.
        let deadline = ContinuousClock.now + .seconds(1)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            let holder = Self.holder(fd)
            if code == EWOULDBLOCK, holder == nil, ContinuousClock.now < deadline {
                usleep(2_000)
                continue
            }
            close(fd)
            guard code == EWOULDBLOCK else { throw .io(path, String(cString: strerror(code))) }
            return (nil, holder)
        }
        let text = "process \(getpid()) (\(purpose))"
        _ = ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        return (AssetLock(assetId: name, descriptor: fd), nil)
    }

    /// Whether a task holds the asset now.
    ///
    /// A player polls this while it waits for a file, so it takes the lock (and could make a `resume` starting at
    /// that instant fail as busy) only when it must: a holder truncates the file when it lets go, and a holder that
    /// was killed named a process that no longer runs, so an empty file or a dead process means free without a
    /// probe. Otherwise (a live process named: the holder, or a reused process ID) the lock is taken and dropped.
    public static func isHeld(assetId: String, in dataDirectory: DataDirectory) -> Bool {
        guard PackageDirectory.isValidAssetID(assetId) else { return false }
        return currentHolder(of: directory(in: dataDirectory).appendingPathComponent("\(assetId).lock"), name: assetId) != nil
    }

    /// What holds the lock file `file` now (what it wrote: `process 1234 (the download service)`), or nil when nothing
    /// does: the file is missing or empty (its holder let go), names a process that no longer runs (its holder was
    /// killed), or its lock can be taken (a reused process ID), in which case it is taken and dropped at once.
    public static func currentHolder(of file: URL, name: String) -> String? {
        guard let data = FileManager.default.contents(atPath: file.path) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let pid = holderProcess(text), pid > 0 else { return nil }
        if kill(pid, 0) != 0 && errno == ESRCH { return nil }
        guard let attempt = try? tryAcquire(file: file, name: name, purpose: "a probe") else { return nil }
        guard let lock = attempt.lock else { return attempt.holder ?? text }
        lock.release()
        return nil
    }

    /// Gives the asset up. Idempotent; also done when the lock is released from memory.
    public func release() {
        let fd = descriptor.withLock { fd -> Int32? in
            defer { fd = nil }
            return fd
        }
        guard let fd else { return }
        _ = ftruncate(fd, 0)
        close(fd)  // drops the flock
    }

    deinit { release() }

    /// The process ID in a holder's text (`process 1234 (a download)`).
    static func holderProcess(_ text: String) -> pid_t? {
        guard text.hasPrefix("process ") else { return nil }
        return pid_t(text.dropFirst("process ".count).prefix { $0.isNumber })
    }

    /// What the holder wrote into the file.
    private static func holder(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = pread(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
