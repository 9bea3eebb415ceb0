import Foundation
import Testing

@testable import HLS

/// `PlaylistWriter`: what it writes, and that parsing its output gives back the model it was given.
@Suite("Writing and round trips")
struct RoundTripTests {
    @Test("written text is stable: writing the re-parsed model gives the same text", arguments: Fixtures.all)
    func stableText(name: String) throws {
        let parsed = try Fixtures.parse(name)
        let text = PlaylistWriter.write(parsed.playlist)
        let again = try PlaylistParser.parse(text, url: Fixtures.loadURL(name), importedVariables: Fixtures.importedVariables(name))
        #expect(PlaylistWriter.write(again.playlist) == text)
        #expect(text.hasPrefix("#EXTM3U\n"))
        #expect(text.hasSuffix("\n") && !text.hasSuffix("\n\n"))
        #expect(!text.contains("\r"))
    }

    @Test("the simple media playlist is written tag for tag")
    func simpleMediaText() throws {
        let parsed = try Fixtures.parse("rfc8216-8.1-simple-media")
        #expect(
            PlaylistWriter.write(parsed.playlist)
                == m3u8(
                    "#EXTM3U",
                    "#EXT-X-VERSION:3",
                    "#EXT-X-TARGETDURATION:10",
                    "#EXTINF:9.009,",
                    "http://media.example.com/first.ts",
                    "#EXTINF:9.009,",
                    "http://media.example.com/second.ts",
                    "#EXTINF:3.003,",
                    "http://media.example.com/third.ts",
                    "#EXT-X-ENDLIST"
                )
        )
    }

    @Test("a multivariant playlist built in code")
    func multivariantText() throws {
        let playlist = MultivariantPlaylist(
            version: 7,
            independentSegments: true,
            renditions: [
                Rendition(type: .audio, uri: "a/en.m3u8", groupID: "aud", language: "en", name: "English", isDefault: true, channels: "2")
            ],
            variants: [
                VariantStream(
                    uri: "v/720.m3u8",
                    bandwidth: 3_000_000,
                    codecs: "avc1.4d401f,mp4a.40.2",
                    resolution: Resolution(width: 1280, height: 720),
                    frameRate: 25,
                    audio: "aud",
                    closedCaptions: .noClosedCaptions
                )
            ],
            iFrameVariants: [VariantStream(uri: "v/720-iframes.m3u8", bandwidth: 300_000)],
            sessionKeys: [EncryptionKey(method: .sampleAES, uri: "skd://1", keyFormat: "com.apple.streamingkeydelivery")]
        )
        let text = PlaylistWriter.write(.multivariant(playlist))
        #expect(
            text
                == m3u8(
                    "#EXTM3U",
                    "#EXT-X-VERSION:7",
                    "#EXT-X-INDEPENDENT-SEGMENTS",
                    #"#EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI="skd://1",KEYFORMAT="com.apple.streamingkeydelivery""#,
                    #"#EXT-X-MEDIA:TYPE=AUDIO,URI="a/en.m3u8",GROUP-ID="aud",LANGUAGE="en",NAME="English",DEFAULT=YES,CHANNELS="2""#,
                    #"#EXT-X-STREAM-INF:BANDWIDTH=3000000,CODECS="avc1.4d401f,mp4a.40.2",RESOLUTION=1280x720,FRAME-RATE=25,AUDIO="aud",CLOSED-CAPTIONS=NONE"#,
                    "v/720.m3u8",
                    #"#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=300000,URI="v/720-iframes.m3u8""#
                )
        )
        try expectRoundTrip(.multivariant(playlist))
    }

    @Test("a media playlist built in code with every segment tag")
    func mediaWithEveryTag() throws {
        let playlist = MediaPlaylist(
            version: 10,
            targetDuration: 4,
            mediaSequence: 10,
            discontinuitySequence: 2,
            playlistType: .event,
            iFramesOnly: true,
            independentSegments: true,
            start: StartPoint(timeOffset: -8, precise: true),
            definitions: [VariableDefinition(source: .value, name: "v", value: "x")],
            serverControl: ServerControl(canSkipUntil: 24, canSkipDateRanges: true, holdBack: 12, partHoldBack: 3, canBlockReload: true),
            partTarget: 1.002,
            skip: Skip(skippedSegments: 2, recentlyRemovedDateRanges: "a\tb"),
            segments: [
                MediaSegment(
                    uri: "s1.mp4",
                    duration: 4,
                    title: "one, two",
                    tags: [
                        .other("# note"), .key(EncryptionKey(method: .aes128, uri: "k", iv: "0102")),
                        .map(MediaInitializationSection(uri: "i.mp4", byteRange: ByteRange(length: 10, offset: 0))),
                        .byteRange(ByteRange(length: 100, offset: 10)), .discontinuity,
                        .programDateTime("2024-01-01T00:00:00Z"),
                        .dateRange(DateRange(id: "d", classAttribute: "c", startDate: "2024-01-01T00:00:00Z", duration: 1.5, endOnNext: true)),
                        .gap, .bitrate(900),
                        .part(PartialSegment(uri: "p.mp4", duration: 1, independent: true, byteRange: ByteRange(length: 5), gap: false)),
                    ]
                ),
                MediaSegment(uri: "s1.mp4", duration: 3.5, tags: [.byteRange(ByteRange(length: 50)), .key(EncryptionKey(method: .none))]),
            ],
            trailingTags: [.part(PartialSegment(uri: "p2.mp4", duration: 1)), .other("#EXT-X-NEW")],
            preloadHints: [PreloadHint(type: "PART", uri: "p3.mp4", byteRangeStart: 0, byteRangeLength: 10)],
            renditionReports: [RenditionReport(uri: "../b.m3u8", lastMediaSequence: 12, lastPart: 0)],
            endList: true
        )
        try expectRoundTrip(.media(playlist))
        let text = PlaylistWriter.write(.media(playlist))
        #expect(text.contains("\n#EXT-X-SKIP:SKIPPED-SEGMENTS=2,RECENTLY-REMOVED-DATERANGES=\"a\tb\"\n"))
        #expect(text.contains("\n#EXTINF:3.5,\ns1.mp4\n#EXT-X-PART:DURATION=1,URI=\"p2.mp4\"\n#EXT-X-NEW\n#EXT-X-PRELOAD-HINT:"))
        #expect(text.hasSuffix("#EXT-X-RENDITION-REPORT:URI=\"../b.m3u8\",LAST-MSN=12,LAST-PART=0\n#EXT-X-ENDLIST\n"))
    }

    @Test(
        "PlaylistWriter.segmentTag writes each tag as one line",
        arguments: [
            (
                SegmentTag.key(EncryptionKey(method: .aes128, uri: "k", iv: "0A", keyFormat: "identity", keyFormatVersions: "1")),
                #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x0A,KEYFORMAT="identity",KEYFORMATVERSIONS="1""#
            ),
            (.key(EncryptionKey(method: .none)), "#EXT-X-KEY:METHOD=NONE"),
            (.map(MediaInitializationSection(uri: "i.mp4", byteRange: ByteRange(length: 5))), #"#EXT-X-MAP:URI="i.mp4",BYTERANGE="5""#),
            (.byteRange(ByteRange(length: 7, offset: 3)), "#EXT-X-BYTERANGE:7@3"),
            (.discontinuity, "#EXT-X-DISCONTINUITY"),
            (.programDateTime("2024-01-01T00:00:00.5+02:00"), "#EXT-X-PROGRAM-DATE-TIME:2024-01-01T00:00:00.5+02:00"),
            (
                .dateRange(DateRange(id: "x", plannedDuration: 30, otherAttributes: [Attribute(name: "X-A", value: "b", isQuoted: false)])),
                #"#EXT-X-DATERANGE:ID="x",PLANNED-DURATION=30,X-A=b"#
            ),
            (.gap, "#EXT-X-GAP"),
            (.bitrate(128), "#EXT-X-BITRATE:128"),
            (.part(PartialSegment(uri: "p.mp4", duration: 0.25, gap: true)), #"#EXT-X-PART:DURATION=0.25,URI="p.mp4",GAP=YES"#),
            (.other("#EXT-X-ANYTHING:1"), "#EXT-X-ANYTHING:1"),
        ] as [(SegmentTag, String)]
    )
    func segmentTagLines(tag: SegmentTag, line: String) {
        #expect(PlaylistWriter.segmentTag(tag) == line)
    }

    @Test(
        "decimals are written in the shortest text that reads back the same",
        arguments: [
            (10.0, "10"), (0, "0"), (9.009, "9.009"), (0.33334, "0.33334"), (-12.5, "-12.5"), (4.00008, "4.00008"),
            (1e15, "1000000000000000.0"), (1e16, "1e+16"), (0.0000001, "1e-07"), (123456789.123, "123456789.123"),
        ]
    )
    func decimals(value: Double, text: String) throws {
        #expect(PlaylistWriter.decimal(value) == text)
        if value >= 0 {
            let playlist = try parseMedia(m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:1", "#EXTINF:\(text),", "a.ts"))
            #expect(playlist.segments[0].duration == value)
        }
    }

    @Test("enumerated values that were quoted are quoted again when they need it")
    func quotedEnumeratedValues() throws {
        let playlist = try parseMultivariant(
            m3u8(
                "#EXTM3U",
                #"#EXT-X-SESSION-KEY:METHOD="SAMPLE-AES,CTR",URI="k""#,
                #"#EXT-X-SESSION-DATA:DATA-ID="d",URI="d.json",FORMAT="JSON""#,
                #"#EXT-X-STREAM-INF:BANDWIDTH=1,HDCP-LEVEL=" TYPE-0",VIDEO-RANGE="SDR ""#,
                "v.m3u8"
            )
        )
        #expect(playlist.sessionKeys[0].method.rawValue == "SAMPLE-AES,CTR")
        #expect(playlist.variants[0].hdcpLevel == " TYPE-0")
        #expect(playlist.variants[0].videoRange == "SDR ")
        let text = PlaylistWriter.write(.multivariant(playlist))
        #expect(text.contains(#"METHOD="SAMPLE-AES,CTR""#))
        #expect(text.contains(#"HDCP-LEVEL=" TYPE-0",VIDEO-RANGE="SDR ""#))
        #expect(text.contains("FORMAT=JSON\n"))
        try expectRoundTrip(.multivariant(playlist))
    }

    @Test("spellings the model does not keep are written in their canonical form")
    func canonicalForms() throws {
        let parsed = try PlaylistParser.parse(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:9.2",
                #"#EXT-X-KEY:URI="k",METHOD=AES-128,IV=0Xabcdef"#,
                "#EXT-X-BITRATE:+5",
                "#EXTINF:10.000,",
                "a.ts"
            )
        )
        #expect(
            PlaylistWriter.write(parsed.playlist)
                == m3u8(
                    "#EXTM3U",
                    "#EXT-X-TARGETDURATION:10",
                    #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0xabcdef"#,
                    "#EXT-X-BITRATE:5",
                    "#EXTINF:10,",
                    "a.ts"
                )
        )
    }
}
