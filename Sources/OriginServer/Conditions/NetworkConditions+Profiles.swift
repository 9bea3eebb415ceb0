extension NetworkConditions {
    /// The names ``profile(named:)`` knows, from the best link to the worst.
    public static let profileNames: [String] = ["lan", "wifi", "3g", "edge", "lossy", "very-bad"]

    /// A named link profile, in the spirit of Network Link Conditioner's presets.
    ///
    /// | name | bandwidth | latency | faults |
    /// | --- | --- | --- | --- |
    /// | `lan` | unlimited | 1 ms | none |
    /// | `wifi` | 5 MB/s | 10 ms | none |
    /// | `3g` | 200 kB/s | 100 ms | 1% errors |
    /// | `edge` | 30 kB/s | 300 ms | 2% errors, 1% resets |
    /// | `lossy` | 2 MB/s | 50 ms | 5% errors, 5% resets, 5% truncations |
    /// | `very-bad` | 50 kB/s | 500 ms | 10% each of errors, resets, truncations and 3 s stalls |
    ///
    /// The slow profiles take minutes over a few megabytes; tests pair them with ``scaled(bandwidth:)`` and
    /// ``scaled(time:)``.
    /// - Parameter name: one of ``profileNames``, in any letter case; `very_bad` is accepted for `very-bad`.
    /// - Returns: the profile, or `nil` for an unknown name.
    public static func profile(named name: String) -> NetworkConditions? {
        switch String(name.lowercased().map { $0 == "_" ? "-" : $0 }) {
        case "lan":
            NetworkConditions(latencyMilliseconds: 1)
        case "wifi":
            NetworkConditions(bandwidthBytesPerSecond: 5_000_000, latencyMilliseconds: 10)
        case "3g":
            NetworkConditions(bandwidthBytesPerSecond: 200_000, latencyMilliseconds: 100, errorRate: 0.01)
        case "edge":
            NetworkConditions(bandwidthBytesPerSecond: 30_000, latencyMilliseconds: 300, errorRate: 0.02, resetRate: 0.01)
        case "lossy":
            NetworkConditions(
                bandwidthBytesPerSecond: 2_000_000,
                latencyMilliseconds: 50,
                errorRate: 0.05,
                resetRate: 0.05,
                truncateRate: 0.05
            )
        case "very-bad":
            NetworkConditions(
                bandwidthBytesPerSecond: 50_000,
                latencyMilliseconds: 500,
                errorRate: 0.1,
                resetRate: 0.1,
                truncateRate: 0.1,
                stallRate: 0.1,
                stallMilliseconds: 3000
            )
        default:
            nil
        }
    }
}
