import Foundation
import Testing

@testable import HLS

/// EXT-X-DEFINE and `{$name}` substitution (RFC 8216bis 4.3, 4.4.2.3).
@Suite("Variable substitution")
struct VariableSubstitutionTests {
    @Test("NAME/VALUE is substituted in URI lines, quoted strings and hexadecimal values")
    func nameValue() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-DEFINE:NAME="base",VALUE="https://cdn.example.com/v1""#,
                #"#EXT-X-DEFINE:NAME="iv-tail",VALUE="0f""#,
                #"#EXT-X-DEFINE:NAME="x_1",VALUE="A""#,
                #"#EXT-X-KEY:METHOD=AES-128,URI="{$base}/key",IV=0x0000000000000000000000000000{$iv-tail}{$iv-tail}"#,
                #"#EXT-X-MAP:URI="{$base}/init.mp4""#,
                "#EXTINF:10,{$x_1} title is not substituted",
                "{$base}/seg-{$x_1}{$x_1}.mp4"
            )
        )
        let segment = playlist.segments[0]
        #expect(segment.uri == "https://cdn.example.com/v1/seg-AA.mp4")
        #expect(segment.title == "{$x_1} title is not substituted")
        #expect(segment.keyTags[0].uri == "https://cdn.example.com/v1/key")
        #expect(segment.keyTags[0].iv == "00000000000000000000000000000f0f")
        #expect(segment.mapTag?.uri == "https://cdn.example.com/v1/init.mp4")
        #expect(
            playlist.definitions == [
                VariableDefinition(source: .value, name: "base", value: "https://cdn.example.com/v1"),
                VariableDefinition(source: .value, name: "iv-tail", value: "0f"),
                VariableDefinition(source: .value, name: "x_1", value: "A"),
            ]
        )
    }

    @Test("enumerated and decimal values are not substituted")
    func notInOtherValues() {
        expectPlaylistError(
            m3u8("#EXTM3U", #"#EXT-X-DEFINE:NAME="bw",VALUE="100""#, "#EXT-X-STREAM-INF:BANDWIDTH={$bw}", "v.m3u8"),
            code: "invalid_attribute_value",
            line: 3
        )
    }

    @Test("text that only looks like a reference is left alone")
    func notReferences() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-DEFINE:NAME="a",VALUE="1""#,
                "#EXTINF:10,",
                "x{$}y{$a b}z{a}{$a}{$",
                "#EXTINF:10,",
                "{$a}{$a",
                "#EXTINF:10,",
                "$a{$$a}"
            )
        )
        #expect(playlist.segments.map(\.uri) == ["x{$}y{$a b}z{a}1{$", "1{$a", "$a{$$a}"])
    }

    @Test("IMPORT takes the value the multivariant playlist defined")
    func importVariable() throws {
        let playlist = try parseMedia(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-DEFINE:IMPORT="host""#, "#EXTINF:10,", "https://{$host}/a.ts"),
            importedVariables: ["host": "edge.example.com", "unused": "x"]
        )
        #expect(playlist.segments[0].uri == "https://edge.example.com/a.ts")
        #expect(playlist.definitions == [VariableDefinition(source: .import, name: "host", value: "edge.example.com")])
        // Variables are not imported unless asked for.
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "https://{$host}/a.ts"),
            code: "undefined_variable",
            line: 4,
            importedVariables: ["host": "edge.example.com"]
        )
    }

    @Test("QUERYPARAM takes the percent-decoded value from the playlist URL's query")
    func queryParameter() throws {
        let url = try #require(URL(string: "https://example.com/live/index.m3u8?session=s%20p&token=a%26b&empty="))
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-DEFINE:QUERYPARAM="token""#,
                #"#EXT-X-DEFINE:QUERYPARAM="session""#,
                #"#EXT-X-DEFINE:QUERYPARAM="empty""#,
                "#EXTINF:10,",
                "seg.ts?t={$token}&s={$session}&e={$empty}"
            ),
            url: url
        )
        #expect(
            playlist.definitions == [
                VariableDefinition(source: .queryParameter, name: "token", value: "a&b"),
                VariableDefinition(source: .queryParameter, name: "session", value: "s p"),
                VariableDefinition(source: .queryParameter, name: "empty", value: ""),
            ]
        )
        #expect(playlist.segments[0].uri == "seg.ts?t=a&b&s=s p&e=")
    }

    @Test("duplicate definitions are an error, whatever their source")
    func duplicate() {
        expectPlaylistError(
            m3u8("#EXTM3U", #"#EXT-X-DEFINE:NAME="a",VALUE="1""#, #"#EXT-X-DEFINE:NAME="a",VALUE="2""#),
            code: "duplicate_variable",
            line: 3
        )
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:1", #"#EXT-X-DEFINE:IMPORT="a""#, #"#EXT-X-DEFINE:NAME="a",VALUE="2""#),
            code: "duplicate_variable",
            line: 4,
            importedVariables: ["a": "1"]
        )
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:1", #"#EXT-X-DEFINE:NAME="a",VALUE="2""#, #"#EXT-X-DEFINE:QUERYPARAM="a""#),
            code: "duplicate_variable",
            line: 4,
            url: URL(string: "https://e.com/p.m3u8?a=1")
        )
    }

    @Test("a reference to a variable nobody defined")
    func undefined() {
        let error = expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-MAP:URI="{$nowhere}/init.mp4""#),
            code: "undefined_variable",
            line: 3
        )
        #expect(error?.text == #"#EXT-X-MAP:URI="{$nowhere}/init.mp4""#)
        #expect(error?.reason.contains("nowhere") == true)
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "{$nowhere}.ts"),
            code: "undefined_variable",
            line: 4
        )
    }

    @Test("a reference before its definition is undefined (forward reference)")
    func forwardReference() {
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "{$late}.ts", #"#EXT-X-DEFINE:NAME="late",VALUE="x""#),
            code: "undefined_variable",
            line: 4
        )
    }

    @Test("IMPORT is not allowed in a multivariant playlist")
    func importInMultivariant() {
        // Even when the caller offers the variable, a multivariant playlist has no parent to import from.
        expectPlaylistError(
            m3u8("#EXTM3U", #"#EXT-X-DEFINE:IMPORT="a""#, "#EXT-X-STREAM-INF:BANDWIDTH=1", "v.m3u8"),
            code: "undefined_variable",
            line: 2,
            importedVariables: ["a": "1"]
        )
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-STREAM-INF:BANDWIDTH=1", "v.m3u8", #"#EXT-X-DEFINE:IMPORT="a""#),
            code: "undefined_variable",
            line: 4
        )
    }

    @Test("IMPORT of a variable the parent does not define")
    func missingImport() {
        let error = expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-DEFINE:IMPORT="missing""#),
            code: "undefined_variable",
            line: 3,
            importedVariables: ["other": "1"]
        )
        #expect(error?.reason.contains("missing") == true)
    }

    @Test("QUERYPARAM of a parameter the URL does not have, or without a URL")
    func missingQueryParameter() {
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-DEFINE:QUERYPARAM="token""#),
            code: "undefined_variable",
            line: 3,
            url: URL(string: "https://example.com/index.m3u8?other=1")
        )
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-DEFINE:QUERYPARAM="token""#),
            code: "undefined_variable",
            line: 3
        )
    }

    @Test("a query parameter or an imported value that cannot stand in a quoted string is refused")
    func unquotableValues() {
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-DEFINE:QUERYPARAM="t""#, #"#EXT-X-KEY:METHOD=AES-128,URI="k?{$t}""#),
            code: "undefined_variable",
            line: 3,
            url: URL(string: "https://e.com/i.m3u8?t=a%22,IV=0x00")
        )
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-DEFINE:IMPORT="t""#),
            code: "undefined_variable",
            line: 3,
            importedVariables: ["t": "line\nbreak"]
        )
    }

    @Test("a substituted URI line is trimmed like any line; one left empty or starting with # is refused")
    func substitutedURILines() throws {
        let playlist = try parseMedia(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-DEFINE:NAME="pad",VALUE="  ""#, "#EXTINF:10,", "{$pad}a.ts{$pad}")
        )
        #expect(playlist.segments[0].uri == "a.ts")
        try expectRoundTrip(.media(playlist))
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-DEFINE:NAME="e",VALUE="""#, "#EXTINF:10,", "{$e}"),
            code: "malformed_tag",
            line: 5
        )
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", ##"#EXT-X-DEFINE:NAME="h",VALUE="#EXT-X-GAP""##, "#EXTINF:10,", "{$h}"),
            code: "malformed_tag",
            line: 5
        )
        expectPlaylistError(
            m3u8("#EXTM3U", ##"#EXT-X-DEFINE:NAME="h",VALUE="# not a variant""##, "#EXT-X-STREAM-INF:BANDWIDTH=1", "{$h}"),
            code: "malformed_tag",
            line: 4
        )
    }

    @Test("substitution is not repeated, so a value that brings in a new reference is refused")
    func nestedReferences() {
        expectPlaylistError(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-DEFINE:NAME="a",VALUE="{$b}""#,
                #"#EXT-X-DEFINE:NAME="b",VALUE="1""#,
                "#EXTINF:10,",
                "{$a}.ts"
            ),
            code: "malformed_tag",
            line: 6
        )
        // Also when the reference only forms with the text around the value.
        expectPlaylistError(
            m3u8("#EXTM3U", #"#EXT-X-DEFINE:NAME="open",VALUE="{$""#, #"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="{$open}open}""#),
            code: "malformed_tag",
            line: 3
        )
    }

    @Test("EXT-X-DEFINE needs NAME with VALUE, IMPORT or QUERYPARAM, and a valid name")
    func malformedDefinitions() {
        expectPlaylistError(m3u8("#EXTM3U", #"#EXT-X-DEFINE:NAME="a""#), code: "missing_attribute", line: 2)
        expectPlaylistError(m3u8("#EXTM3U", #"#EXT-X-DEFINE:VALUE="a""#), code: "missing_attribute", line: 2)
        expectPlaylistError(m3u8("#EXTM3U", #"#EXT-X-DEFINE:NAME="a b",VALUE="1""#), code: "malformed_tag", line: 2)
        expectPlaylistError(m3u8("#EXTM3U", #"#EXT-X-DEFINE:NAME="",VALUE="1""#), code: "malformed_tag", line: 2)
        expectPlaylistError(m3u8("#EXTM3U", #"#EXT-X-DEFINE:NAME=a,VALUE="1""#), code: "invalid_attribute_value", line: 2)
    }

    @Test("the writer keeps the definitions, or leaves them out with the values already substituted")
    func writing() throws {
        let url = URL(string: "https://example.com/index.m3u8?token=t0k")
        let parsed = try PlaylistParser.parse(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-DEFINE:NAME="base",VALUE="https://cdn.example.com""#,
                #"#EXT-X-DEFINE:QUERYPARAM="token""#,
                #"#EXT-X-DEFINE:IMPORT="path""#,
                "#EXTINF:10,",
                "{$base}/{$path}/a.ts?token={$token}"
            ),
            url: url,
            importedVariables: ["path": "p/q"]
        )
        let written = PlaylistWriter.write(parsed.playlist)
        #expect(written.contains(#"#EXT-X-DEFINE:NAME="base",VALUE="https://cdn.example.com""# + "\n"))
        #expect(written.contains(#"#EXT-X-DEFINE:QUERYPARAM="token""# + "\n"))
        #expect(written.contains(#"#EXT-X-DEFINE:IMPORT="path""# + "\n"))
        #expect(written.contains("\nhttps://cdn.example.com/p/q/a.ts?token=t0k\n"))
        try expectRoundTrip(parsed.playlist, url: url, importedVariables: ["path": "p/q"])

        let resolved = PlaylistWriter.write(parsed.playlist, options: .init(omitDefinitions: true))
        #expect(!resolved.contains("EXT-X-DEFINE"))
        // Without the definitions the text stands alone: no URL or imported variables needed.
        var expected = try #require(parsed.playlist.media)
        expected.definitions = []
        #expect(try PlaylistParser.parse(resolved).playlist == .media(expected))
    }
}
