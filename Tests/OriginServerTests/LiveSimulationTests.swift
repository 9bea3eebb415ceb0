import Foundation
import HLS
import Testing

@testable import OriginServer

/// `stowage origin --live`: the live view of a VOD media playlist at a given moment, checked against what RFC 8216bis
/// asks of a live server (a window with the right media and discontinuity sequence numbers, the keys in effect at its
/// first segment, EXT-X-ENDLIST once the source is exhausted).
@Suite("Live simulation of VOD playlists")
struct LiveSimulationTests {
    /// Six 2 s segments from sequence 10, a key change before the fourth, a discontinuity before the fifth.
    static let source: MediaPlaylist = {
        let text = """
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-TARGETDURATION:2
            #EXT-X-MEDIA-SEQUENCE:10
            #EXT-X-PLAYLIST-TYPE:VOD
            #EXT-X-KEY:METHOD=AES-128,URI="k1.key"
            #EXTINF:2,
            s0.ts
            #EXTINF:2,
            s1.ts
            #EXTINF:2,
            s2.ts
            #EXT-X-KEY:METHOD=AES-128,URI="k2.key"
            #EXTINF:2,
            s3.ts
            #EXT-X-DISCONTINUITY
            #EXTINF:2,
            s4.ts
            #EXTINF:2,
            s5.ts
            #EXT-X-ENDLIST

            """
        guard case .media(let media) = try! PlaylistParser.parse(text).playlist else { fatalError("not a media playlist") }
        return media
    }()

    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// The view's segments as (sequence, URI), resolved the way a player resolves them, with each one's key URI.
    static func resolved(_ view: MediaPlaylist) -> [(Int, String, String?, Int, Date?)] {
        view.resolvedSegments(baseURL: URL(string: "http://origin.test/a/index.m3u8")).map {
            ($0.mediaSequence, $0.uri, $0.keys.first?.uri, $0.discontinuitySequence, $0.programDateTime)
        }
    }

    @Test("a window of 3 slides one segment per segment duration, keeps sequence numbers, keys and dates, and ends")
    func slidingWindow() {
        let live = LiveSimulation(window: 3)
        let atStart = live.view(of: Self.source, elapsed: 0, startedAt: Self.start)
        #expect(!atStart.endList && atStart.playlistType == nil)
        #expect(Self.resolved(atStart).map(\.0) == [10, 11, 12])
        // The stream began three segments before the origin started.
        #expect(Self.resolved(atStart).first?.4 == Self.start.addingTimeInterval(-6))

        // 4.5 s later two more are out, and the window has slid by two.
        let later = live.view(of: Self.source, elapsed: 4.5, startedAt: Self.start)
        let segments = Self.resolved(later)
        #expect(segments.map(\.0) == [12, 13, 14])
        #expect(segments.map(\.1) == ["s2.ts", "s3.ts", "s4.ts"])
        // The key in effect at the window's first segment is written out there; the change still follows.
        #expect(segments.map(\.2) == ["k1.key", "k2.key", "k2.key"])
        // The discontinuity before s4 is still in the window: its segment has discontinuity sequence 1.
        #expect(later.discontinuitySequence == 0 && segments.map(\.3) == [0, 0, 1])
        // A segment is published once it has ended: s3 began as the origin started.
        #expect(segments.map(\.4) == [-2, 0, 2].map { Self.start.addingTimeInterval(Double($0)) })

        // Once the discontinuity has slid out, the playlist's discontinuity sequence counts it.
        let slid = live.view(of: Self.source, elapsed: 100, startedAt: Self.start)
        #expect(slid.endList)
        #expect(Self.resolved(slid).map(\.0) == [13, 14, 15])
        #expect(slid.discontinuitySequence == 0 && Self.resolved(slid).map(\.3) == [0, 1, 1])
        #expect(Self.resolved(slid).map(\.2) == ["k2.key", "k2.key", "k2.key"])
    }

    @Test("an EVENT playlist grows from its first segment and never slides")
    func event() {
        let live = LiveSimulation(window: 2, event: true)
        let view = live.view(of: Self.source, elapsed: 5, startedAt: Self.start)
        #expect(view.playlistType == .event && !view.endList)
        #expect(Self.resolved(view).map(\.0) == [10, 11, 12, 13])
        #expect(live.view(of: Self.source, elapsed: 8, startedAt: Self.start).endList)
    }

    @Test("--loop goes on after the source with a discontinuity, the sequence numbers still rising and the IVs written out")
    func loop() {
        let live = LiveSimulation(window: 3, loop: true)
        // 12 s: 3 + 6 segments published (the ninth is the third of the second pass).
        let view = live.view(of: Self.source, elapsed: 12, startedAt: Self.start)
        #expect(!view.endList)
        let segments = Self.resolved(view)
        #expect(segments.map(\.0) == [16, 17, 18])
        #expect(segments.map(\.1) == ["s0.ts", "s1.ts", "s2.ts"])
        // The second pass starts with a discontinuity: the source's one (before s4) and that one lie before it.
        #expect(segments.map(\.3) == [2, 2, 2])
        // The IVs are the source's: derived from its sequence numbers 10, 11, 12, not the looped 16, 17, 18.
        let ivs = view.resolvedSegments(baseURL: nil).map { $0.keys.first?.iv ?? [] }
        #expect(ivs == [10, 11, 12].map(EncryptionKey.iv(forMediaSequence:)))
        // Far on, the arithmetic over whole passes agrees with counting.
        let far = live.view(of: Self.source, elapsed: 12 + 12 * 100, startedAt: Self.start)
        #expect(Self.resolved(far).map(\.0) == [616, 617, 618])
        #expect(Self.resolved(far).map(\.3) == [202, 202, 202])
    }
}
