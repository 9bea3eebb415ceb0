import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The wall clock that lease rules are evaluated against: whole seconds since the Unix epoch (UTC), the unit the
/// key protocol uses for every time (shared/KEY-PROTOCOL.md, "Conventions").
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

/// The machine's real-time clock (`CLOCK_REALTIME`), truncated to whole seconds.
public struct SystemClock: Clock {
    public init() {}

    public var now: Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec)
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
