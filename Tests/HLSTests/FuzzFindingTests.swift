import Foundation
import HLS
import StowageCore
import Testing

/// Inputs found while fuzzing the parser (docs/fuzzing.md), kept as regression tests.
@Suite("Fuzz findings")
struct FuzzFindingTests {
    private static func roundTrips(_ text: String) throws -> Playlist {
        let parsed = try PlaylistParser.parse(text).playlist
        #expect(try PlaylistParser.parse(PlaylistWriter.write(parsed)).playlist == parsed)
        return parsed
    }

    /// scripts/fuzz-hls.sh, 2026-11-27: the only EXT-X-STREAM-INF lacked its URI and was ignored, which left a
    /// multivariant playlist with nothing in it; written out, it read back as a media playlist. It is refused with the
    /// deviation that emptied it, as strict parsing refuses it.
    @Test(arguments: [
        "#EXTM3U\n#EXT-X-UNKNOWN:1\nlow/video-only.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=2560000,CODECS=/english-audio.m3u8\n",
        "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n",
    ])
    func aMultivariantPlaylistWithNoVariantLeftIsRefused(text: String) {
        let error = #expect(throws: PlaylistError.self) { try PlaylistParser.parse(text) }
        let strict = #expect(throws: PlaylistError.self) { try PlaylistParser.parse(text, strict: true) }
        #expect(error != nil && error == strict, "\(String(describing: error)) against \(String(describing: strict))")
        #expect(error?.description.contains("EXT-X-STREAM-INF") == true)
    }

    /// scripts/fuzz-hls.sh, 2026-12-08: an EXT-X-PROGRAM-DATE-TIME whose fraction ran to hundreds of digits crashed the
    /// process inside ICU's date parser (SIGFPE). Only the date-time shape reaches the parser, the fraction cut to nine
    /// digits; other text is not a date.
    @Test func aProgramDateTimeWithAHugeFractionIsReadNotACrash() throws {
        let long = "2024-03-01T10:00:00." + String(repeating: "5", count: 600) + "Z"
        for date in [long, "2024-03-01T10:00:00.5" + String(repeating: "5", count: 40) + "+01:00"] {
            let text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PROGRAM-DATE-TIME:\(date)\n#EXTINF:4,\na.ts\n#EXT-X-ENDLIST\n"
            guard case .media(let media) = try PlaylistParser.parse(text).playlist else {
                Issue.record("expected a media playlist")
                continue
            }
            let resolved = try #require(media.resolvedSegments(baseURL: nil).first?.programDateTime)
            let expected = date.hasSuffix("Z") ? 1_709_287_200.555 : 1_709_283_600.555
            #expect(abs(resolved.timeIntervalSince1970 - expected) < 0.001, "\(resolved)")
        }
        let garbage = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PROGRAM-DATE-TIME:2024-03-01T10:00:00.5\u{0}Z\n#EXTINF:4,\na.ts\n"
        #expect(throws: PlaylistError.self) { try PlaylistParser.parse(garbage, strict: true) }
    }

    /// scripts/fuzz-hls.sh, 2026-12-07: an unknown tag whose name begins with `EXT-X-STREAM-INF` (here followed by NUL
    /// bytes) made the lenient parse expect a multivariant playlist once the only EXTINF (which had no URI) was gone:
    /// written out, the media playlist read back with its TARGETDURATION and KEY dropped. The kind is read from whole
    /// tag names.
    @Test(arguments: ["#EXT-X-STREAM-INF\0\0X:BANDWIDTH=1", "#EXT-X-STREAM-INFO:BANDWIDTH=1", "#EXTINFO:1,"])
    func aTagThatOnlyBeginsLikeAnotherDoesNotDecideThePlaylistsKind(lookalike: String) throws {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n\(lookalike)\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\n#EXTINF:4,\n"
        let playlist = try Self.roundTrips(text)
        guard case .media(let media) = playlist else {
            Issue.record("expected a media playlist")
            return
        }
        #expect(media.targetDuration == 4)
        #expect(media.trailingTags.contains { if case .key = $0 { true } else { false } })
        let written = try PlaylistParser.parse(PlaylistWriter.write(playlist))
        #expect(written.warnings.isEmpty, "\(written.warnings)")
    }

