public import AssetDownload
import Foundation
public import Logging
import OfflinePackage
import StowageCore

/// What the service's log says of each download, decided from its updates: when it starts, its progress at every
/// tenth, its keys, pauses, waits, gaps, failures and completion, each line naming the asset. A value, so that the
/// choice of lines is tested without a service.
///
/// ```text
/// notice: demo-1: downloading into /home/ana/.local/share/stowage/packages/demo-1
/// notice: demo-1: 40% (12.3 MB, 2.1 MB/s)
/// error: demo-1: failed: segment video/00004.ts (...) answered HTTP 404; ... [segment_http_status]
/// ```
public struct DownloadLog: Sendable {
    /// The last tenth logged for each asset.
    private var tenths: [String: Int] = [:]

    public init() {}

    /// The level and line `update` is logged with, or nil when it adds nothing to what was logged. One line whatever a
    /// playlist or a server put in a message: control characters, line feeds and tabs are shown as escapes, so no
    /// message can forge another line of the log.
    public mutating func line(for update: DownloadUpdate) -> (level: Logger.Level, text: String)? {
        rawLine(for: update).map { ($0.level, ControlCharacters.shown($0.text, keepingLineBreaks: false)) }
    }

    private mutating func rawLine(for update: DownloadUpdate) -> (level: Logger.Level, text: String)? {
        let asset = update.asset
        switch update.event {
        case .willDownload:
            tenths[asset] = nil
            return (.notice, "\(asset): downloading into \(update.location ?? "its package")")
        case .keysAcquired:
            let lease = update.leaseId.map { " (lease \($0))" } ?? ""
            return (.info, "\(asset): \(update.keys ?? 0) keys obtained and stored\(lease)")
        case .progress:
            guard let fraction = update.fraction else { return nil }
            let tenth = Int((min(max(fraction, 0), 1) * 10).rounded(.down))
            guard tenth > (tenths[asset] ?? 0) else { return nil }
            tenths[asset] = tenth
            let rate = update.bytesPerSecond.map { ", \(Self.megabytes(Int64($0)))/s" } ?? ""
            return (.notice, "\(asset): \(tenth * 10)% (\(Self.megabytes(update.bytes ?? 0))\(rate))")
        case .paused:
            guard let reason = update.reason else { return (.notice, "\(asset): paused") }
            return (.notice, "\(asset): paused: \(reason.message) [\(reason.code)]")
        case .waiting:
            let reason = update.reason.map { "\($0.message) [\($0.code)]" } ?? "for a condition to pass"
            return (.warning, "\(asset): waiting: \(reason)")
        case .resumed:
            return (.notice, "\(asset): resumed")
        case .recordingGap:
            let count = update.gap.map { "\($0.segments) segments" } ?? "segments"
            return (.warning, "\(asset): the recording misses \(count) that left the playlist before they were fetched")
        case .recordingEnded:
            return (.notice, "\(asset): the recording ended (\(update.recording?.endReason?.rawValue ?? "stopped"))")
        case .failed:
            tenths[asset] = nil
            guard let error = update.error else { return (.error, "\(asset): failed") }
            return (.error, "\(asset): failed: \(error.message) [\(error.code)]")
        case .finished:
            tenths[asset] = nil
            return (.notice, "\(asset): complete, \(Self.megabytes(update.bytes ?? 0))")
        case .resolvedMediaSelections, .playlistWarnings, .mediaSelectionCompleted, .queued:
            return nil
        }
    }

    static func megabytes(_ bytes: Int64) -> String { String(format: "%.1f MB", Double(bytes) / 1e6) }
}
