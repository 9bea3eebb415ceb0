public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A log in the W3C Extended Log File Format (https://www.w3.org/TR/WD-logfile.html): `#Version`, `#Fields` and
/// `#Date` directives, then one space-separated line per entry, `-` for a missing value.
///
/// Appends are single `write(2)` calls on an `O_APPEND` descriptor, so concurrent writers (a download and a playback
/// session, two processes) interleave whole lines. The header is written when the file is new or was written with
/// other fields; a `#Date` directive starts each process's run. Values are made safe for the format: spaces and
/// control characters are percent-encoded and quotes doubled inside quoted fields.
public final class ExtendedLogFile: @unchecked Sendable {
    /// Fields of the access log written by downloads and playback.
    public static let accessFields = [
        "date", "time", "cs-method", "cs-uri", "sc-status", "sc-bytes", "time-taken", "x-retries", "x-rendition", "x-throughput",
    ]
    /// Fields of the error log.
    public static let errorFields = ["date", "time", "cs-uri", "x-error-domain", "x-error-code", "x-comment"]

    public let url: URL
    public let fields: [String]
    private let fd: Int32
    private let lock = NSLock()

    /// Opens (creating if needed) the log at `url` for `fields`, writing the directives.
    public init(url: URL, fields: [String], software: String = "stowage", now: Date = Date()) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let fd = open(url.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        self.url = url
        self.fields = fields
        self.fd = fd
        var info = stat()
        let isEmpty = fstat(fd, &info) == 0 && info.st_size == 0
        var header = ""
        if isEmpty || Self.lastFields(of: url) != fields {
            header += "#Version: 1.0\n#Software: \(software)\n#Fields: \(fields.joined(separator: " "))\n"
        }
        header += "#Date: \(Self.dateTime(now))\n"
        append(header)
    }

    deinit { close(fd) }

    /// Appends one entry; `values` are matched to ``fields`` by name, missing ones written as `-`.
    public func write(_ values: [String: String], at date: Date = Date()) {
        let stamp = Self.dateTime(date).split(separator: " ")
        let line = fields.map { field -> String in
            switch field {
            case "date": String(stamp[0])
            case "time": String(stamp[1])
            default: Self.escape(values[field])
            }
        }
        append(line.joined(separator: " ") + "\n")
    }

    private func append(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return  // a log that cannot be written never stops a download or a player
                }
                offset += written
            }
        }
    }

    /// `YYYY-MM-DD HH:MM:SS.sss` in UTC, as the format prescribes.
    static func dateTime(_ date: Date) -> String {
        let total = Int64((date.timeIntervalSince1970 * 1000).rounded())
        var seconds = time_t(total / 1000)
        let millis = Int(total % 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2)) "
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))"
    }

    /// `-` for nil or empty; otherwise a token with no spaces or controls (percent-encoded), quoted comments kept.
    static func escape(_ value: String?) -> String {
        guard let value, !value.isEmpty else { return "-" }
        var out = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case " ": out += "%20"
            case "%": out += "%25"
            case "\"": out += "%22"
            case _ where scalar.value < 0x20 || scalar.value == 0x7f:
                out += String(format: "%%%02X", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The `#Fields` directive in force at the end of the log (its last 64 KiB are read).
    private static func lastFields(of url: URL) -> [String]? {
        guard let handle = try? FileHandle(forReadingFrom: url) else { return nil }
        defer { try? handle.close() }
        guard let end = try? handle.seekToEnd() else { return nil }
        try? handle.seek(toOffset: end > 65_536 ? end - 65_536 : 0)
        guard let data = try? handle.readToEnd(), let text = String(data: data, encoding: .utf8) else { return nil }
        guard let line = text.split(separator: "\n").last(where: { $0.hasPrefix("#Fields:") }) else { return nil }
        return line.dropFirst("#Fields:".count).split(separator: " ").map(String.init)
    }
}
