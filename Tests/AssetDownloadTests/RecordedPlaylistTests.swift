import Foundation
import HLS
import OfflinePackage
import StowageCore
import Testing

@testable import AssetDownload

/// How reloads of a live playlist fold into a recording: each segment once, sequence numbers kept, the keys in effect
/// written out where a reload says they changed, and segments that left the window before they were seen recorded as
/// EXT-X-GAP with their span.
@Suite("Recorded playlists")
struct RecordedPlaylistTests {
    static let url = URL(string: "https://live.test/ch1/index.m3u8")!

    /// A live window: `first`..`last` (2 s segments), a date on the first, the key `k2` from sequence `keyChange`.
    static func window(_ first: Int, _ last: Int, keyChange: Int = 1000, discontinuityAt: Int? = nil, end: Bool = false) -> MediaPlaylist {
        var lines = ["#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:\(first)"]
        let discontinuitiesBefore = discontinuityAt.map { $0 < first ? 1 : 0 } ?? 0
        lines.append("#EXT-X-DISCONTINUITY-SEQUENCE:\(discontinuitiesBefore)")
        lines.append(#"#EXT-X-KEY:METHOD=AES-128,URI="\#(first >= keyChange ? "k2" : "k1").key""#)
        let date = Date(timeIntervalSince1970: 1_800_000_000 + Double(first) * 2)
        let formatter = ISO8601DateFormatter()
        lines.append("#EXT-X-PROGRAM-DATE-TIME:\(formatter.string(from: date))")
        for sequence in first...last {
            if sequence == keyChange, sequence != first { lines.append(#"#EXT-X-KEY:METHOD=AES-128,URI="k2.key""#) }
            if sequence == discontinuityAt, sequence != first || discontinuitiesBefore == 0 { lines.append("#EXT-X-DISCONTINUITY") }
            lines += ["#EXTINF:2,", "s\(sequence).ts"]
        }
        if end { lines.append("#EXT-X-ENDLIST") }
        guard case .media(let media) = try! PlaylistParser.parse(lines.joined(separator: "\n") + "\n").playlist else { fatalError() }
        return media
    }

    /// (sequence, URI, key URI, discontinuity sequence, gap) of each recorded segment, as a player resolves them.
    static func resolved(_ recorded: RecordedPlaylist) -> [(Int, String, String?, Int, Bool)] {
        recorded.playlist.resolvedSegments(baseURL: nil).map {
            ($0.mediaSequence, $0.uri, $0.keys.first?.uri, $0.discontinuitySequence, $0.isGap)
        }
    }

    @Test("overlapping reloads add each segment once, with absolute URIs and the source's sequence numbers")
    func overlapping() throws {
        var recorded = RecordedPlaylist(targetDuration: 2, version: nil)
        let first = try recorded.merge(Self.window(5, 7), url: Self.url, renditionId: "video", limit: nil)
        #expect(first.appended == 3 && first.gap == nil && !first.ended)
        let second = try recorded.merge(Self.window(6, 9, keyChange: 9), url: Self.url, renditionId: "video", limit: nil)
        #expect(second.appended == 2 && second.gap == nil)
        let unchanged = try recorded.merge(Self.window(6, 9, keyChange: 9), url: Self.url, renditionId: "video", limit: nil)
        #expect(unchanged.appended == 0)
        let segments = Self.resolved(recorded)
        #expect(segments.map(\.0) == [5, 6, 7, 8, 9])
        #expect(segments.map(\.1) == (5...9).map { "https://live.test/ch1/s\($0).ts" })
        #expect(segments.map(\.2) == ["k1", "k1", "k1", "k1", "k2"].map { "https://live.test/ch1/\($0).key" })
        let ended = try recorded.merge(Self.window(8, 10, keyChange: 9, end: true), url: Self.url, renditionId: "video", limit: nil)
        #expect(ended.ended && ended.appended == 1)
    }

    @Test("segments that left the window become EXT-X-GAP with the dated span; the keys and a hidden discontinuity are restated")
    func gap() throws {
        var recorded = RecordedPlaylist(targetDuration: 2, version: nil)
        _ = try recorded.merge(Self.window(0, 2), url: Self.url, renditionId: "video", limit: nil)
        // Away while 3..6 went by; the key changed at 4 and a discontinuity came at 5, both unseen.
        let merge = try recorded.merge(Self.window(7, 9, keyChange: 4, discontinuityAt: 5), url: Self.url, renditionId: "video", limit: nil)
        let gap = try #require(merge.gap)
        #expect(gap.firstMediaSequence == 3 && gap.segments == 4 && gap.renditionId == "video")
        #expect(gap.seconds == 8)
        #expect(gap.startsAt == 1_800_000_006 && gap.endsAt == 1_800_000_014)
        let segments = Self.resolved(recorded)
        #expect(segments.map(\.0) == Array(0...9))
        #expect(segments.map(\.4) == [false, false, false, true, true, true, true, false, false, false])
        #expect(segments.suffix(3).map(\.2) == Array(repeating: "https://live.test/ch1/k2.key", count: 3))
        #expect(segments.suffix(3).map(\.3) == [1, 1, 1])
        #expect(recorded.duration == 20)
    }

    @Test("a limit stops the recording with the segment that reaches it")
    func limit() throws {
        var recorded = RecordedPlaylist(targetDuration: 2, version: nil)
        let merge = try recorded.merge(Self.window(0, 9), url: Self.url, renditionId: "video", limit: 5)
        #expect(merge.reachedLimit && merge.appended == 3 && recorded.duration == 6)
    }

    @Test("a sequence number that jumps by more than a recording can miss is refused, naming the jump")
    func jump() throws {
        var recorded = RecordedPlaylist(targetDuration: 2, version: nil)
        _ = try recorded.merge(Self.window(0, 1), url: Self.url, renditionId: "video", limit: nil)
        #expect {
            try recorded.merge(Self.window(5_000_000, 5_000_001), url: Self.url, renditionId: "video", limit: nil)
        } throws: { error in
            (error as? DownloadError)?.code == "live_sequence_jump" && "\(error)".contains("5000000")
        }
        #expect(recorded.lastSequence == 1)
    }
}

/// The review's cases: a discontinuity of its own after a gap that hid another, a limit inside a gap, a playlist that
/// falls behind, inline keys never written out.
@Suite("Recorded playlists: edges")
struct RecordedPlaylistEdgeTests {
    @Test("a gap hiding one discontinuity before a segment with its own keeps both")
    func discontinuityAfterGap() throws {
        var recorded = RecordedPlaylist(targetDuration: 2, version: nil)
        _ = try recorded.merge(RecordedPlaylistTests.window(0, 2), url: RecordedPlaylistTests.url, renditionId: "v", limit: nil)
        // Discontinuities at 4 (hidden) and 6 (the first segment seen again): the source's sequence there is 2.
        var lines = ["#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:6", "#EXT-X-DISCONTINUITY-SEQUENCE:1"]
        lines += [#"#EXT-X-KEY:METHOD=AES-128,URI="k1.key""#, "#EXT-X-DISCONTINUITY", "#EXTINF:2,", "s6.ts", "#EXTINF:2,", "s7.ts"]
        guard case .media(let reload) = try PlaylistParser.parse(lines.joined(separator: "\n") + "\n").playlist else { return }
        _ = try recorded.merge(reload, url: RecordedPlaylistTests.url, renditionId: "v", limit: nil)
        let segments = recorded.playlist.resolvedSegments(baseURL: nil)
        #expect(segments.map(\.mediaSequence) == Array(0...7))
        #expect(segments.suffix(2).map(\.discontinuitySequence) == [2, 2])
    }

    @Test("a limit that falls inside a gap ends the recording there")
    func limitInsideGap() throws {
        var recorded = RecordedPlaylist(targetDuration: 2, version: nil)
        _ = try recorded.merge(RecordedPlaylistTests.window(0, 1), url: RecordedPlaylistTests.url, renditionId: "v", limit: 9)
        let merge = try recorded.merge(RecordedPlaylistTests.window(10, 12), url: RecordedPlaylistTests.url, renditionId: "v", limit: 9)
        #expect(merge.reachedLimit)
        #expect(merge.gap?.segments == 3)
        #expect(recorded.duration == 10)
        #expect(recorded.lastSequence == 4)
    }

    @Test("a reload behind the recording adds nothing and does not end it, even with EXT-X-ENDLIST")
    func behind() throws {
        var recorded = RecordedPlaylist(targetDuration: 2, version: nil)
        _ = try recorded.merge(RecordedPlaylistTests.window(10, 12), url: RecordedPlaylistTests.url, renditionId: "v", limit: nil)
        let stale = try recorded.merge(RecordedPlaylistTests.window(0, 3, end: true), url: RecordedPlaylistTests.url, renditionId: "v", limit: nil)
        #expect(stale.isBehind && !stale.ended && stale.appended == 0)
    }

    @Test("a gap longer than the target duration per segment raises the target duration")
    func longGapSegments() throws {
        var recorded = RecordedPlaylist(targetDuration: 2, version: nil)
        _ = try recorded.merge(RecordedPlaylistTests.window(0, 0), url: RecordedPlaylistTests.url, renditionId: "v", limit: nil)
        // Dated 20 s apart with one segment between: 18 s of gap in one segment, capped at three target durations.
        var lines = ["#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:2"]
        lines += ["#EXT-X-PROGRAM-DATE-TIME:2027-01-15T08:00:20Z", "#EXTINF:2,", "s2.ts"]
        guard case .media(let reload) = try PlaylistParser.parse(lines.joined(separator: "\n") + "\n").playlist else { return }
        _ = try recorded.merge(reload, url: RecordedPlaylistTests.url, renditionId: "v", limit: nil)
        let gap = try #require(recorded.playlist.segments.first { $0.isGap })
        #expect(gap.duration == 6)
        #expect(recorded.playlist.targetDuration >= 6)
    }
}

/// Low-latency playlists are recorded by whole segments.
@Suite("Recorded playlists: low latency")
struct RecordedLowLatencyTests {
    @Test("parts, preload hints and the unfinished segment's parts are left out; whole segments are recorded")
    func wholeSegmentsOnly() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-VERSION:9
            #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=3.0
            #EXT-X-PART-INF:PART-TARGET=1.0
            #EXT-X-MEDIA-SEQUENCE:100
            #EXT-X-MAP:URI="init.mp4"
            #EXTINF:4.0,
            s100.m4s
            #EXT-X-PART:DURATION=1.0,URI="s101.p0.m4s",INDEPENDENT=YES
            #EXT-X-PART:DURATION=1.0,URI="s101.p1.m4s"
            #EXT-X-PART:DURATION=1.0,URI="s101.p2.m4s"
            #EXT-X-PART:DURATION=1.0,URI="s101.p3.m4s"
            #EXTINF:4.0,
            s101.m4s
            #EXT-X-PART:DURATION=1.0,URI="s102.p0.m4s",INDEPENDENT=YES
            #EXT-X-PRELOAD-HINT:TYPE=PART,URI="s102.p1.m4s"

            """
        guard case .media(let media) = try PlaylistParser.parse(text).playlist else { return }
        var recorded = RecordedPlaylist(targetDuration: 4, version: 9)
        let merge = try recorded.merge(media, url: RecordedPlaylistTests.url, renditionId: "v", limit: nil)
        #expect(merge.appended == 2)
        #expect(recorded.playlist.segments.map(\.uri) == ["s100.m4s", "s101.m4s"].map { "https://live.test/ch1/\($0)" })
        #expect(recorded.playlist.segments.allSatisfy { $0.parts.isEmpty })
        let written = PlaylistWriter.write(.media(recorded.playlist))
        #expect(!written.contains("EXT-X-PART") && !written.contains("PRELOAD-HINT"))
        #expect(written.contains(#"#EXT-X-MAP:URI="https://live.test/ch1/init.mp4""#))
    }
}
