#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Times and durations as messages show them to people: `2026-11-25 14:02 UTC`, `3 h 20 min`, never raw Unix
/// seconds (the JSON forms keep the numbers).
public enum HumanTime {
    /// `2026-11-25 14:02 UTC` for whole seconds since the Unix epoch.
    public static func date(_ time: Int64) -> String {
        var seconds = time_t(clamping: time)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "\(time) s after 1970-01-01 UTC" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour)):\(two(parts.tm_min)) UTC"
    }

    /// `2026-11-25 14:02:07 UTC`: a moment to the second (the wall clock of a recorded broadcast).
    public static func instant(_ time: Double) -> String {
        var seconds = time_t(clamping: Int64(time.rounded(.down)))
        var parts = tm()
        guard time.isFinite, gmtime_r(&seconds, &parts) != nil else { return "\(time) s after 1970-01-01 UTC" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) UTC"
    }

    /// A duration in its two largest units: `2 d 4 h`, `3 h 20 min`, `45 s`.
    public static func duration(_ seconds: Int64) -> String {
        let value = max(0, seconds)
        let units: [(Int64, String)] = [(86_400, "d"), (3_600, "h"), (60, "min"), (1, "s")]
        var parts: [String] = []
        var rest = value
        for (size, name) in units where parts.count < 2 {
            let count = rest / size
            if count > 0 || (size == 1 && parts.isEmpty) {
                parts.append("\(count) \(name)")
                rest -= count * size
            } else if !parts.isEmpty {
                break
            }
        }
        return parts.joined(separator: " ")
    }
}

extension HumanTime {
    /// `in 3 h 20 min` or `3 h 20 min ago` for `time` seen from `now`; `now` when they are equal.
    public static func relative(_ time: Int64, from now: Int64) -> String {
        if time == now { return "now" }
        return time > now ? "in \(duration(time - now))" : "\(duration(now - time)) ago"
    }
}
