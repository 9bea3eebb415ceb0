import Foundation
public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// swift-log lines as one JSON object each on standard error, for log shippers (`stowage keyserver run --log-format
/// json`):
///
/// ```json
/// {"duration_ms":"3.41","label":"stowage.keyserver","level":"info","message":"request","method":"POST","request_id":"...","route":"/v1/keys","source":"127.0.0.1","status":"200","time":"2026-11-25T06:25:20.114Z"}
/// ```
///
/// Members are sorted by name. Metadata keys become members beside `time`, `level`, `label` and `message` (which
/// they never replace); every value is a string.
public struct JSONLogHandler: LogHandler {
    public let label: String
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]

    public init(label: String) {
        self.label = label
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [String: String] = [:]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) { fields[key] = "\(value)" }
        if let error = event.error { fields["error"] = "\(error)" }
        fields["time"] = Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        fields["level"] = event.level.rawValue
        fields["label"] = label
        fields["message"] = event.message.description
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard var line = try? encoder.encode(fields) else { return }
        line.append(0x0A)
        // One write per line, so lines from several threads never interleave.
        line.withUnsafeBytes { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
