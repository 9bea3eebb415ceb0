import Foundation
import Testing

@testable import HLS

/// Every media playlist tag, one at a time, and the fixture that holds them all.
@Suite("Media playlist parsing")
struct MediaPlaylistParsingTests {
    @Test("header tags")
    func headerTags() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-VERSION:7",
                "#EXT-X-TARGETDURATION:6",
                "#EXT-X-MEDIA-SEQUENCE:42",
                "#EXT-X-DISCONTINUITY-SEQUENCE:3",
                "#EXT-X-PLAYLIST-TYPE:EVENT",
                "#EXT-X-I-FRAMES-ONLY",
                "#EXT-X-INDEPENDENT-SEGMENTS",
                "#EXT-X-START:TIME-OFFSET=-3.5",
                "#EXTINF:6,",
                "a.ts"
            )
        )
        #expect(playlist.version == 7)
        #expect(playlist.targetDuration == 6)
        #expect(playlist.mediaSequence == 42)
        #expect(playlist.discontinuitySequence == 3)
        #expect(playlist.playlistType == .event)
        #expect(playlist.iFramesOnly)
        #expect(playlist.independentSegments)
        #expect(playlist.start == StartPoint(timeOffset: -3.5, precise: nil))
        #expect(!playlist.endList)
        #expect(!playlist.isComplete)
    }

    @Test("PLAYLIST-TYPE:VOD makes a playlist complete without ENDLIST")
    func vod() throws {
        let playlist = try parseMedia(m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:6", "#EXT-X-PLAYLIST-TYPE:VOD"))
        #expect(playlist.playlistType == .vod)
        #expect(playlist.isComplete)
        #expect(playlist.segments.isEmpty)
        #expect(!playlist.iFramesOnly && !playlist.independentSegments && !playlist.endList)
    }

    @Test("EXT-X-START with PRECISE")
    func start() throws {
        let playlist = try parseMedia(m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:6", "#EXT-X-START:PRECISE=YES,TIME-OFFSET=25"))
        #expect(playlist.start == StartPoint(timeOffset: 25, precise: true))
    }

    @Test(
        "EXTINF: duration and title",
        arguments: [
            ("#EXTINF:10,", 10.0, nil),
            ("#EXTINF:9.009,", 9.009, nil),
            ("#EXTINF:10", 10.0, nil),
            ("#EXTINF:10,Intro", 10.0, "Intro"),
            ("#EXTINF:10,Artist - Title, live, 2024", 10.0, "Artist - Title, live, 2024"),
            ("#EXTINF:4.5 , spaced", 4.5, " spaced"),
            ("#EXTINF:0.5,tvg-id=\"x\" a=b", 0.5, "tvg-id=\"x\" a=b"),
        ] as [(String, Double, String?)]
    )
    func extinf(line: String, duration: Double, title: String?) throws {
        let playlist = try parseMedia(m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", line, "segment.ts"))
        #expect(playlist.segments == [MediaSegment(uri: "segment.ts", duration: duration, title: title)])
    }

    @Test("EXT-X-BYTERANGE with and without offset")
    func byteRange() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                "#EXT-X-BYTERANGE:1000@0",
                "#EXTINF:10,",
                "all.ts",
                "#EXTINF:10,",
                "#EXT-X-BYTERANGE:2000",
                "all.ts",
                "#EXT-X-BYTERANGE:500@9000",
                "#EXTINF:10,",
                "all.ts"
            )
        )
        #expect(
            playlist.segments.map(\.byteRange) == [
                ByteRange(length: 1000, offset: 0), ByteRange(length: 2000), ByteRange(length: 500, offset: 9000),
            ]
        )
        #expect(playlist.segments[1].tags == [.byteRange(ByteRange(length: 2000))])
    }

    @Test("ByteRange reads n[@o] and nothing else")
    func byteRangeText() {
        #expect(ByteRange("1000") == ByteRange(length: 1000))
        #expect(ByteRange("1000@24") == ByteRange(length: 1000, offset: 24))
        #expect(ByteRange("0@0") == ByteRange(length: 0, offset: 0))
        for bad in ["", "@", "10@", "@10", "-1", "10@-1", "1@2@3", "ten", "10 @ 2", "1.5"] {
            #expect(ByteRange(bad) == nil, "\(bad)")
        }
        #expect(ByteRange(length: 10, offset: 5).description == "10@5")
        #expect(ByteRange(length: 10).description == "10")
    }

    @Test("EXT-X-DISCONTINUITY, EXT-X-GAP, EXT-X-BITRATE and EXT-X-PROGRAM-DATE-TIME stay with their segment")
    func segmentFlags() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                "#EXT-X-PROGRAM-DATE-TIME:2024-01-02T03:04:05+01:00",
                "#EXT-X-BITRATE:4500",
                "#EXTINF:10,",
                "a.ts",
                "#EXT-X-DISCONTINUITY",
                "#EXT-X-GAP",
                "#EXT-X-PROGRAM-DATE-TIME:2024-01-02T02:04:25.250Z",
                "#EXTINF:10,",
                "b.ts"
            )
        )
        let first = playlist.segments[0]
        let second = playlist.segments[1]
        #expect(first.tags == [.programDateTime("2024-01-02T03:04:05+01:00"), .bitrate(4500)])
        #expect(first.programDateTime == date("2024-01-02T02:04:05.000Z"))
        #expect(!first.isDiscontinuity && !first.isGap)
        #expect(second.tags == [.discontinuity, .gap, .programDateTime("2024-01-02T02:04:25.250Z")])
        #expect(second.isDiscontinuity && second.isGap)
        #expect(second.programDateTime == date("2024-01-02T02:04:25.250Z"))
    }

    @Test("EXT-X-DATERANGE: typed attributes, SCTE35 and client attributes kept in order")
    func dateRange() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-DATERANGE:ID="splice-6FFFFFF0",START-DATE="2014-03-05T11:15:00Z",PLANNED-DURATION=59.993,SCTE35-OUT=0xFC002F0000000000FF000014056FFFFFF000E011622DCAFF000052636200000000000A0008029896F50000008700000000,X-COM-EXAMPLE-BEACON="https://b.example.com/?a=1,2",X-COUNT=3"#,
                #"#EXT-X-DATERANGE:ID="splice-6FFFFFF0",DURATION=59.993,SCTE35-IN=0xFC002A0000000000FF00000F056FFFFFF000401162802E6100000000000A0008029896F50000008700000000"#,
                #"#EXT-X-DATERANGE:ID="chapter",CLASS="com.example.chapter",START-DATE="2014-03-05T11:16:00.5+00:00",END-DATE="2014-03-05T11:17:00.5+00:00",CUE="ONCE,PRE",END-ON-NEXT=YES"#,
                "#EXTINF:10,",
                "a.ts"
            )
        )
        let ranges = playlist.segments[0].dateRanges
        #expect(ranges.count == 3)
        #expect(ranges[0].id == "splice-6FFFFFF0")
        #expect(ranges[0].startDate == "2014-03-05T11:15:00Z")
        #expect(ranges[0].plannedDuration == 59.993)
        #expect(
            ranges[0].otherAttributes == [
                Attribute(
                    name: "SCTE35-OUT",
                    value: "0xFC002F0000000000FF000014056FFFFFF000E011622DCAFF000052636200000000000A0008029896F50000008700000000",
                    isQuoted: false
                ),
                Attribute(name: "X-COM-EXAMPLE-BEACON", value: "https://b.example.com/?a=1,2", isQuoted: true),
                Attribute(name: "X-COUNT", value: "3", isQuoted: false),
            ]
        )
        #expect(ranges[1].duration == 59.993)
        #expect(ranges[1].startDate == nil)
        #expect(ranges[1].otherAttributes.map(\.name) == ["SCTE35-IN"])
        #expect(
            ranges[2]
                == DateRange(
                    id: "chapter",
                    classAttribute: "com.example.chapter",
                    startDate: "2014-03-05T11:16:00.5+00:00",
                    cue: "ONCE,PRE",
                    endDate: "2014-03-05T11:17:00.5+00:00",
                    endOnNext: true
                )
        )
    }

    @Test("EXT-X-MAP: several, after discontinuities, with BYTERANGE")
    func maps() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-MAP:URI="init-a.mp4",BYTERANGE="800@0""#,
                "#EXTINF:10,",
                "a1.mp4",
                "#EXTINF:10,",
                "a2.mp4",
                "#EXT-X-DISCONTINUITY",
                #"#EXT-X-MAP:URI="init-b.mp4",BYTERANGE="600""#,
                "#EXTINF:10,",
                "b1.mp4",
                "#EXT-X-DISCONTINUITY",
                #"#EXT-X-MAP:URI="init-c.mp4",X-EXTRA="1""#,
                "#EXTINF:10,",
                "c1.mp4"
            )
        )
        #expect(
            playlist.segments.map(\.mapTag) == [
                MediaInitializationSection(uri: "init-a.mp4", byteRange: ByteRange(length: 800, offset: 0)), nil,
                MediaInitializationSection(uri: "init-b.mp4", byteRange: ByteRange(length: 600)),
                MediaInitializationSection(
                    uri: "init-c.mp4",
                    otherAttributes: [Attribute(name: "X-EXTRA", value: "1", isQuoted: true)]
                ),
            ]
        )
        #expect(playlist.segments[2].tags.first == .discontinuity)
    }

    @Test("EXT-X-PART-INF, EXT-X-PART, EXT-X-PRELOAD-HINT and EXT-X-RENDITION-REPORT")
    func lowLatencyTags() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXT-X-PART-INF:PART-TARGET=1.004",
                #"#EXT-X-PART:DURATION=1.004,URI="p0.mp4",INDEPENDENT=YES,BYTERANGE="1000@0""#,
                #"#EXT-X-PART:DURATION=1.004,URI="p0.mp4",BYTERANGE="1200",GAP=YES,X-NEW="y""#,
                "#EXTINF:4,",
                "s0.mp4",
                #"#EXT-X-PART:DURATION=0.5,URI="p1.mp4",INDEPENDENT=NO"#,
                #"#EXT-X-PRELOAD-HINT:TYPE=PART,URI="p1.mp4",BYTERANGE-START=2200,BYTERANGE-LENGTH=1000"#,
                #"#EXT-X-PRELOAD-HINT:TYPE=MAP,URI="init2.mp4""#,
                #"#EXT-X-RENDITION-REPORT:URI="../low/index.m3u8",LAST-MSN=10,LAST-PART=2"#,
                #"#EXT-X-RENDITION-REPORT:URI="../high/index.m3u8",LAST-MSN=9"#
            )
        )
        #expect(playlist.partTarget == 1.004)
        #expect(
            playlist.segments[0].parts == [
                PartialSegment(uri: "p0.mp4", duration: 1.004, independent: true, byteRange: ByteRange(length: 1000, offset: 0)),
                PartialSegment(
                    uri: "p0.mp4",
                    duration: 1.004,
                    byteRange: ByteRange(length: 1200),
                    gap: true,
                    otherAttributes: [Attribute(name: "X-NEW", value: "y", isQuoted: true)]
                ),
            ]
        )
        #expect(playlist.trailingTags == [.part(PartialSegment(uri: "p1.mp4", duration: 0.5, independent: false))])
        #expect(
            playlist.preloadHints == [
                PreloadHint(type: "PART", uri: "p1.mp4", byteRangeStart: 2200, byteRangeLength: 1000),
                PreloadHint(type: "MAP", uri: "init2.mp4"),
            ]
        )
        #expect(
            playlist.renditionReports == [
                RenditionReport(uri: "../low/index.m3u8", lastMediaSequence: 10, lastPart: 2),
                RenditionReport(uri: "../high/index.m3u8", lastMediaSequence: 9),
            ]
        )
    }

    @Test("EXT-X-SERVER-CONTROL with every attribute")
    func serverControl() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXT-X-SERVER-CONTROL:CAN-SKIP-UNTIL=24,CAN-SKIP-DATERANGES=YES,HOLD-BACK=12,PART-HOLD-BACK=3.012,CAN-BLOCK-RELOAD=YES,X-FUTURE=1"
            )
        )
        #expect(
            playlist.serverControl
                == ServerControl(
                    canSkipUntil: 24,
                    canSkipDateRanges: true,
                    holdBack: 12,
                    partHoldBack: 3.012,
                    canBlockReload: true,
                    otherAttributes: [Attribute(name: "X-FUTURE", value: "1", isQuoted: false)]
                )
        )
    }

    @Test("EXT-X-SKIP with RECENTLY-REMOVED-DATERANGES")
    func skip() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:4",
                "#EXT-X-MEDIA-SEQUENCE:100",
                "#EXT-X-SERVER-CONTROL:CAN-SKIP-UNTIL=24,CAN-SKIP-DATERANGES=YES",
                "#EXT-X-SKIP:SKIPPED-SEGMENTS=20,RECENTLY-REMOVED-DATERANGES=\"ad-1\tad-2\"",
                "#EXTINF:4,",
                "s120.mp4"
            )
        )
        #expect(playlist.skip == Skip(skippedSegments: 20, recentlyRemovedDateRanges: "ad-1\tad-2"))
        #expect(playlist.resolvedSegments(baseURL: nil).first?.mediaSequence == 120)
    }

    @Test("unknown tags and comments are kept in order, before their segment or after the last one")
    func unknownTagsAndComments() throws {
        let text = m3u8(
            "#EXTM3U",
            "# made by hand",
            "#EXT-X-TARGETDURATION:10",
            "#EXT-X-CUE-OUT:DURATION=30",
            "#EXTINF:10,",
            "#EXT-X-ALLOW-CACHE:NO",
            "a.ts",
            "## comment two",
            "#EXTINF:10,",
            "b.ts",
            "#EXT-X-CUE-IN",
            "# the end"
        )
        let playlist = try parseMedia(text)
        #expect(
            playlist.segments[0].tags == [
                .other("# made by hand"), .other("#EXT-X-CUE-OUT:DURATION=30"), .other("#EXT-X-ALLOW-CACHE:NO"),
            ]
        )
        #expect(playlist.segments[1].tags == [.other("## comment two")])
        #expect(playlist.trailingTags == [.other("#EXT-X-CUE-IN"), .other("# the end")])
        let written = PlaylistWriter.write(.media(playlist))
        #expect(
            written
                == m3u8(
                    "#EXTM3U",
                    "#EXT-X-TARGETDURATION:10",
                    "# made by hand",
                    "#EXT-X-CUE-OUT:DURATION=30",
                    "#EXT-X-ALLOW-CACHE:NO",
                    "#EXTINF:10,",
                    "a.ts",
                    "## comment two",
                    "#EXTINF:10,",
                    "b.ts",
                    "#EXT-X-CUE-IN",
                    "# the end"
                )
        )
    }

    @Test("a decimal EXT-X-TARGETDURATION is rounded up with a warning")
    func decimalTargetDuration() throws {
        let parsed = try PlaylistParser.parse(m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:9.5", "#EXTINF:9.5,", "a.ts"))
        #expect(parsed.playlist.media?.targetDuration == 10)
        #expect(parsed.warnings.map(\.line) == [2])
    }

    @Test("an EXTINF longer than the target duration is accepted with a warning on its line")
    func longSegment() throws {
        let parsed = try PlaylistParser.parse(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:6", "#EXTINF:6.4,", "a.ts", "#EXTINF:6.6,", "b.ts")
        )
        #expect(parsed.playlist.media?.segments.count == 2)
        #expect(parsed.warnings.map(\.line) == [5])
        #expect(parsed.warnings[0].message.contains("6.6"))
        #expect(parsed.warnings[0].description.hasPrefix("line 5: "))
    }

    @Test("header tags may come after the segments")
    func lateHeaderTags() throws {
        let playlist = try parseMedia(
            m3u8("#EXTM3U", "#EXTINF:5,", "a.ts", "#EXT-X-MEDIA-SEQUENCE:7", "#EXT-X-TARGETDURATION:5", "#EXT-X-ENDLIST")
        )
        #expect(playlist.targetDuration == 5)
        #expect(playlist.mediaSequence == 7)
        #expect(playlist.endList)
        #expect(playlist.trailingTags == [])
    }

    @Test("the fixture with every media segment tag")
    func allTagsFixture() throws {
        let parsed = try Fixtures.parse("media-all-tags")
        let playlist = try #require(parsed.playlist.media)
        #expect(playlist.version == 7)
        #expect(playlist.mediaSequence == 100)
        #expect(playlist.discontinuitySequence == 4)
        #expect(playlist.playlistType == .vod)
        #expect(playlist.independentSegments)
        #expect(playlist.start == StartPoint(timeOffset: -12.5, precise: true))
        #expect(
            playlist.segments.map(\.uri) == [
                "media-1.mp4", "media-1.mp4", "media-2.mp4", "media-3.mp4", "media-4.mp4", "media-5.mp4",
                "/absolute/media-6.mp4",
            ]
        )
        #expect(playlist.segments[0].title == "first segment")
        #expect(
            playlist.segments[0].keyTags.map(\.effectiveKeyFormat) == [
                "com.apple.streamingkeydelivery", "urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed",
            ]
        )
        #expect(playlist.segments[2].tags == [.other("#EXT-X-FUTURE-TAG:VALUE=1")])
        #expect(
            playlist.segments[3].tags == [
                .discontinuity, .key(EncryptionKey(method: .none)), .map(MediaInitializationSection(uri: "init-2.mp4")),
                .bitrate(800),
            ]
        )
        #expect(playlist.segments[4].isGap)
        #expect(playlist.segments[6].dateRanges.first?.endDate == "2024-03-01T10:00:12.000Z")
        #expect(playlist.trailingTags == [.other("# a trailing comment")])
        #expect(playlist.endList)
        #expect(playlist.distinctKeys.map(\.method) == [.sampleAES, .sampleAES, .aes128])
    }
}