    @Test func aCharacterThatJoinsWithACommaDoesNotHideIt() throws {
        // U+0600 followed by "," is one grapheme cluster; the attribute list is scanned by scalar.
        let playlist = try Self.roundTrips("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-KEY:URI=\"k\",METHOD=\u{0600}\n#EXTINF:1,\na.ts\n")
        guard case .media(let media) = playlist else {
            Issue.record("expected a media playlist")
            return
        }
        #expect(media.segments[0].keyTags.first?.method.rawValue == "\u{0600}")
        #expect(media.segments[0].keyTags.first?.uri == "k")
    }

    @Test func aCombiningMarkAfterATagsColonOrEXTINFsCommaDoesNotHideIt() throws {
        let playlist = try Self.roundTrips("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\u{0301}title\na.ts\n")
        guard case .media(let media) = playlist else {
            Issue.record("expected a media playlist")
            return
        }
        #expect(media.segments[0].duration == 1)
        #expect(media.segments[0].title == "\u{0301}title")
    }

    @Test(arguments: [",", "1,Y=2", "1 ", "zz"])
    func aSubstitutedHexadecimalValueMustStayHexadecimal(value: String) {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-DEFINE:NAME=\"a\",VALUE=\"\(value)\"\n#EXT-X-SERVER-CONTROL:X=0x{$a}\n"
        #expect(throws: PlaylistError.self) { try PlaylistParser.parse(text) }
        #expect(throws: Never.self) {
            try PlaylistParser.parse("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-DEFINE:NAME=\"a\",VALUE=\"0f\"\n#EXT-X-SERVER-CONTROL:X=0x{$a}\n")
        }
    }

    @Test(arguments: [
        "#EXT-X-MAP:URI=\"i\",BYTERANGE=\"9223372036854775807@1\"",
        "#EXT-X-MAP:URI=\"i\",BYTERANGE=\"0@5\"",
        "#EXT-X-PART:DURATION=1,URI=\"p\",BYTERANGE=\"9223372036854775807@1\"",
        "#EXT-X-BYTERANGE:9223372036854775807@1",
        "#EXT-X-BYTERANGE:0@0",
    ])
    func byteRangesThatOverflowOrAreEmptyAreRefused(tag: String) throws {
        do {
            _ = try PlaylistParser.parse("#EXTM3U\n#EXT-X-TARGETDURATION:1\n\(tag)\n#EXTINF:1\na\n")
            Issue.record("accepted \(tag)")
        } catch {
            #expect(error.code == "invalid_byte_range")
            #expect(error.line == 3)
        }
    }

    @Test func variableSubstitutionIsLinearInTheNumberOfOpeners() throws {
        // 4,000 "{$" in a URI line: the old scanner searched for "}" from every one of them.
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\n" + String(repeating: "{$", count: 40_000) + "}\n"
        let parsed = try PlaylistParser.parse(text)
        guard case .media(let media) = parsed.playlist else {
            Issue.record("expected a media playlist")
            return
        }
        #expect(media.segments[0].uri.count == 80_001)
    }

    @Test func tooManyKeyFormatsAtOnceAreRefused() throws {
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n"
        for index in 0..<17 { text += "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://a/\(index)\",KEYFORMAT=\"f\(index)\"\n" }
        text += "#EXTINF:1,\na.ts\n"
        do {
            _ = try PlaylistParser.parse(text)
            Issue.record("accepted 17 KEYFORMATs")
        } catch {
            #expect(error.code == "malformed_tag")
            #expect(error.line == 19)
        }
    }
}
