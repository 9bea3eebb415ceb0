import Foundation
import OfflinePackage

/// The package's W3C logs as a playback session writes them: `logs/access.log` (one line per request, without the
/// session path, which is a secret) and `logs/error.log` (every refusal and failure, with its code).
struct PlaybackLogs: Sendable {
    /// The error domain written in `x-error-domain`.
    static let domain = "playback"

    private let access: ExtendedLogFile?
    private let errors: ExtendedLogFile?

    /// Opens both logs; a log that cannot be opened is skipped (a log never stops a player).
    init(package: PackageDirectory) {
        access = try? ExtendedLogFile(url: package.accessLogURL, fields: ExtendedLogFile.accessFields)
        errors = try? ExtendedLogFile(url: package.errorLogURL, fields: ExtendedLogFile.errorFields)
    }

    /// One request: `uri` is the path inside the session (`/video/00001.ts`), `seconds` the time taken.
    func request(method: String, uri: String, status: Int, bytes: Int?, seconds: Double, rendition: String?) {
        var values = [
            "cs-method": method,
            "cs-uri": uri,
            "sc-status": String(status),
            "time-taken": String(format: "%.3f", seconds),
        ]
        if let bytes {
            values["sc-bytes"] = String(bytes)
            if seconds > 0 { values["x-throughput"] = String(Int(Double(bytes) / seconds)) }
        }
        if let rendition { values["x-rendition"] = rendition }
        access?.write(values)
    }

    /// One refusal or failure.
    func error(uri: String, _ error: PlaybackError) {
        errors?.write(["cs-uri": uri, "x-error-domain": Self.domain, "x-error-code": error.code, "x-comment": error.message])
    }
}
