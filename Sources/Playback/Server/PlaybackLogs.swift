import Foundation
import OfflinePackage
import StowageCore

/// The package's W3C logs as a playback session writes them: `logs/access.log` (one line per request, without the
/// session path, which is a secret) and `logs/error.log` (every refusal and failure, with its code).
struct PlaybackLogs: Sendable {
    /// The error domain written in `x-error-domain`.
    static let domain = "playback"

    private let access: ExtendedLogFile?
    private let errors: ExtendedLogFile?
    private let onRequest: (@Sendable (PlaybackRequestEvent) -> Void)?

    /// Opens both logs; a log that cannot be opened is skipped (a log never stops a player).
    init(package: PackageDirectory, onRequest: (@Sendable (PlaybackRequestEvent) -> Void)? = nil) {
        access = try? ExtendedLogFile(url: package.accessLogURL, fields: ExtendedLogFile.accessFields)
        errors = try? ExtendedLogFile(url: package.errorLogURL, fields: ExtendedLogFile.errorFields)
        self.onRequest = onRequest
    }

    /// One request: `uri` is the path inside the session (`/video/00001.ts`), `seconds` the time taken, `firstByte`
    /// the time to the first body byte, `waited` the time spent waiting for a download to bring the file.
    func request(
        method: String,
        uri: String,
        status: Int,
        bytes: Int?,
        seconds: Double,
        rendition: String?,
        firstByte: Double? = nil,
        waited: Double? = nil
    ) {
        onRequest?(
            PlaybackRequestEvent(
                method: method,
                path: uri,
                status: status,
                bytes: bytes,
                seconds: seconds,
                firstByteSeconds: firstByte,
                waitedSeconds: waited,
                rendition: rendition
            )
        )
        var values = [
            "cs-method": method,
            "cs-uri": uri,
            "sc-status": String(status),
            "time-taken": Self.threeDecimals(seconds),
        ]
        if let bytes {
            values["sc-bytes"] = String(bytes)
            if seconds > 0 { values["x-throughput"] = String(Int(Double(bytes) / seconds)) }
        }
        if let rendition { values["x-rendition"] = rendition }
        access?.write(values)
    }

    /// `seconds` with three decimals (`0.004`), as `String(format: "%.3f")` writes it but without it: its first use in a
    /// process went through the runtime's type look-ups (the `CVarArg` casts), on the first request's way to its first
    /// byte (half of the look-up samples of 12 first requests, docs/PERFORMANCE.md).
    static func threeDecimals(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "-" }
        let thousandths = Int64((min(max(seconds, 0), 1e12) * 1000).rounded())
        let fraction = String(thousandths % 1000)
        return "\(thousandths / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// One refusal or failure.
    func error(uri: String, _ error: PlaybackError) {
        errors?.write(["cs-uri": uri, "x-error-domain": Self.domain, "x-error-code": error.code.rawValue, "x-comment": error.message])
    }
}

/// One request the playback server answered, as `stowage play --json` prints it (`{"event":"served",...}`): what was
/// asked, the status, the bytes sent (nil when the response was cut short), the time taken, the time to the first body
/// byte, and how long it waited for a running download to bring the file.
public struct PlaybackRequestEvent: Codable, Sendable, Hashable {
    public var method: String
    /// The path inside the session (`/video/00001.ts`); `-` for a request outside it.
    public var path: String
    public var status: Int
    public var bytes: Int?
    public var seconds: Double
    public var firstByteSeconds: Double?
    public var waitedSeconds: Double?
    public var rendition: String?

    public init(
        method: String,
        path: String,
        status: Int,
        bytes: Int?,
        seconds: Double,
        firstByteSeconds: Double? = nil,
        waitedSeconds: Double? = nil,
        rendition: String? = nil
    ) {
        self.method = method
        self.path = path
        self.status = status
        self.bytes = bytes
        self.seconds = seconds
        self.firstByteSeconds = firstByteSeconds
        self.waitedSeconds = waitedSeconds
        self.rendition = rendition
    }
}
