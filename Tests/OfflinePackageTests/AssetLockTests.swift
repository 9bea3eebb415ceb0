import Foundation
import OfflinePackage
import StowageCore
import StowageTestSupport
import Testing

/// The per-asset lock that keeps two tasks (in one process or two) off the same package.
struct AssetLockTests {
    static func dataDirectory() throws -> DataDirectory {
        let directory = DataDirectory(url: FileManager.default.temporaryDirectory.appendingPathComponent("asset-lock-\(UUID().uuidString)"))
        try directory.prepare()
        return directory
    }

    @Test func aFileWhereTheLocksFolderGoesIsAnErrorInWords() throws {
        let directory = try Self.dataDirectory()
        defer { try? FileManager.default.removeItem(at: directory.url) }
        try Data().write(to: AssetLock.directory(in: directory))
        let error = #expect(throws: PackageError.self) { try AssetLock.acquire(assetId: "movie-1", in: directory, purpose: "a download") }
        #expect(error?.code == "package_io_error")
        #expect(error?.description.contains("Error(") == false, "\(String(describing: error))")
    }

    @Test func aSecondHoldIsRefusedNamingTheHolderUntilTheFirstIsReleased() throws {
        let directory = try Self.dataDirectory()
        defer { try? FileManager.default.removeItem(at: directory.url) }
        let first = try AssetLock.acquire(assetId: "movie-1", in: directory, purpose: "a download")
        #expect(AssetLock.isHeld(assetId: "movie-1", in: directory))
        #expect(!AssetLock.isHeld(assetId: "movie-2", in: directory))
        do {
            _ = try AssetLock.acquire(assetId: "movie-1", in: directory, purpose: "a deletion")
            Issue.record("a second hold was granted")
        } catch {
            #expect(error.code == "asset_busy")
            #expect(error.message.contains("process \(getpid()) (a download)"), "\(error.message)")
            #expect(error.subject.assetId == "movie-1")
        }
        first.release()
        first.release()  // idempotent
        let second = try AssetLock.acquire(assetId: "movie-1", in: directory, purpose: "a deletion")
        second.release()
        #expect(!AssetLock.isHeld(assetId: "movie-1", in: directory))
    }

    /// A child being spawned holds a copy of a just-released lock's descriptor (and so its flock) until it closes
    /// it before exec; the released file is empty. An acquire then waits that out instead of calling the asset busy,
    /// but an empty file held for longer is still busy.
    @Test func aReleasedLockStillHeldByASpawningChildIsWaitedFor() throws {
        let directory = try Self.dataDirectory()
        defer { try? FileManager.default.removeItem(at: directory.url) }
        try FileManager.default.createDirectory(at: AssetLock.directory(in: directory), withIntermediateDirectories: true)
        let path = AssetLock.directory(in: directory).appendingPathComponent("movie-1.lock").path
        // The child's copy: another open file description holding the flock on an empty file.
        let copy = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(copy >= 0 && flock(copy, LOCK_EX | LOCK_NB) == 0)
        // A thread of its own: the acquire below blocks this one, and the cooperative pool may be busy elsewhere.
        Thread.detachNewThread {
            usleep(40_000)
            close(copy)
        }
        let lock = try AssetLock.acquire(assetId: "movie-1", in: directory, purpose: "a download")
        lock.release()

        let stuck = open(path, O_RDWR | O_CLOEXEC)
        defer { close(stuck) }
        try #require(stuck >= 0 && flock(stuck, LOCK_EX | LOCK_NB) == 0)
        #expect(throws: PackageError.self) { try AssetLock.acquire(assetId: "movie-1", in: directory, purpose: "a download") }
    }

    @Test func aLockIsDroppedWhenItsHolderGoesAway() throws {
        let directory = try Self.dataDirectory()
        defer { try? FileManager.default.removeItem(at: directory.url) }
        do {
            _ = try AssetLock.acquire(assetId: "movie-1", in: directory, purpose: "a download")
        }
        #expect(!AssetLock.isHeld(assetId: "movie-1", in: directory))
    }

