import CKernelTime
import StowageCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The wall clock that lease rules are evaluated against: whole seconds since the Unix epoch (UTC), the unit the
/// key protocol uses for every time (docs/key-protocol.md, "Conventions").
///
/// Lease logic never reads the time itself; callers read a `Clock` once and pass `now` in, so tests move time with
/// ``TestClock`` and rules stay pure functions of their inputs.
///
/// ```swift
/// let clock: any Clock = SystemClock()
/// let evaluation = try store.authorizePlayback(assetId: "movie-1", at: clock.now)
/// ```
public protocol Clock: Sendable {
    /// The current time, whole seconds since the Unix epoch.
    var now: Int64 { get }
}

/// The kernel's real-time clock (`CLOCK_REALTIME`), truncated to whole seconds, read with the `clock_gettime` system
/// call itself rather than through the C library: a library preloaded into the process (libfaketime, any
/// `LD_PRELOAD` time shim) changes what `clock_gettime(3)`, `time(3)` and Foundation's `Date` return, but not this.
/// Setting the kernel's clock needs root, and the time high-water mark catches a clock set back.
public struct SystemClock: Clock {
    public init() {}

    public var now: Int64 { KernelTime.now }
}

/// The kernel's own view of time, read with system calls nothing in the process can interpose, and checks that what
/// the rest of the process sees agrees with it (docs/SECURITY.md, "Time").
public enum KernelTime {
    /// Seconds the sources may differ by before they are called in disagreement: `/proc` counts whole seconds and a
    /// busy machine may pause between two readings.
    public static let tolerance: Int64 = 5

    /// `CLOCK_REALTIME` from the system call itself.
    public static var now: Int64 {
        var time = timespec()
        if stowage_kernel_realtime(&time) == 0 { return Int64(time.tv_sec) }
        // Not reachable on Linux; the C library's clock is the only other source.
        return libraryNow
    }

    /// `CLOCK_REALTIME` as the C library (and whatever was preloaded in front of it) reports it.
    public static var libraryNow: Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec)
    }

    /// The change time (`st_ctime`) of an open file in nanoseconds since 1970, from the `statx` system call itself; nil
    /// when it cannot be read. The kernel sets it from its own clock whenever the file is written, renamed, linked or
    /// has its mode changed, and no unprivileged call on an ordinary file system sets it back; two files put in place
    /// at different moments do not share it.
    public static func changeTimeNanoseconds(of descriptor: Int32) -> Int64? {
        var time = timespec()
        guard stowage_kernel_change_time(descriptor, &time) == 0 else { return nil }
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// ``changeTimeNanoseconds(of:)`` of the file at `path` (opened read-only, links not followed); nil when it cannot
    /// be read.
    public static func changeTimeNanoseconds(atPath path: String) -> Int64? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        return changeTimeNanoseconds(of: descriptor)
    }

    /// The boot time plus the time since boot, both read from `/proc` (`btime` in `/proc/stat`, `/proc/uptime`): a
    /// third reading of the real-time clock that goes through no clock function at all.
    public static var procNow: Int64? {
        guard let stat = readProc("/proc/stat", limit: 1 << 16),
            let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Int64(line.dropFirst(6).filter { !$0.isWhitespace }),
            let uptimeText = readProc("/proc/uptime", limit: 256),
            let uptime = Double(uptimeText.split(separator: " ").first ?? "")
        else { return nil }
        return boot + Int64(uptime)
    }

    /// A sentence saying how the process's clocks disagree with the kernel's, or nil when they agree: the C library's
    /// clock interposed (a time shim preloaded), or `/proc` telling another time than the system call.
    public static func disagreement() -> String? {
        if let interposed = processClockDisagreement() { return interposed }
        let kernel = now
        if let proc = procNow, abs(proc - kernel) > tolerance {
            return "/proc says the time is \(HumanTime.date(proc)) but the kernel's clock reads \(HumanTime.date(kernel))"
        }
        return nil
    }

    /// ``disagreement()`` without `/proc`: the C library's clock against the system call only, cheap enough for every
    /// request a playback server answers.
    public static func processClockDisagreement() -> String? {
        let kernel = now
        let library = libraryNow
        guard abs(library - kernel) > tolerance else { return nil }
        return "this process's clock reads \(HumanTime.date(library)) but the kernel's reads \(HumanTime.date(kernel)): "
            + "something loaded into the process (LD_PRELOAD, libfaketime) is changing the time it sees"
    }

    /// A small file of `/proc`, read whole (at most `limit` bytes); nil when it cannot be opened.
    static func readProc(_ path: String, limit: Int) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: limit)
        var total = 0
        while total < limit {
            let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + total, limit - total) }
            if count <= 0 { break }
            total += count
        }
        return String(decoding: bytes.prefix(total), as: UTF8.self)
    }
}

/// A clock that only moves when told to, for tests and simulations.
///
/// It is a class so that every holder sees the same time, and `Sendable` because its one mutable value sits behind a
/// `Mutex`.
///
/// ```swift
/// let clock = TestClock(now: 1_763_700_000)
/// clock.advance(by: 48 * 3600)
/// ```
public final class TestClock: Clock {
    private let time: Mutex<Int64>

    /// - Parameter now: The starting time, whole seconds since the Unix epoch.
    public init(now: Int64) {
        self.time = Mutex(now)
    }

    public var now: Int64 { time.withLock { $0 } }

    /// Sets the time, forwards or backwards (to simulate a user winding the clock back).
    public func set(_ now: Int64) {
        time.withLock { $0 = now }
    }

    /// Moves the time by `seconds` (negative moves it back).
    public func advance(by seconds: Int64) {
        time.withLock { $0 += seconds }
    }
}
