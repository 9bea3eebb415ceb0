import Foundation
import Testing

@testable import HLS

/// `MediaPlaylist.resolvedSegments(baseURL:)`: URLs, byte ranges, timing, sequence numbers, init sections and keys.
@Suite("Resolved segments")
struct ResolvedSegmentTests {
    static let base = URL(string: "https://cdn.example.com/video/hls/index.m3u8?session=1")!

    @Test(
        "URIs are resolved against the playlist's URL",
        arguments: [
            ("seg.ts", "https://cdn.example.com/video/hls/seg.ts"),
            ("sub/seg.ts", "https://cdn.example.com/video/hls/sub/seg.ts"),
            ("../other/seg.ts", "https://cdn.example.com/video/other/seg.ts"),
            ("../../../../up.ts", "https://cdn.example.com/up.ts"),
            ("/root/seg.ts", "https://cdn.example.com/root/seg.ts"),
            ("//mirror.example.net/seg.ts", "https://mirror.example.net/seg.ts"),
            ("http://else.example.org/a.ts?x=y", "http://else.example.org/a.ts?x=y"),
            ("seg.ts?token=a%2Fb", "https://cdn.example.com/video/hls/seg.ts?token=a%2Fb"),
            ("my segment 1.ts", "https://cdn.example.com/video/hls/my%20segment%201.ts"),
            ("a%20b.ts", "https://cdn.example.com/video/hls/a%20b.ts"),
            ("ü.ts", "https://cdn.example.com/video/hls/%C3%BC.ts"),
        ]
    )
    func urls(uri: String, expected: String) throws {
        let playlist = try parseMedia(m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", uri))
        let segment = try #require(playlist.resolvedSegments(baseURL: Self.base).first)
        #expect(segment.uri == uri)
        #expect(segment.url?.absoluteString == expected)
    }

    @Test("the base is the URL after redirects; without a base URIs stay relative")
    func bases() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=AES-128,URI="../keys/k1""#,
                #"#EXT-X-MAP:URI="init.mp4""#,
                "#EXTINF:10,",
                "seg.mp4"
            )
        )
        let redirected = URL(string: "https://edge-7.cdn.example.net/a/b/index.m3u8")!
        let segment = try #require(playlist.resolvedSegments(baseURL: redirected).first)
        #expect(segment.url?.absoluteString == "https://edge-7.cdn.example.net/a/b/seg.mp4")
        #expect(segment.keys.first?.url?.absoluteString == "https://edge-7.cdn.example.net/a/keys/k1")
        #expect(segment.initializationSection?.url?.absoluteString == "https://edge-7.cdn.example.net/a/b/init.mp4")

        let local = try #require(playlist.resolvedSegments(baseURL: URL(fileURLWithPath: "/var/offline/asset/index.m3u8")).first)
        #expect(local.url?.absoluteString == "file:///var/offline/asset/seg.mp4")
        #expect(local.keys.first?.url?.path == "/var/offline/keys/k1")

        let unresolved = try #require(playlist.resolvedSegments(baseURL: nil).first)
        #expect(unresolved.url?.absoluteString == "seg.mp4")
        #expect(unresolved.keys.first?.url?.absoluteString == "../keys/k1")
    }

    @Test("key URIs with their own scheme are kept")
    func keySchemes() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://asset-1",KEYFORMAT="com.apple.streamingkeydelivery""#,
                #"#EXT-X-KEY:METHOD=SAMPLE-AES,URI="data:text/plain;base64,AAAA",KEYFORMAT="urn:uuid:x""#,
                "#EXTINF:10,",
                "a.mp4"
            )
        )
        let keys = try #require(playlist.resolvedSegments(baseURL: Self.base).first?.keys)
        #expect(keys.map(\.url?.absoluteString) == ["skd://asset-1", "data:text/plain;base64,AAAA"])
    }

    @Test("byte ranges: explicit offsets, offsets continued from the previous sub-range, HTTP Range headers")
    func byteRanges() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                "#EXTINF:10,",
                "#EXT-X-BYTERANGE:1000@100",
                "main.ts",
                "#EXTINF:10,",
                "#EXT-X-BYTERANGE:2000",
                "main.ts",
                "#EXT-X-BYTERANGE:500",
                "#EXTINF:10,",
                "main.ts",
                "#EXTINF:10,",
                "other.ts",
                "#EXT-X-BYTERANGE:10@0",
                "#EXTINF:10,",
                "other.ts",
                "#EXT-X-BYTERANGE:7",
                "#EXTINF:10,",
                "other.ts"
            )
        )
        let resolved = playlist.resolvedSegments(baseURL: nil)
        #expect(
            resolved.map(\.byteRange) == [
                ResolvedByteRange(offset: 100, length: 1000), ResolvedByteRange(offset: 1100, length: 2000),
                ResolvedByteRange(offset: 3100, length: 500), nil, ResolvedByteRange(offset: 0, length: 10),
                ResolvedByteRange(offset: 10, length: 7),
            ]
        )
        #expect(resolved[1].byteRange?.httpRangeHeader == "bytes=1100-3099")
        #expect(resolved[1].byteRange?.description == "2000@1100")
    }

    @Test("start times accumulate the EXTINF durations")
    func startTimes() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                "#EXTINF:9.009,",
                "a.ts",
                "#EXTINF:9.009,",
                "b.ts",
                "#EXTINF:3.003,",
                "c.ts",
                "#EXTINF:0,",
                "d.ts",
                "#EXTINF:10,",
                "e.ts"
            )
        )
        let resolved = playlist.resolvedSegments(baseURL: nil)
        #expect(isClose(resolved.map(\.startTime), [0, 9.009, 18.018, 21.021, 21.021]))
        #expect(resolved.map(\.duration) == [9.009, 9.009, 3.003, 0, 10])
        #expect(resolved.map(\.index) == [0, 1, 2, 3, 4])
    }

    @Test("media sequence numbers: from 0, from EXT-X-MEDIA-SEQUENCE, and after EXT-X-SKIP")
    func mediaSequence() throws {
        let segments = ["#EXTINF:4,", "a.ts", "#EXTINF:4,", "b.ts"]
        let none = try parseMedia(m3u8(["#EXTM3U", "#EXT-X-TARGETDURATION:4"] + segments))
        #expect(none.resolvedSegments(baseURL: nil).map(\.mediaSequence) == [0, 1])
        let numbered = try parseMedia(m3u8(["#EXTM3U", "#EXT-X-TARGETDURATION:4", "#EXT-X-MEDIA-SEQUENCE:1000"] + segments))
        #expect(numbered.resolvedSegments(baseURL: nil).map(\.mediaSequence) == [1000, 1001])
        let skipped = try parseMedia(
            m3u8(["#EXTM3U", "#EXT-X-TARGETDURATION:4", "#EXT-X-MEDIA-SEQUENCE:1000", "#EXT-X-SKIP:SKIPPED-SEGMENTS=25"] + segments)
        )
        #expect(skipped.resolvedSegments(baseURL: nil).map(\.mediaSequence) == [1025, 1026])
    }

    @Test("sequence numbers at the top of the range wrap instead of trapping; the IV keeps the 64-bit value")
    func sequenceOverflow() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXT-X-MEDIA-SEQUENCE:9223372036854775807",
                "#EXT-X-DISCONTINUITY-SEQUENCE:9223372036854775807",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k""#,
                "#EXTINF:4,",
                "a.ts",
                "#EXT-X-DISCONTINUITY",
                "#EXTINF:4,",
                "b.ts"
            )
        )
        let resolved = playlist.resolvedSegments(baseURL: nil)
        #expect(resolved.map(\.mediaSequence) == [Int.max, Int.min])
        #expect(resolved.map(\.discontinuitySequence) == [Int.max, Int.min])
        #expect(resolved[1].keys[0].iv == [UInt8](repeating: 0, count: 8) + [0x80, 0, 0, 0, 0, 0, 0, 0])
        let skipped = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXT-X-MEDIA-SEQUENCE:9223372036854775807",
                "#EXT-X-SKIP:SKIPPED-SEGMENTS=9223372036854775807",
                "#EXTINF:4,",
                "a.ts"
            )
        )
        #expect(skipped.resolvedSegments(baseURL: nil).map(\.mediaSequence) == [-2])
    }

    @Test("discontinuity sequence numbers count the discontinuities from EXT-X-DISCONTINUITY-SEQUENCE")
    func discontinuitySequence() throws {
        let body = [
            "#EXTINF:4,", "a.ts", "#EXT-X-DISCONTINUITY", "#EXTINF:4,", "b.ts", "#EXTINF:4,", "c.ts", "#EXT-X-DISCONTINUITY",
            "#EXTINF:4,", "d.ts",
        ]
        let plain = try parseMedia(m3u8(["#EXTM3U", "#EXT-X-TARGETDURATION:4"] + body))
        #expect(plain.resolvedSegments(baseURL: nil).map(\.discontinuitySequence) == [0, 1, 1, 2])
        let numbered = try parseMedia(m3u8(["#EXTM3U", "#EXT-X-TARGETDURATION:4", "#EXT-X-DISCONTINUITY-SEQUENCE:12"] + body))
        #expect(numbered.resolvedSegments(baseURL: nil).map(\.discontinuitySequence) == [12, 13, 13, 14])
    }

    @Test("the initialization section in effect, across discontinuities, with its byte range")
    func initializationSections() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXTINF:4,",
                "clear.ts",
                #"#EXT-X-MAP:URI="main.mp4",BYTERANGE="700@0""#,
                "#EXTINF:4,",
                "#EXT-X-BYTERANGE:1000@700",
                "main.mp4",
                "#EXTINF:4,",
                "#EXT-X-BYTERANGE:1000",
                "main.mp4",
                "#EXT-X-DISCONTINUITY",
                #"#EXT-X-MAP:URI="ad-init.mp4",BYTERANGE="500""#,
                "#EXTINF:4,",
                "ad.mp4"
            )
        )
        let sections = playlist.resolvedSegments(baseURL: Self.base).map(\.initializationSection)
        #expect(sections[0] == nil)
        #expect(sections[1]?.uri == "main.mp4")
        #expect(sections[1]?.byteRange == ResolvedByteRange(offset: 0, length: 700))
        #expect(sections[2] == sections[1])
        #expect(sections[3]?.url?.absoluteString == "https://cdn.example.com/video/hls/ad-init.mp4")
        #expect(sections[3]?.byteRange == ResolvedByteRange(offset: 0, length: 500))
        #expect(playlist.resolvedSegments(baseURL: nil).map(\.byteRange?.offset) == [nil, 700, 1700, nil])
    }

    @Test("a KEY before a MAP encrypts the MAP; a KEY after it does not")
    func keysOfTheInitializationSection() throws {
        let keyFirst = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k1",IV=0x000000000000000000000000000000AA"#,
                #"#EXT-X-MAP:URI="init.mp4""#,
                "#EXTINF:4,",
                "a.mp4"
            )
        )
        let first = try #require(keyFirst.resolvedSegments(baseURL: nil).first)
        #expect(first.initializationSection?.keys.map(\.uri) == ["k1"])
        #expect(first.initializationSection?.keys.first?.iv.last == 0xAA)
        #expect(first.keys.map(\.uri) == ["k1"])

        let mapFirst = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                #"#EXT-X-MAP:URI="init.mp4""#,
                #"#EXT-X-KEY:METHOD=AES-128,URI="k1""#,
                "#EXTINF:4,",
                "a.mp4",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k2""#,
                "#EXTINF:4,",
                "b.mp4"
            )
        )
        let resolved = mapFirst.resolvedSegments(baseURL: nil)
        #expect(resolved.map { $0.initializationSection?.keys ?? [ResolvedKey]() } == [[], []])
        #expect(resolved.map { $0.keys.map(\.uri) } == [["k1"], ["k2"]])

        // The map keeps the keys of where it stands even after the segment keys rotate.
        let rotated = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXT-X-MEDIA-SEQUENCE:3",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k1""#,
                #"#EXT-X-MAP:URI="init.mp4""#,
                "#EXTINF:4,",
                "a.mp4",
                "#EXT-X-KEY:METHOD=NONE",
                "#EXTINF:4,",
                "b.mp4"
            )
        )
        let rotatedSegments = rotated.resolvedSegments(baseURL: nil)
        #expect(rotatedSegments.map { $0.initializationSection?.keys.map(\.uri) } == [["k1"], ["k1"]])
        #expect(rotatedSegments[1].keys == [])
        // Without an IV the map's key uses the sequence number of the segment after the map, for every segment.
        #expect(rotatedSegments.map { $0.initializationSection?.keys.first?.iv.last } == [3, 3])
        #expect(rotatedSegments[0].initializationSection == rotatedSegments[1].initializationSection)
    }

    @Test("keys with IVs: explicit, derived from the media sequence, short")
    func keysWithIVs() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXT-X-MEDIA-SEQUENCE:256",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k1""#,
                "#EXTINF:4,",
                "a.ts",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k2",IV=0xFFEEDDCCBBAA99887766554433221100"#,
                "#EXTINF:4,",
                "b.ts",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k3",IV=0x0102"#,
                "#EXTINF:4,",
                "c.ts"
            )
        )
        let keys = playlist.resolvedSegments(baseURL: Self.base).map { $0.keys[0] }
        #expect(
            keys[0]
                == ResolvedKey(
                    method: .aes128,
                    keyFormat: "identity",
                    keyFormatVersions: nil,
                    uri: "k1",
                    url: URL(string: "https://cdn.example.com/video/hls/k1"),
                    iv: [UInt8](repeating: 0, count: 14) + [1, 0],
                    ivIsExplicit: false
                )
        )
        #expect(keys[1].iv == [0xFF, 0xEE, 0xDD, 0xCC, 0xBB, 0xAA, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00])
        #expect(keys[1].ivIsExplicit)
        #expect(keys[2].iv == [1, 2] + [UInt8](repeating: 0, count: 14))
    }

    @Test("EXT-X-BITRATE applies to the following segments until the next, except byte-range segments")
    func bitrate() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXTINF:4,",
                "a.ts",
                "#EXT-X-BITRATE:1000",
                "#EXTINF:4,",
                "b.ts",
                "#EXTINF:4,",
                "c.ts",
                "#EXT-X-BYTERANGE:100@0",
                "#EXTINF:4,",
                "d.ts",
                "#EXT-X-BITRATE:2500",
                "#EXTINF:4,",
                "e.ts",
                "#EXTINF:4,",
                "f.ts"
            )
        )
        #expect(playlist.resolvedSegments(baseURL: nil).map(\.bitrate) == [nil, 1000, 1000, nil, 2500, 2500])
    }

    @Test("gaps and program date-times are carried per segment")
    func gapAndProgramDateTime() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXT-X-PROGRAM-DATE-TIME:2020-05-06T07:08:09.123Z",
                "#EXTINF:4,",
                "a.ts",
                "#EXT-X-GAP",
                "#EXTINF:4,",
                "b.ts",
                "#EXTINF:4,",
                "c.ts"
            )
        )
        let resolved = playlist.resolvedSegments(baseURL: nil)
        #expect(resolved.map(\.isGap) == [false, true, false])
        #expect(resolved[0].programDateTime == date("2020-05-06T07:08:09.123Z"))
    }

    @Test("the fixture with every tag, resolved")
    func allTagsFixture() throws {
        let playlist = try #require(try Fixtures.parse("media-all-tags").playlist.media)
        let resolved = playlist.resolvedSegments(baseURL: URL(string: "https://example.com/content/v/index.m3u8"))
        #expect(resolved.map(\.mediaSequence) == Array(100...106))
        #expect(resolved.map(\.discontinuitySequence) == [4, 4, 4, 5, 5, 5, 5])
        #expect(
            resolved.map(\.byteRange) == [
                ResolvedByteRange(offset: 720, length: 50000), ResolvedByteRange(offset: 50720, length: 48000), nil, nil, nil, nil, nil,
            ]
        )
        #expect(
            resolved.map(\.initializationSection?.uri) == [
                "init-1.mp4", "init-1.mp4", "init-1.mp4", "init-2.mp4", "init-2.mp4", "init-2.mp4", "init-2.mp4",
            ]
        )
        #expect(resolved[0].initializationSection?.keys.count == 2)
        #expect(resolved[3].initializationSection?.keys == [])
        #expect(resolved.map(\.keys.count) == [2, 2, 2, 0, 0, 1, 1])
        #expect(resolved[5].keys[0].url?.absoluteString == "https://example.com/content/keys/k5.bin")
        #expect(resolved[5].keys[0].iv == Array((0...15).reversed()))
        #expect(resolved[6].url?.absoluteString == "https://example.com/absolute/media-6.mp4")
        #expect(resolved.map(\.bitrate) == [nil, nil, 1200, 800, 800, 800, 800])
        #expect(resolved.map(\.isGap) == [false, false, false, false, true, false, false])
        #expect(isClose(resolved.map(\.startTime), [0, 6, 12, 18, 22.5, 28.5, 34.5]))
        #expect(resolved[0].programDateTime == date("2024-03-01T10:00:00.000Z"))
    }
}
