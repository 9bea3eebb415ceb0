import AssetDownload
import Logging
import StowageCore
import StowageService
import Testing

/// The lines the service's log gives a download, from its updates alone.
struct DownloadLogTests {
    static func progress(_ fraction: Double, bytes: Int64) -> DownloadUpdate {
        var update = DownloadUpdate(asset: "demo-1", event: .progress)
        update.fraction = fraction
        update.bytes = bytes
        update.bytesPerSecond = 2_000_000
        return update
    }

    @Test func progressIsLoggedAtEachTenthOnce() {
        var log = DownloadLog()
        var start = DownloadUpdate(asset: "demo-1", event: .willDownload)
        start.location = "/data/packages/demo-1"
        #expect(log.line(for: start)?.text == "demo-1: downloading into /data/packages/demo-1")
        let lines = [0.05, 0.12, 0.15, 0.19, 0.31, 1.0].compactMap { log.line(for: Self.progress($0, bytes: Int64($0 * 10_000_000)))?.text }
        #expect(lines == ["demo-1: 10% (1.2 MB, 2.0 MB/s)", "demo-1: 30% (3.1 MB, 2.0 MB/s)", "demo-1: 100% (10.0 MB, 2.0 MB/s)"])
    }

    @Test func failuresAndWaitsAreLoggedWithTheirCodeAndLevel() {
        var log = DownloadLog()
        var failed = DownloadUpdate(asset: "demo-1", event: .failed)
        failed.error = .init(code: "segment_http_status", message: "segment video/00004.ts answered HTTP 404")
        let failure = log.line(for: failed)
        #expect(failure?.level == .error)
        #expect(failure?.text == "demo-1: failed: segment video/00004.ts answered HTTP 404 [segment_http_status]")
        var waiting = DownloadUpdate(asset: "demo-1", event: .waiting)
        waiting.reason = .init(code: "outside_time_window", message: "downloads run from 01:00 to 06:00")
        #expect(log.line(for: waiting)?.level == .warning)
        #expect(log.line(for: DownloadUpdate(asset: "demo-1", event: .queued)) == nil)
    }

    /// A hostile server's message cannot write a second line into the service's log, nor drive a terminal.
    @Test func aMessageIsOneLineWhateverItHolds() {
        var log = DownloadLog()
        var failed = DownloadUpdate(asset: "demo-1", event: .failed)
        failed.error = .init(code: "unexpected_response", message: "no\n2026-12-08T02:07:36+0000 notice x: demo-1: complete\u{1b}[2J")
        let line = log.line(for: failed)?.text ?? ""
        #expect(!line.contains("\n") && !line.contains("\u{1b}"), "\(line)")
        #expect(line.contains("no\\u000a2026-12-08") && line.contains("\\u001b[2J"), "\(line)")
    }

    @Test func aNewRunLogsItsProgressAgain() {
        var log = DownloadLog()
        #expect(log.line(for: Self.progress(0.5, bytes: 1)) != nil)
        #expect(log.line(for: Self.progress(0.55, bytes: 1)) == nil)
        #expect(log.line(for: DownloadUpdate(asset: "demo-1", event: .willDownload)) != nil)
        #expect(log.line(for: Self.progress(0.55, bytes: 1))?.text.hasPrefix("demo-1: 50%") == true)
        // Another asset keeps its own count.
        var other = Self.progress(0.2, bytes: 1)
        other.asset = "other"
        #expect(log.line(for: other)?.text.hasPrefix("other: 20%") == true)
    }
}
