import Foundation
import Testing

@testable import Playback

/// The access log's `time-taken`, written without `String(format:)` (whose first use cost the first request about
/// 1.5 ms): the same text `%.3f` gives.
struct PlaybackLogsTests {
    @Test(arguments: [0, 0.0004, 0.004, 0.0416, 0.999, 0.9996, 1, 3.25, 12.3456, 61.05, 86_400.5])
    func timeTakenIsWhatPrintfWrites(seconds: Double) {
        #expect(PlaybackLogs.threeDecimals(seconds) == String(format: "%.3f", seconds))
    }

    @Test func oddValuesStayReadable() {
        #expect(PlaybackLogs.threeDecimals(-0.5) == "0.000")
        #expect(PlaybackLogs.threeDecimals(.nan) == "-")
        #expect(PlaybackLogs.threeDecimals(.infinity) == "-")
    }
}
