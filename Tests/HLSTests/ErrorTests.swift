import Foundation
import StowageCore
import Testing

@testable import HLS

/// Every way a playlist can be refused, each with its stable code and the line it names.
@Suite("Parse errors")
struct ErrorTests {
    /// A playlist that must fail, the code it must fail with and the 1-based line (0: the whole playlist).
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var lines: [String]
        var code: String
        var line: Int
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "not starting with #EXTM3U", lines: ["#EXT-X-TARGETDURATION:10", "#EXTM3U"], code: "not_a_playlist", line: 1),
        Case(name: "an HTML page", lines: ["<!DOCTYPE html>", "<html>"], code: "not_a_playlist", line: 1),
        Case(name: "a second #EXTM3U", lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTM3U"], code: "duplicate_tag", line: 3),
        Case(name: "missing EXT-X-TARGETDURATION", lines: ["#EXTM3U", "#EXTINF:10,", "a.ts"], code: "missing_required_tag", line: 0),
        Case(name: "an empty playlist has no target duration", lines: ["#EXTM3U"], code: "missing_required_tag", line: 0),
        Case(name: "bad EXT-X-TARGETDURATION", lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:ten"], code: "malformed_tag", line: 2),
        Case(
            name: "duplicate EXT-X-TARGETDURATION",
            lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "a.ts", "#EXT-X-TARGETDURATION:10"],
            code: "duplicate_tag",
            line: 5
        ),
        Case(
            name: "duplicate EXT-X-MEDIA-SEQUENCE",
            lines: ["#EXTM3U", "#EXT-X-MEDIA-SEQUENCE:1", "#EXT-X-MEDIA-SEQUENCE:1"],
            code: "duplicate_tag",
            line: 3
        ),
        Case(name: "duplicate EXT-X-VERSION", lines: ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-VERSION:3"], code: "duplicate_tag", line: 3),
        Case(name: "EXT-X-VERSION 0", lines: ["#EXTM3U", "#EXT-X-VERSION:0"], code: "malformed_tag", line: 2),
        Case(name: "negative EXT-X-MEDIA-SEQUENCE", lines: ["#EXTM3U", "#EXT-X-MEDIA-SEQUENCE:-1"], code: "malformed_tag", line: 2),
        Case(
            name: "EXT-X-DISCONTINUITY-SEQUENCE beyond Int",
            lines: ["#EXTM3U", "#EXT-X-DISCONTINUITY-SEQUENCE:18446744073709551616"],
            code: "malformed_tag",
            line: 2
        ),
        Case(name: "bad EXT-X-PLAYLIST-TYPE", lines: ["#EXTM3U", "#EXT-X-PLAYLIST-TYPE:LIVE"], code: "malformed_tag", line: 2),
        Case(
            name: "EXTINF without URI at the end",
            lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "a.ts", "#EXTINF:10,", "#EXT-X-ENDLIST"],
            code: "missing_uri",
            line: 5
        ),
        Case(
            name: "EXTINF followed by EXTINF",
            lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "#EXTINF:10,", "a.ts"],
            code: "missing_uri",
            line: 3
        ),
        Case(
            name: "EXTINF without duration",
            lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:,title", "a.ts"],
            code: "malformed_tag",
            line: 3
        ),
        Case(name: "EXTINF with a negative duration", lines: ["#EXTM3U", "#EXTINF:-1,", "a.ts"], code: "malformed_tag", line: 2),
        Case(name: "EXTINF with an infinite duration", lines: ["#EXTM3U", "#EXTINF:inf,", "a.ts"], code: "malformed_tag", line: 2),
        Case(name: "EXTINF with a hex duration", lines: ["#EXTM3U", "#EXTINF:0x10,", "a.ts"], code: "malformed_tag", line: 2),
        Case(
            name: "EXT-X-STREAM-INF without URI at the end",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1", "a.m3u8", "#EXT-X-STREAM-INF:BANDWIDTH=2"],
            code: "missing_uri",
            line: 4
        ),
        Case(
            name: "EXT-X-STREAM-INF followed by another",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1", "#EXT-X-STREAM-INF:BANDWIDTH=2", "a.m3u8"],
            code: "missing_uri",
            line: 2
        ),
        Case(
            name: "EXT-X-STREAM-INF followed by EXT-X-MEDIA",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1", #"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="b""#, "a.m3u8"],
            code: "missing_uri",
            line: 2
        ),
        Case(name: "URI line without EXTINF", lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "a.ts"], code: "malformed_tag", line: 3),
        Case(
            name: "URI line after a complete variant",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1", "a.m3u8", "b.m3u8"],
            code: "malformed_tag",
            line: 4
        ),
        Case(name: "EXT-X-KEY without METHOD", lines: ["#EXTM3U", #"#EXT-X-KEY:URI="k""#], code: "missing_attribute", line: 2),
        Case(name: "EXT-X-KEY without URI", lines: ["#EXTM3U", "#EXT-X-KEY:METHOD=AES-128"], code: "missing_attribute", line: 2),
        Case(name: "EXT-X-KEY with an empty METHOD", lines: ["#EXTM3U", #"#EXT-X-KEY:METHOD=,URI="k""#], code: "invalid_attribute_value", line: 2),
        Case(
            name: "EXT-X-KEY with an unquoted URI",
            lines: ["#EXTM3U", "#EXT-X-KEY:METHOD=AES-128,URI=k"],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "METHOD=NONE with a URI",
            lines: ["#EXTM3U", #"#EXT-X-KEY:METHOD=NONE,URI="k""#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "IV too long",
            lines: ["#EXTM3U", #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x000102030405060708090A0B0C0D0E0F10"#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "IV not hex",
            lines: ["#EXTM3U", #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x0001020304050607080G0A0B0C0D0E0F"#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "IV without 0x",
            lines: ["#EXTM3U", #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=000102030405060708090A0B0C0D0E0F"#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(name: "IV with no digits", lines: ["#EXTM3U", #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x"#], code: "invalid_attribute_value", line: 2),
        Case(
            name: "IV with full-width digits",
            lines: ["#EXTM3U", #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x０１０２０３０４０５０６０７０８"#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "EXT-X-SESSION-KEY with METHOD=NONE",
            lines: ["#EXTM3U", "#EXT-X-SESSION-KEY:METHOD=NONE"],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(name: "EXT-X-MAP without URI", lines: ["#EXTM3U", #"#EXT-X-MAP:BYTERANGE="1@0""#], code: "missing_attribute", line: 2),
        Case(
            name: "EXT-X-MAP with a bad BYTERANGE",
            lines: ["#EXTM3U", #"#EXT-X-MAP:URI="i.mp4",BYTERANGE="1@x""#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "bad RESOLUTION",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1,RESOLUTION=1920*1080", "v.m3u8"],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "RESOLUTION without height",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1,RESOLUTION=1920x", "v.m3u8"],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(name: "bad BANDWIDTH", lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1.5M", "v.m3u8"], code: "invalid_attribute_value", line: 2),
        Case(name: "negative BANDWIDTH", lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=-1", "v.m3u8"], code: "invalid_attribute_value", line: 2),
        Case(name: "missing BANDWIDTH", lines: ["#EXTM3U", "#EXT-X-STREAM-INF:AVERAGE-BANDWIDTH=1", "v.m3u8"], code: "missing_attribute", line: 2),
        Case(
            name: "bad FRAME-RATE",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1,FRAME-RATE=fast", "v.m3u8"],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "bad CLOSED-CAPTIONS",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1,CLOSED-CAPTIONS=cc1", "v.m3u8"],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "EXT-X-I-FRAME-STREAM-INF without URI",
            lines: ["#EXTM3U", "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1"],
            code: "missing_attribute",
            line: 2
        ),
        Case(
            name: "mixed playlist kinds: a media tag in a multivariant playlist",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1", "v.m3u8", "#EXT-X-TARGETDURATION:10"],
            code: "mixed_playlist_kinds",
            line: 4
        ),
        Case(
            name: "mixed playlist kinds: a multivariant tag in a media playlist",
            lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "a.ts", #"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="b""#],
            code: "mixed_playlist_kinds",
            line: 5
        ),
        Case(
            name: "mixed playlist kinds: EXT-X-KEY after EXT-X-STREAM-INF",
            lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1", #"#EXT-X-KEY:METHOD=AES-128,URI="k""#, "v.m3u8"],
            code: "mixed_playlist_kinds",
            line: 3
        ),
        Case(
            name: "unterminated quoted string",
            lines: ["#EXTM3U", #"#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS="avc1.64001f"#, "v.m3u8"],
            code: "malformed_tag",
            line: 2
        ),
        Case(name: "attribute without value", lines: ["#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH", "v.m3u8"], code: "malformed_tag", line: 2),
        Case(name: "garbage after a quoted string", lines: ["#EXTM3U", #"#EXT-X-MAP:URI="a"b"#], code: "malformed_tag", line: 2),
        Case(
            name: "malformed EXT-X-PROGRAM-DATE-TIME",
            lines: ["#EXTM3U", "#EXT-X-PROGRAM-DATE-TIME:yesterday at noon"],
            code: "malformed_tag",
            line: 2
        ),
        Case(
            name: "EXT-X-PROGRAM-DATE-TIME without time zone",
            lines: ["#EXTM3U", "#EXT-X-PROGRAM-DATE-TIME:2024-01-01T00:00:00"],
            code: "malformed_tag",
            line: 2
        ),
        Case(name: "bad EXT-X-BYTERANGE", lines: ["#EXTM3U", "#EXT-X-BYTERANGE:10@", "#EXTINF:1,", "a.ts"], code: "malformed_tag", line: 2),
        Case(name: "EXT-X-BYTERANGE with a negative length", lines: ["#EXTM3U", "#EXT-X-BYTERANGE:-10@0"], code: "malformed_tag", line: 2),
        Case(
            name: "EXT-X-BYTERANGE without offset on the first segment",
            lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "#EXT-X-BYTERANGE:100", "a.ts"],
            code: "invalid_byte_range",
            line: 4
        ),
        Case(
            name: "EXT-X-BYTERANGE without offset after a different resource",
            lines: [
                "#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXT-X-BYTERANGE:100@0", "#EXTINF:10,", "a.ts", "#EXT-X-BYTERANGE:100",
                "#EXTINF:10,", "b.ts",
            ],
            code: "invalid_byte_range",
            line: 6
        ),
        Case(
            name: "EXT-X-BYTERANGE without offset after a whole resource",
            lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "a.ts", "#EXT-X-BYTERANGE:100", "#EXTINF:10,", "a.ts"],
            code: "invalid_byte_range",
            line: 5
        ),
        Case(
            name: "EXT-X-BYTERANGE that overflows",
            lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXT-X-BYTERANGE:9223372036854775807@1", "#EXTINF:10,", "a.ts"],
            code: "invalid_byte_range",
            line: 3
        ),
        Case(
            name: "EXT-X-BYTERANGE that overflows when it continues the previous range",
            lines: [
                "#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXT-X-BYTERANGE:9223372036854775800@0", "#EXTINF:10,", "a.ts",
                "#EXT-X-BYTERANGE:100", "#EXTINF:10,", "a.ts",
            ],
            code: "invalid_byte_range",
            line: 6
        ),
        Case(
            name: "EXT-X-MEDIA without GROUP-ID",
            lines: ["#EXTM3U", #"#EXT-X-MEDIA:TYPE=AUDIO,NAME="English""#],
            code: "missing_attribute",
            line: 2
        ),
        Case(name: "EXT-X-MEDIA without NAME", lines: ["#EXTM3U", #"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac""#], code: "missing_attribute", line: 2),
        Case(name: "EXT-X-MEDIA without TYPE", lines: ["#EXTM3U", #"#EXT-X-MEDIA:GROUP-ID="aac",NAME="a""#], code: "missing_attribute", line: 2),
        Case(
            name: "EXT-X-MEDIA with a bad TYPE",
            lines: ["#EXTM3U", #"#EXT-X-MEDIA:TYPE=TEXT,GROUP-ID="t",NAME="a",URI="t.m3u8""#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "EXT-X-MEDIA with a bad DEFAULT",
            lines: ["#EXTM3U", #"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="a",DEFAULT=yes"#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "SUBTITLES without URI",
            lines: ["#EXTM3U", #"#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="s",NAME="English""#],
            code: "missing_attribute",
            line: 2
        ),
        Case(
            name: "CLOSED-CAPTIONS with URI",
            lines: ["#EXTM3U", #"#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="English",INSTREAM-ID="CC1",URI="cc.m3u8""#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "CLOSED-CAPTIONS without INSTREAM-ID",
            lines: ["#EXTM3U", #"#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="English""#],
            code: "missing_attribute",
            line: 2
        ),
        Case(
            name: "EXT-X-DATERANGE without ID",
            lines: ["#EXTM3U", #"#EXT-X-DATERANGE:START-DATE="2024-01-01T00:00:00Z""#],
            code: "missing_attribute",
            line: 2
        ),
        Case(
            name: "EXT-X-DATERANGE with a bad START-DATE",
            lines: ["#EXTM3U", #"#EXT-X-DATERANGE:ID="a",START-DATE="soon""#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "EXT-X-DATERANGE END-ON-NEXT without CLASS",
            lines: ["#EXTM3U", #"#EXT-X-DATERANGE:ID="a",END-ON-NEXT=YES"#],
            code: "missing_attribute",
            line: 2
        ),
        Case(name: "EXT-X-PART without DURATION", lines: ["#EXTM3U", #"#EXT-X-PART:URI="p.mp4""#], code: "missing_attribute", line: 2),
        Case(name: "EXT-X-PART without URI", lines: ["#EXTM3U", "#EXT-X-PART:DURATION=1"], code: "missing_attribute", line: 2),
        Case(name: "EXT-X-PART-INF without PART-TARGET", lines: ["#EXTM3U", "#EXT-X-PART-INF:X=1"], code: "missing_attribute", line: 2),
        Case(
            name: "EXT-X-PRELOAD-HINT with a bad TYPE",
            lines: ["#EXTM3U", #"#EXT-X-PRELOAD-HINT:TYPE=SEGMENT,URI="s.mp4""#],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(
            name: "EXT-X-SKIP after the first segment",
            lines: ["#EXTM3U", "#EXT-X-TARGETDURATION:4", "#EXTINF:4,", "a.ts", "#EXT-X-SKIP:SKIPPED-SEGMENTS=1"],
            code: "malformed_tag",
            line: 5
        ),
        Case(name: "EXT-X-SKIP without SKIPPED-SEGMENTS", lines: ["#EXTM3U", "#EXT-X-SKIP:X=1"], code: "missing_attribute", line: 2),
        Case(
            name: "EXT-X-SERVER-CONTROL with a bad HOLD-BACK",
            lines: ["#EXTM3U", "#EXT-X-SERVER-CONTROL:HOLD-BACK=-1"],
            code: "invalid_attribute_value",
            line: 2
        ),
        Case(name: "EXT-X-START without TIME-OFFSET", lines: ["#EXTM3U", "#EXT-X-START:PRECISE=YES"], code: "missing_attribute", line: 2),
        Case(
            name: "duplicate EXT-X-START",
            lines: ["#EXTM3U", "#EXT-X-START:TIME-OFFSET=1", "#EXT-X-START:TIME-OFFSET=2"],
            code: "duplicate_tag",
            line: 3
        ),
        Case(name: "bad EXT-X-BITRATE", lines: ["#EXTM3U", "#EXT-X-BITRATE:fast"], code: "malformed_tag", line: 2),
    ]

    @Test("each bad playlist fails with its code on its line", arguments: cases)
    func failure(testCase: Case) {
        let error = expectPlaylistError(m3u8(testCase.lines), code: testCase.code, line: testCase.line)
        if let error, testCase.line > 0 {
            #expect(error.text == testCase.lines[testCase.line - 1])
        }
    }

    /// What a lenient parse (the default) must accept, as players do, each with a warning on the line strict parsing
    /// names.
    static let tolerated: Set<String> = [
        "not starting with #EXTM3U", "a second #EXTM3U", "missing EXT-X-TARGETDURATION", "an empty playlist has no target duration",
        "duplicate EXT-X-MEDIA-SEQUENCE",
        "duplicate EXT-X-VERSION", "negative EXT-X-MEDIA-SEQUENCE", "bad EXT-X-PLAYLIST-TYPE", "EXTINF without URI at the end",
        "duplicate EXT-X-TARGETDURATION", "EXTINF followed by EXTINF", "EXTINF with a negative duration", "URI line without EXTINF",
        "EXT-X-STREAM-INF without URI at the end", "URI line after a complete variant", "METHOD=NONE with a URI", "IV without 0x",
        "missing BANDWIDTH", "mixed playlist kinds: a media tag in a multivariant playlist",
        "mixed playlist kinds: a multivariant tag in a media playlist", "mixed playlist kinds: EXT-X-KEY after EXT-X-STREAM-INF",
        "EXT-X-KEY with an unquoted URI", "EXT-X-PROGRAM-DATE-TIME without time zone", "EXT-X-MEDIA without NAME", "EXT-X-MEDIA without GROUP-ID",
        "EXT-X-MEDIA with a bad DEFAULT", "duplicate EXT-X-START", "EXT-X-BYTERANGE without offset after a different resource",
        "EXT-X-BYTERANGE without offset on the first segment", "EXT-X-BYTERANGE without offset after a whole resource",
        // Tags no segment needs, dropped when malformed.
        "EXT-X-DATERANGE END-ON-NEXT without CLASS", "EXT-X-DATERANGE with a bad START-DATE", "EXT-X-DATERANGE without ID",
        "EXT-X-SKIP after the first segment", "EXT-X-SKIP without SKIPPED-SEGMENTS",
        "EXT-X-START without TIME-OFFSET", "malformed EXT-X-PROGRAM-DATE-TIME",
    ]

    @Test("read leniently, each bad playlist either fails the same way or parses with a warning on that line", arguments: cases)
    func lenient(testCase: Case) throws {
        let text = m3u8(testCase.lines)
        do {
            let parsed = try PlaylistParser.parse(text)
            #expect(Self.tolerated.contains(testCase.name), "tolerated but not expected to be: \(parsed.warnings)")
            #expect(parsed.warnings.contains { $0.line == testCase.line }, "no warning on line \(testCase.line): \(parsed.warnings)")
            // What was read is a valid playlist: written out, it parses strictly. (A multivariant playlist with nothing
            // left in it is refused with its first deviation, since written out it would read as a media playlist.)
            let written = PlaylistWriter.write(parsed.playlist)
            #expect(throws: Never.self, "\(written)") { try PlaylistParser.parse(written, strict: true) }
        } catch {
            #expect(!Self.tolerated.contains(testCase.name), "\(error)")
            #expect(error.code == testCase.code)
            #expect(error.line == testCase.line)
        }
    }

    @Test("bytes that are not UTF-8")
    func notUTF8() {
        let bytes = Array("#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,caf".utf8) + [0xE9] + Array("\na.ts\n".utf8)
        #expect(throws: PlaylistError.notUTF8) { try PlaylistParser.parse(bytes) }
        let error = #expect(throws: PlaylistError.self) { try PlaylistParser.parse(Data([0x23, 0x45, 0xFF, 0xFE])) }
        #expect(error?.code == "not_utf8")
        #expect(error?.line == 0)
        // The same text in UTF-8 parses.
        let valid = Array("#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,café\na.ts\n".utf8)
        #expect(throws: Never.self) { try PlaylistParser.parse(valid) }
    }

    @Test("empty input is not a playlist")
    func empty() {
        expectPlaylistError("", code: "not_a_playlist", line: 1)
        expectPlaylistError("\n", code: "not_a_playlist", line: 1)
        #expect(throws: PlaylistError.notAPlaylist("")) { try PlaylistParser.parse([UInt8]()) }
    }

    @Test("input over the size limit is refused before it is read")
    func tooLarge() {
        let bytes = [UInt8](repeating: UInt8(ascii: "#"), count: PlaylistParser.maximumSize + 1)
        let error = #expect(throws: PlaylistError.self) { try PlaylistParser.parse(bytes) }
        #expect(error?.code == "too_large")
        #expect(error?.line == 0)
    }

    @Test("the error names the line as counted in the input, blank lines and comments included")
    func lineNumbers() {
        let error = expectPlaylistError(
            m3u8("#EXTM3U", "", "# comment", "#EXT-X-TARGETDURATION:10", "", "", "#EXTINF:10,", "   ", "#EXT-X-KEY:METHOD=AES-128"),
            code: "missing_attribute",
            line: 9
        )
        #expect(error?.text == "#EXT-X-KEY:METHOD=AES-128")
    }

    @Test("description, reason and text")
    func description() throws {
        let error = try #require(
            expectPlaylistError(m3u8("#EXTM3U", "#EXT-X-KEY:METHOD=AES-128"), code: "missing_attribute", line: 2)
        )
        #expect(error.description == "missing_attribute at line 2: required attribute URI is missing (in `#EXT-X-KEY:METHOD=AES-128`)")
        let whole = try #require(expectPlaylistError("#EXTM3U\n", code: "missing_required_tag", line: 0))
        #expect(whole.description.hasPrefix("missing_required_tag: EXT-X-TARGETDURATION is required"))
        let long = "#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"" + String(repeating: "a", count: 300)
        let truncated = try #require(expectPlaylistError(m3u8("#EXTM3U", long, "v.m3u8"), code: "malformed_tag", line: 2))
        #expect(truncated.text == String(long.prefix(200)) + "…")
    }

    @Test("errors are values: equal errors compare equal")
    func equality() {
        #expect(PlaylistError.duplicateTag(line: 3, text: "x") == PlaylistError.duplicateTag(line: 3, text: "x"))
        #expect(PlaylistError.duplicateTag(line: 3, text: "x") != PlaylistError.duplicateTag(line: 4, text: "x"))
        #expect(PlaylistError.undefinedVariable("a", line: 1, text: "").code == "undefined_variable")
        #expect(PlaylistError.unresolvableVariable("a", line: 1, text: "", reason: "r").code == "undefined_variable")
        #expect(PlaylistError.invalidByteRange(line: 1, text: "", reason: "r").code == "invalid_byte_range")
        #expect(PlaylistError.tooLarge("r").code == "too_large")
        #expect(PlaylistError.mixedPlaylistKinds(line: 1, text: "").code == "mixed_playlist_kinds")
    }
}
