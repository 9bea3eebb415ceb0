import Foundation
import Testing

@testable import HLS

/// The example playlists of RFC 8216 section 8 and draft-pantos-hls-rfc8216bis, read from `Playlists/`.
@Suite("RFC example playlists")
struct RFCExampleTests {
    @Test("every example parses without warnings and writes back to an equal model", arguments: Fixtures.all)
    func roundTrip(name: String) throws {
        let parsed = try Fixtures.parse(name)
        #expect(parsed.warnings == [])
        try expectRoundTrip(
            parsed.playlist,
            url: Fixtures.loadURL(name),
            importedVariables: Fixtures.importedVariables(name)
        )
    }

    @Test("8.1 simple media playlist")
    func simpleMedia() throws {
        let playlist = try #require(try Fixtures.parse("rfc8216-8.1-simple-media").playlist.media)
        #expect(playlist.version == 3)
        #expect(playlist.targetDuration == 10)
        #expect(playlist.mediaSequence == nil)
        #expect(playlist.endList)
        #expect(playlist.isComplete)
        #expect(
            playlist.segments.map(\.uri) == [
                "http://media.example.com/first.ts", "http://media.example.com/second.ts", "http://media.example.com/third.ts",
            ]
        )
        #expect(playlist.segments.map(\.duration) == [9.009, 9.009, 3.003])
        #expect(playlist.segments.allSatisfy { $0.title == nil && $0.tags.isEmpty })
        #expect(abs(playlist.totalDuration - 21.021) < 1e-9)
    }

    @Test("8.2 live media playlist using HTTPS")
    func liveMedia() throws {
        let playlist = try #require(try Fixtures.parse("rfc8216-8.2-live-https").playlist.media)
        #expect(playlist.targetDuration == 8)
        #expect(playlist.mediaSequence == 2680)
        #expect(!playlist.endList)
        #expect(!playlist.isComplete)
        #expect(playlist.segments.map(\.duration) == [7.975, 7.941, 7.975])
        let resolved = playlist.resolvedSegments(baseURL: Fixtures.loadURL("rfc8216-8.2-live-https"))
        #expect(resolved.map(\.mediaSequence) == [2680, 2681, 2682])
        #expect(
            resolved.map(\.url?.absoluteString) == [
                "https://priv.example.com/fileSequence2680.ts", "https://priv.example.com/fileSequence2681.ts",
                "https://priv.example.com/fileSequence2682.ts",
            ]
        )
    }

    @Test("8.3 encrypted media segments with key rotation")
    func encrypted() throws {
        let playlist = try #require(try Fixtures.parse("rfc8216-8.3-encrypted").playlist.media)
        #expect(playlist.mediaSequence == 7794)
        #expect(playlist.targetDuration == 15)
        #expect(playlist.segments.count == 4)
        #expect(playlist.segments[0].keyTags == [EncryptionKey(method: .aes128, uri: "https://priv.example.com/key.php?r=52")])
        #expect(playlist.segments[1].keyTags == [])
        #expect(playlist.segments[3].keyTags == [EncryptionKey(method: .aes128, uri: "https://priv.example.com/key.php?r=53")])
        #expect(
            playlist.distinctKeys.map(\.uri) == [
                "https://priv.example.com/key.php?r=52", "https://priv.example.com/key.php?r=53",
            ]
        )

        let resolved = playlist.resolvedSegments(baseURL: nil)
        #expect(
            resolved.map { $0.keys.first?.uri } == [
                "https://priv.example.com/key.php?r=52", "https://priv.example.com/key.php?r=52",
                "https://priv.example.com/key.php?r=52", "https://priv.example.com/key.php?r=53",
            ]
        )
        // RFC 8216 5.2: no IV attribute, so the IV is the media sequence number (7794 = 0x1E72).
        #expect(resolved[0].keys[0].iv == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1E, 0x72])
        #expect(resolved[3].keys[0].iv == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1E, 0x75])
        #expect(resolved.allSatisfy { $0.method == .aes128 && !$0.keys[0].ivIsExplicit })
        #expect(isClose(resolved.map(\.startTime), [0, 2.833, 17.833, 31.166]))
    }

    @Test("8.4 multivariant playlist")
    func multivariant() throws {
        let playlist = try #require(try Fixtures.parse("rfc8216-8.4-multivariant").playlist.multivariant)
        #expect(playlist.variants.map(\.bandwidth) == [1_280_000, 2_560_000, 7_680_000, 65000])
        #expect(playlist.variants.map(\.averageBandwidth) == [1_000_000, 2_000_000, 6_000_000, nil])
        #expect(
            playlist.variants.map(\.uri) == [
                "http://example.com/low.m3u8", "http://example.com/mid.m3u8", "http://example.com/hi.m3u8",
                "http://example.com/audio-only.m3u8",
            ]
        )
        #expect(playlist.variants[3].codecs == "mp4a.40.5")
        #expect(playlist.renditions.isEmpty)
        #expect(playlist.iFrameVariants.isEmpty)
    }

    @Test("8.5 multivariant playlist with I-frames")
    func iFrames() throws {
        let playlist = try #require(try Fixtures.parse("rfc8216-8.5-iframes").playlist.multivariant)
        #expect(
            playlist.variants.map(\.uri) == [
                "low/audio-video.m3u8", "mid/audio-video.m3u8", "hi/audio-video.m3u8", "audio-only.m3u8",
            ]
        )
        #expect(playlist.iFrameVariants.map(\.bandwidth) == [86000, 150_000, 550_000])
        #expect(playlist.iFrameVariants.map(\.uri) == ["low/iframe.m3u8", "mid/iframe.m3u8", "hi/iframe.m3u8"])
        #expect(playlist.iFrameVariants.allSatisfy { $0.otherAttributes.isEmpty })
    }

    @Test("8.6 multivariant playlist with alternative audio")
    func alternativeAudio() throws {
        let playlist = try #require(try Fixtures.parse("rfc8216-8.6-alternative-audio").playlist.multivariant)
        let audio = playlist.renditions(ofType: .audio, inGroup: "aac")
        #expect(audio.map(\.name) == ["English", "Deutsch", "Commentary"])
        #expect(audio.map(\.language) == ["en", "de", "en"])
        #expect(audio.map(\.isDefault) == [true, false, false])
        #expect(audio.map(\.autoselect) == [true, true, false])
        #expect(audio.map(\.uri) == ["main/english-audio.m3u8", "main/german-audio.m3u8", "commentary/audio-only.m3u8"])
        #expect(playlist.variants.count == 4)
        #expect(playlist.variants.allSatisfy { $0.audio == "aac" })
        #expect(playlist.variants.map(\.codecs) == ["...", "...", "...", "mp4a.40.5"])
        #expect(playlist.renditions(ofType: .video, inGroup: "aac").isEmpty)
    }

    @Test("8.7 multivariant playlist with video renditions")
    func videoRenditions() throws {
        let playlist = try #require(try Fixtures.parse("rfc8216-8.7-video-renditions").playlist.multivariant)
        #expect(playlist.renditions.count == 9)
        for group in ["low", "mid", "hi"] {
            let renditions = playlist.renditions(ofType: .video, inGroup: group)
            #expect(renditions.map(\.name) == ["Main", "Centerfield", "Dugout"])
            #expect(renditions.map(\.isDefault) == [true, false, false])
            #expect(renditions.map(\.uri) == ["main", "centerfield", "dugout"].map { "\(group)/\($0)/audio-video.m3u8" })
        }
        #expect(playlist.variants.map(\.video) == ["low", "mid", "hi"])
        #expect(playlist.variants.map(\.bandwidth) == [1_280_000, 2_560_000, 7_680_000])
        #expect(playlist.variants.map(\.uri) == ["low/main/audio-video.m3u8", "mid/main/audio-video.m3u8", "hi/main/audio-video.m3u8"])
    }

    @Test("low-latency playlist: parts, preload hint, rendition reports, server control")
    func lowLatency() throws {
        let parsed = try Fixtures.parse("rfc8216bis-low-latency")
        let playlist = try #require(parsed.playlist.media)
        #expect(playlist.version == 6)
        #expect(playlist.targetDuration == 4)
        #expect(playlist.mediaSequence == 266)
        #expect(playlist.partTarget == 0.33334)
        #expect(playlist.serverControl == ServerControl(canSkipUntil: 12, holdBack: nil, partHoldBack: 1, canBlockReload: true))
        #expect(playlist.segments.count == 7)
        #expect(playlist.segments.map(\.uri).first == "fileSequence266.mp4")
        #expect(playlist.segments.map(\.uri).last == "fileSequence272.mp4")
        #expect(playlist.segments[0].mapTag == MediaInitializationSection(uri: "init.mp4"))
        #expect(
            playlist.segments[0].tags.first
                == .other(
                    "# This Playlist is a response to: GET https://example.com/2M/waitForMSN.php?_HLS_msn=273&_HLS_part=2"
                )
        )
        #expect(playlist.segments[5].parts.count == 12)
        #expect(playlist.segments[5].parts[4] == PartialSegment(uri: "filePart271.4.mp4", duration: 0.33334, independent: true))
        #expect(playlist.segments[6].parts.map(\.uri).last == "filePart272.l.mp4")
        #expect(playlist.segments[6].programDateTime == date("2019-02-14T02:14:00.106Z"))
        // The parts of the segment still being written stay after the last URI.
        #expect(playlist.trailingTags.count == 3)
        #expect(playlist.trailingTags.first == .part(PartialSegment(uri: "filePart273.0.mp4", duration: 0.33334, independent: true)))
        #expect(playlist.preloadHints == [PreloadHint(type: "PART", uri: "filePart273.3.mp4")])
        #expect(
            playlist.renditionReports == [
                RenditionReport(uri: "../1M/waitForMSN.php", lastMediaSequence: 273, lastPart: 2),
                RenditionReport(uri: "../4M/waitForMSN.php", lastMediaSequence: 273, lastPart: 1),
            ]
        )
        let resolved = playlist.resolvedSegments(baseURL: Fixtures.loadURL("rfc8216bis-low-latency"))
        #expect(resolved.map(\.mediaSequence) == Array(266...272))
        #expect(resolved.allSatisfy { $0.initializationSection?.url?.absoluteString == "https://example.com/2M/init.mp4" })
    }

    @Test("delta update: EXT-X-SKIP moves the media sequence of the first segment")
    func deltaUpdate() throws {
        let playlist = try #require(try Fixtures.parse("rfc8216bis-delta-update").playlist.media)
        #expect(playlist.version == 9)
        #expect(playlist.mediaSequence == 266)
        #expect(playlist.skip == Skip(skippedSegments: 3))
        #expect(
            playlist.segments.map(\.uri) == [
                "fileSequence269.mp4", "fileSequence270.mp4", "fileSequence271.mp4", "fileSequence272.mp4",
            ]
        )
        #expect(playlist.resolvedSegments(baseURL: nil).map(\.mediaSequence) == [269, 270, 271, 272])
        #expect(playlist.preloadHints == [PreloadHint(type: "PART", uri: "filePart273.4.mp4")])
        #expect(playlist.renditionReports.map(\.lastPart) == [3, 3])
    }

    @Test("content steering")
    func contentSteering() throws {
        let playlist = try #require(try Fixtures.parse("rfc8216bis-content-steering").playlist.multivariant)
        #expect(playlist.contentSteering == ContentSteering(serverURI: "/steering?video=00012", pathwayID: "CDN-A"))
        #expect(playlist.variants.map(\.pathwayID) == ["CDN-A", "CDN-A", "CDN-B", "CDN-B"])
        #expect(playlist.variants.map(\.audio) == ["A", "A", "B", "B"])
        #expect(playlist.renditions.map(\.groupID) == ["A", "B"])
        #expect(playlist.renditions.map(\.name) == ["English", "ENGLISH"])
        let steering = try #require(PlaylistURI.resolve("/steering?video=00012", against: Fixtures.loadURL("rfc8216bis-content-steering")))
        #expect(steering.absoluteString == "https://example.com/steering?video=00012")
    }

    @Test("variables: NAME/VALUE and QUERYPARAM in a multivariant playlist, IMPORT in its media playlist")
    func variables() throws {
        let parsed = try Fixtures.parse("rfc8216bis-variables-multivariant")
        let multivariant = try #require(parsed.playlist.multivariant)
        #expect(
            multivariant.definitions == [
                VariableDefinition(source: .value, name: "cdn", value: "https://cdn.example.com/content"),
                VariableDefinition(source: .value, name: "codecs", value: "avc1.64001f,mp4a.40.2"),
                VariableDefinition(source: .queryParameter, name: "token", value: "abc/123"),
            ]
        )
        #expect(
            multivariant.variants.map(\.uri) == [
                "https://cdn.example.com/content/low/video.m3u8?token=abc/123",
                "https://cdn.example.com/content/hi/video.m3u8?token=abc/123",
            ]
        )
        #expect(multivariant.variants.allSatisfy { $0.codecs == "avc1.64001f,mp4a.40.2" })
        #expect(multivariant.renditions[0].uri == "https://cdn.example.com/content/audio/en.m3u8?token=abc/123")
        #expect(parsed.playlist.variables == Fixtures.importedVariables)

        // The media playlist imports what the multivariant playlist defines.
        let media = try #require(
            try PlaylistParser.parse(
                try Fixtures.data("rfc8216bis-variables-media"),
                url: URL(string: multivariant.variants[0].uri),
                importedVariables: parsed.playlist.variables
            ).playlist.media
        )
        #expect(media.definitions.map(\.source) == [.import, .import, .value])
        #expect(
            media.segments.map(\.uri) == [
                "https://cdn.example.com/content/low/segment0.ts?token=abc/123",
                "https://cdn.example.com/content/low/segment1.ts?token=abc/123",
            ]
        )
        let key = try #require(media.segments[0].keyTags.first)
        #expect(key.uri == "https://cdn.example.com/content/keys/1.key?token=abc/123")
        #expect(key.iv == "000102030405060708090a0b0c0d0e0f")
        #expect(key.ivBytes == Array(0...15))
    }
}
