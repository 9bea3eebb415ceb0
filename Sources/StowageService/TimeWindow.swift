public import Foundation
public import StowageCore

/// The hours downloads may run, local time: `01:00-06:00`, or across midnight `22:00-06:00`.
public struct TimeWindow: Sendable, Hashable, CustomStringConvertible {
    /// Minutes after midnight.
    public let start: Int
    public let end: Int

    /// Parses `HH:MM-HH:MM`.
    /// - Throws: ``ServiceSetupError`` `invalid_time_window`.
    public init(parsing text: String) throws(ServiceSetupError) {
        let parts = text.split(separator: "-")
        guard parts.count == 2, let start = Self.minutes(parts[0]), let end = Self.minutes(parts[1]), start != end else {
            throw ServiceSetupError(
                code: .invalidTimeWindow,
                message: "'\(text)' is not a time window: give local hours as HH:MM-HH:MM, e.g. 01:00-06:00 or 22:00-06:00"
            )
        }
        self.start = start
        self.end = end
    }

    private static func minutes(_ text: Substring) -> Int? {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let hours = Int(parts[0]), let minutes = Int(parts[1]), (0..<24).contains(hours), (0..<60).contains(minutes)
        else { return nil }
        return hours * 60 + minutes
    }

    /// Whether `date` falls inside the window in `timeZone`.
    public func contains(_ date: Date, timeZone: TimeZone = .current) -> Bool {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        let now = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        return start < end ? (start <= now && now < end) : (now >= start || now < end)
    }

    public var description: String { "\(Self.text(start))-\(Self.text(end))" }

    static func text(_ minutes: Int) -> String { String(format: "%02d:%02d", minutes / 60, minutes % 60) }

    /// The error a download stopped outside the window carries.
    var closedReason: String {
        "downloads run only between \(Self.text(start)) and \(Self.text(end)) local time (the service's --window); it continues at \(Self.text(start))"
    }
}

/// A rate or size with a unit, as curl's `--limit-rate` writes them: `500K`, `5M`, `1G` (powers of 1024), or bytes.
public enum ByteQuantity {
    /// Parses `5M`, `500k`, `1.5G`, `1048576`.
    /// - Throws: ``ServiceSetupError`` `invalid_quantity` naming `option`.
    public static func parse(_ text: String, option: String) throws(ServiceSetupError) -> Int64 {
        let units: [Character: Double] = ["k": 1024, "m": 1024 * 1024, "g": 1024 * 1024 * 1024]
        var number = text.trimmingCharacters(in: .whitespaces)
        var multiplier = 1.0
        if let last = number.last?.lowercased().first, let unit = units[last] {
            multiplier = unit
            number.removeLast()
        }
        guard let value = Double(number), value > 0, value.isFinite, value * multiplier < 1e15 else {
            throw ServiceSetupError(
                code: .invalidQuantity,
                message: "\(option) takes a positive size such as 500K, 5M or 1G (powers of 1024), not '\(text)'"
            )
        }
        return Int64(value * multiplier)
    }
}

/// A service option or file it cannot use.
public struct ServiceSetupError: StowageError, Hashable {
    public let code: ErrorCode
    public let message: String

    public init(code: ErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