    /// Another process holding the file with util-linux's flock(1), then killed: busy while it lives, free after.
    /// Like a Stowage holder, it is named in the file (a holder writes `process PID (purpose)` once it has the lock).
    @Test func anotherProcessesHoldIsSeenAndEndsWithIt() async throws {
        let directory = try Self.dataDirectory()
        defer { try? FileManager.default.removeItem(at: directory.url) }
        try FileManager.default.createDirectory(at: AssetLock.directory(in: directory), withIntermediateDirectories: true)
        let file = AssetLock.directory(in: directory).appendingPathComponent("movie-1.lock").path
        // The holder names itself once it has the lock, as a Stowage holder does. Written for it before it had the
        // lock, the name was erased when a probe took the still-free lock first (a probe empties the file it lets
        // go), and the lock was then never seen held (a full run, 2026-11-27).
        let holding = ["sh", "-c", "printf 'process %s (a download)' $$ > \"$0\"; exec sleep 30", file]
        // flock(1) has, on rare full-suite runs, died before taking the lock (no output; a stray signal from elsewhere
        // in the suite is suspected): start another rather than fail on something this test does not check.
        var holder = try ProcessRunner.start(URL(fileURLWithPath: "/usr/bin/flock"), [file] + holding)
        var held = false
        var deaths: [String] = []
        for _ in 0..<750 where !held {  // until flock(1) has the lock (up to 15 s on a loaded machine)
            held = AssetLock.isHeld(assetId: "movie-1", in: directory)
            if !held, !holder.isRunning, deaths.count < 3 {
                deaths.append("status \(try await holder.waitForExit(timeout: .seconds(5)).status)")
                holder = try ProcessRunner.start(URL(fileURLWithPath: "/usr/bin/flock"), [file] + holding)
            }
            if !held { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(held, "flock(1) running: \(holder.isRunning); earlier holders ended: \(deaths)")
        // flock(1) and the command it runs with the lock (which inherits the locked descriptor and is the one named).
        holder.killProcessGroup()
        _ = try await holder.waitForExit(timeout: .seconds(10))
        // flock(1) is reaped; the command it ran (also killed) may close the locked descriptor a moment later, on a loaded
        // machine (a full run, 2026-12-07): the lock must be seen free once both are gone, within a bounded wait.
        var freed = false
        for _ in 0..<250 where !freed {
            freed = !AssetLock.isHeld(assetId: "movie-1", in: directory)
            if !freed { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(freed, "the lock was still held 5 s after its holders were killed")
    }

    /// A player polls `isHeld` while it waits; a free lock whose file is empty (released) or names a process that is
    /// gone (killed holder) is reported free without being taken, so the poll never makes a starting download busy.
    @Test func aFreeLockIsSeenWithoutTakingIt() throws {
        let directory = try Self.dataDirectory()
        defer { try? FileManager.default.removeItem(at: directory.url) }
        try FileManager.default.createDirectory(at: AssetLock.directory(in: directory), withIntermediateDirectories: true)
        let file = AssetLock.directory(in: directory).appendingPathComponent("movie-1.lock")
        // This process holds the lock, but the file names a process that is gone: trusted, no probe.
        let held = try AssetLock.acquire(assetId: "movie-1", in: directory, purpose: "a download")
        try Data("process 2147483646 (a download)".utf8).write(to: file)
        #expect(!AssetLock.isHeld(assetId: "movie-1", in: directory))
        // Named again (a live process): probed, and busy.
        try Data("process \(getpid()) (a download)".utf8).write(to: file)
        #expect(AssetLock.isHeld(assetId: "movie-1", in: directory))
        held.release()
        #expect(try Data(contentsOf: file).isEmpty)
        #expect(!AssetLock.isHeld(assetId: "movie-1", in: directory))
    }

    @Test func assetIDsThatAreNotNamesAreRefused() throws {
        let directory = try Self.dataDirectory()
        defer { try? FileManager.default.removeItem(at: directory.url) }
        #expect(throws: PackageError.invalidAssetID("../x")) { try AssetLock.acquire(assetId: "../x", in: directory, purpose: "a download") }
    }
}
