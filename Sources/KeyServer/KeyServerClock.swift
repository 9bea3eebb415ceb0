import Foundation

/// Where the key server reads the time: leases, token expiry, the replay window, rate limits and the audit log all take
/// it from here, so tests can move time (the way swift-certificates' `ExpiryPolicy` takes a fixed validation time).
///
/// ```swift
/// let server = try KeyServerApplication(dataDirectory: directory, clock: .system)
/// let frozen = KeyServerClock { 1_763_700_000 }
/// ```
public struct KeyServerClock: Sendable {
    private let read: @Sendable () -> Double

    /// A clock that reads `read()`, in seconds since the Unix epoch (fractions used only by the rate limiter).
    public init(_ read: @escaping @Sendable () -> Double) {
        self.read = read
    }

    /// The system's wall clock.
    public static let system = KeyServerClock { Date().timeIntervalSince1970 }

    /// The current time in whole seconds since the Unix epoch, as the protocol writes times.
    public var now: Int64 { Int64(read().rounded(.down)) }

    /// The current time with its fraction, for token-bucket refills.
    public var preciseNow: Double { read() }
}
