import Foundation
import Testing

@testable import HLS

/// EXT-X-MEDIA, EXT-X-STREAM-INF, EXT-X-I-FRAME-STREAM-INF, EXT-X-SESSION-DATA, EXT-X-CONTENT-STEERING and the
/// header tags a multivariant playlist shares with media playlists.
@Suite("Multivariant playlist parsing")
struct MultivariantParsingTests {
    @Test("the fixture with every multivariant tag")
    func allTagsFixture() throws {
        let playlist = try #require(try Fixtures.parse("multivariant-all-tags").playlist.multivariant)
        #expect(playlist.version == 12)
        #expect(playlist.independentSegments)
        #expect(playlist.start == StartPoint(timeOffset: 10, precise: false))
        #expect(playlist.definitions == [VariableDefinition(source: .value, name: "host", value: "https://media.example.com")])
        #expect(playlist.contentSteering == ContentSteering(serverURI: "https://steering.example.com/s.json", pathwayID: "CDN-A"))
        #expect(
            playlist.sessionData == [
                SessionData(dataID: "com.example.title", value: "Big Buck Bunny, the movie", language: "en"),
                SessionData(dataID: "com.example.lyrics", uri: "lyrics.json", format: "JSON"),
            ]
        )
        #expect(playlist.sessionKeys.map(\.method) == [.sampleAES, .aes128])
        #expect(playlist.otherTags == ["# variants follow", "#EXT-X-UNKNOWN-MULTIVARIANT-TAG:FOO=BAR"])
    }

    @Test("EXT-X-MEDIA with every attribute")
    func renditionAllAttributes() throws {
        let playlist = try #require(try Fixtures.parse("multivariant-all-tags").playlist.multivariant)
        #expect(
            playlist.renditions[0]
                == Rendition(
                    type: .audio,
                    uri: "https://media.example.com/audio/en.m3u8",
                    groupID: "aud",
                    language: "en",
                    associatedLanguage: "en-US",
                    name: "English, stereo",
                    stableRenditionID: "en-2ch",
                    isDefault: true,
                    autoselect: true,
                    bitDepth: 16,
                    sampleRate: 48000,
                    characteristics: "public.accessibility.describes-video",
                    channels: "2"
                )
        )
        #expect(
            playlist.renditions[2]
                == Rendition(
                    type: .subtitles,
                    uri: "subs/de.m3u8",
                    groupID: "subs",
                    language: "de",
                    name: "Deutsch",
                    autoselect: true,
                    forced: false
                )
        )
    }

    @Test("a rendition without URI is carried in the variant's own stream")
    func renditionWithoutURI() throws {
        let playlist = try #require(try Fixtures.parse("multivariant-all-tags").playlist.multivariant)
        #expect(playlist.renditions[1] == Rendition(type: .audio, groupID: "aud", name: "Muxed", isDefault: false))
        #expect(playlist.renditions(ofType: .audio, inGroup: "aud").map(\.uri) == ["https://media.example.com/audio/en.m3u8", nil])
        #expect(
            playlist.renditions[4]
                == Rendition(
                    type: .video,
                    groupID: "angles",
                    name: "Main",
                    isDefault: true,
                    otherAttributes: [Attribute(name: "X-ANGLE", value: "front", isQuoted: true)]
                )
        )
    }

    @Test("CLOSED-CAPTIONS renditions have an INSTREAM-ID and no URI")
    func closedCaptionsRendition() throws {
        let playlist = try parseMultivariant(
            m3u8(
                "#EXTM3U",
                #"#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="English",LANGUAGE="en",INSTREAM-ID="CC1""#,
                #"#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="Service 3",INSTREAM-ID="SERVICE3""#,
                #"#EXT-X-STREAM-INF:BANDWIDTH=1000,CLOSED-CAPTIONS="cc""#,
                "v.m3u8"
            )
        )
        #expect(playlist.renditions(ofType: .closedCaptions, inGroup: "cc").map(\.instreamID) == ["CC1", "SERVICE3"])
        #expect(playlist.renditions.allSatisfy { $0.uri == nil })
        #expect(playlist.variants[0].closedCaptions == .group("cc"))
    }

    @Test("EXT-X-STREAM-INF with every attribute")
    func variantAllAttributes() throws {
        let playlist = try #require(try Fixtures.parse("multivariant-all-tags").playlist.multivariant)
        #expect(
            playlist.variants[0]
                == VariantStream(
                    uri: "https://media.example.com/hd/video.m3u8",
                    bandwidth: 5_000_000,
                    averageBandwidth: 4_500_000,
                    score: 2.5,
                    codecs: "avc1.640028,mp4a.40.2",
                    supplementalCodecs: "dvh1.08.07/db4h",
                    resolution: Resolution(width: 1920, height: 1080),
                    frameRate: 29.97,
                    hdcpLevel: "TYPE-1",
                    allowedCPC: "com.example.drm1:SMART-TV/PC",
                    videoRange: "PQ",
                    requiredVideoLayout: "CH-STEREO",
                    stableVariantID: "hd",
                    audio: "aud",
                    video: "angles",
                    subtitles: "subs",
                    closedCaptions: .group("cc"),
                    pathwayID: "CDN-A",
                    programID: 1
                )
        )
        #expect(playlist.variants[0].resolution?.description == "1920x1080")
    }

    @Test("CLOSED-CAPTIONS=NONE differs from a quoted group named NONE")
    func closedCaptionsNone() throws {
        let playlist = try parseMultivariant(
            m3u8(
                "#EXTM3U",
                "#EXT-X-STREAM-INF:BANDWIDTH=1,CLOSED-CAPTIONS=NONE",
                "a.m3u8",
                #"#EXT-X-STREAM-INF:BANDWIDTH=2,CLOSED-CAPTIONS="NONE""#,
                "b.m3u8",
                "#EXT-X-STREAM-INF:BANDWIDTH=3",
                "c.m3u8"
            )
        )
        #expect(playlist.variants.map(\.closedCaptions) == [.noClosedCaptions, .group("NONE"), nil])
        #expect(PlaylistWriter.write(.multivariant(playlist)).contains("CLOSED-CAPTIONS=NONE\n"))
        #expect(PlaylistWriter.write(.multivariant(playlist)).contains(#"CLOSED-CAPTIONS="NONE""#))
        try expectRoundTrip(.multivariant(playlist))
    }

    @Test("EXT-X-I-FRAME-STREAM-INF takes its URI from the attribute")
    func iFrameVariant() throws {
        let playlist = try #require(try Fixtures.parse("multivariant-all-tags").playlist.multivariant)
        #expect(
            playlist.iFrameVariants == [
                VariantStream(
                    uri: "hd/iframes.m3u8",
                    bandwidth: 300_000,
                    codecs: "avc1.640028",
                    resolution: Resolution(width: 1920, height: 1080),
                    videoRange: "SDR"
                )
            ]
        )
    }

    @Test("EXT-X-SESSION-DATA carries VALUE or URI, with client attributes kept")
    func sessionData() throws {
        let playlist = try parseMultivariant(
            m3u8(
                "#EXTM3U",
                #"#EXT-X-SESSION-DATA:DATA-ID="com.example.movie.title",VALUE="Le Film",LANGUAGE="fr",X-A="1""#,
                #"#EXT-X-SESSION-DATA:DATA-ID="com.example.raw",URI="data.bin",FORMAT=RAW"#,
                "#EXT-X-STREAM-INF:BANDWIDTH=1",
                "v.m3u8"
            )
        )
        #expect(
            playlist.sessionData == [
                SessionData(
                    dataID: "com.example.movie.title",
                    value: "Le Film",
                    language: "fr",
                    otherAttributes: [Attribute(name: "X-A", value: "1", isQuoted: true)]
                ),
                SessionData(dataID: "com.example.raw", uri: "data.bin", format: "RAW"),
            ]
        )
    }

    @Test("EXT-X-SESSION-DATA with both or neither of VALUE and URI is malformed")
    func sessionDataValueOrURI() {
        expectPlaylistError(
            m3u8("#EXTM3U", #"#EXT-X-SESSION-DATA:DATA-ID="a",VALUE="v",URI="u""#),
            code: "malformed_tag",
            line: 2
        )
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1", "v.m3u8", #"#EXT-X-SESSION-DATA:DATA-ID="a""#),
            code: "malformed_tag",
            line: 4
        )
        expectPlaylistError(m3u8("#EXTM3U", #"#EXT-X-SESSION-DATA:VALUE="v""#), code: "missing_attribute", line: 2)
    }

    @Test("EXT-X-CONTENT-STEERING with client attributes, at most once")
    func contentSteering() throws {
        let playlist = try parseMultivariant(
            m3u8("#EXTM3U", #"#EXT-X-CONTENT-STEERING:SERVER-URI="s.json",X-TTL=30"#, "#EXT-X-STREAM-INF:BANDWIDTH=1", "v.m3u8")
        )
        #expect(
            playlist.contentSteering
                == ContentSteering(
                    serverURI: "s.json",
                    otherAttributes: [Attribute(name: "X-TTL", value: "30", isQuoted: false)]
                )
        )
        expectPlaylistError(
            m3u8("#EXTM3U", #"#EXT-X-CONTENT-STEERING:SERVER-URI="a""#, #"#EXT-X-CONTENT-STEERING:SERVER-URI="b""#),
            code: "duplicate_tag",
            line: 3
        )
        expectPlaylistError(m3u8("#EXTM3U", #"#EXT-X-CONTENT-STEERING:PATHWAY-ID="a""#), code: "missing_attribute", line: 2)
    }

    @Test("comments and unknown tags, also before the first variant and between EXT-X-STREAM-INF and its URI")
    func otherTags() throws {
        let playlist = try parseMultivariant(
            m3u8(
                "#EXTM3U",
                "# generated",
                "#EXT-X-APPLE-THING:1",
                "#EXT-X-STREAM-INF:BANDWIDTH=1",
                "# between",
                "#EXT-X-PROGRAM-X",
                "v1.m3u8",
                "#EXT-X-STREAM-INF:BANDWIDTH=2",
                "v2.m3u8",
                "# last"
            )
        )
        #expect(playlist.otherTags == ["# generated", "#EXT-X-APPLE-THING:1", "# between", "#EXT-X-PROGRAM-X", "# last"])
        #expect(playlist.variants.map(\.uri) == ["v1.m3u8", "v2.m3u8"])
        try expectRoundTrip(.multivariant(playlist))
    }

    @Test("unknown attributes of EXT-X-STREAM-INF are kept; a URI attribute there is not its URI")
    func variantOtherAttributes() throws {
        let playlist = try parseMultivariant(
            m3u8("#EXTM3U", #"#EXT-X-STREAM-INF:BANDWIDTH=1,X-FOO="a,b",URI="ignored.m3u8",Y=2"#, "v.m3u8")
        )
        #expect(playlist.variants[0].uri == "v.m3u8")
        #expect(
            playlist.variants[0].otherAttributes == [
                Attribute(name: "X-FOO", value: "a,b", isQuoted: true), Attribute(name: "URI", value: "ignored.m3u8", isQuoted: true),
                Attribute(name: "Y", value: "2", isQuoted: false),
            ]
        )
        try expectRoundTrip(.multivariant(playlist))
    }

    @Test("Playlist.variables collects the definitions")
    func variables() throws {
        let parsed = try PlaylistParser.parse(
            m3u8("#EXTM3U", #"#EXT-X-DEFINE:NAME="a",VALUE="1""#, #"#EXT-X-DEFINE:NAME="b",VALUE="""#, "#EXT-X-STREAM-INF:BANDWIDTH=1", "v.m3u8")
        )
        #expect(parsed.playlist.variables == ["a": "1", "b": ""])
    }
}
