import Foundation
import Testing

@testable import HLS

/// What real playlists do that the RFC's examples do not.
@Suite("Pitfalls")
struct PitfallTests {
    static let simple = m3u8(
        "#EXTM3U",
        "#EXT-X-VERSION:3",
        "#EXT-X-TARGETDURATION:10",
        "#EXTINF:9.009,",
        "first.ts",
        "#EXTINF:3.003,title",
        "second.ts",
        "#EXT-X-ENDLIST"
    )

    @Test("a UTF-8 byte order mark is skipped, in text and in bytes")
    func byteOrderMark() throws {
        let expected = try PlaylistParser.parse(Self.simple).playlist
        #expect(try PlaylistParser.parse("\u{FEFF}" + Self.simple).playlist == expected)
        #expect(try PlaylistParser.parse([0xEF, 0xBB, 0xBF] + Array(Self.simple.utf8)).playlist == expected)
        // Lines are still counted from the first line after the mark.
        expectPlaylistError("\u{FEFF}#EXTM3U\n#EXT-X-TARGETDURATION:10\nnot-after-extinf.ts\n", code: "malformed_tag", line: 3)
        // A mark anywhere else is not skipped.
        expectPlaylistError("\u{FEFF}\u{FEFF}#EXTM3U\n", code: "not_a_playlist", line: 1)
    }

    @Test("CRLF line ends, also mixed with LF, give the same playlist and the same line numbers")
    func crlf() throws {
        let expected = try PlaylistParser.parse(Self.simple).playlist
        let crlf = Self.simple.replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try PlaylistParser.parse(crlf).playlist == expected)
        #expect(try PlaylistParser.parse(Array(crlf.utf8)).playlist == expected)
        var mixed = ""
        for (index, line) in Self.simple.split(separator: "\n").enumerated() { mixed += line + (index % 2 == 0 ? "\r\n" : "\n") }
        #expect(try PlaylistParser.parse(mixed).playlist == expected)
        expectPlaylistError("#EXTM3U\r\n#EXT-X-TARGETDURATION:10\r\n\r\n#EXTINF:10,\r\n", code: "missing_uri", line: 4)
        // The writer uses LF only.
        #expect(!PlaylistWriter.write(try PlaylistParser.parse(crlf).playlist).contains("\r"))
    }

    @Test("no newline after the last line")
    func noFinalNewline() throws {
        let expected = try PlaylistParser.parse(Self.simple).playlist
        #expect(try PlaylistParser.parse(String(Self.simple.dropLast())).playlist == expected)
        let endsWithURI = try parseMedia("#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nlast.ts")
        #expect(endsWithURI.segments.map(\.uri) == ["last.ts"])
        #expect(try PlaylistParser.parse("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8").playlist.multivariant?.variants.count == 1)
    }

    @Test("blank lines, whitespace-only lines and whitespace around lines")
    func whitespace() throws {
        let text =
            "  #EXTM3U  \n\n \t \n#EXT-X-VERSION:3\t\n   #EXT-X-TARGETDURATION:10\n\n#EXTINF:9.009,\n\n   first.ts   \n\t#EXTINF:3.003,title \n second.ts\n\n#EXT-X-ENDLIST\n\n\n"
        #expect(try PlaylistParser.parse(text).playlist == PlaylistParser.parse(Self.simple).playlist)
    }

    @Test("whitespace inside attribute lists, and a trailing comma")
    func attributeWhitespace() throws {
        let playlist = try parseMultivariant(
            m3u8("#EXTM3U", #"#EXT-X-STREAM-INF: BANDWIDTH = 1000 ,CODECS= "a, b" , RESOLUTION=10x20,"#, "v.m3u8")
        )
        #expect(playlist.variants == [VariantStream(uri: "v.m3u8", bandwidth: 1000, codecs: "a, b", resolution: Resolution(width: 10, height: 20))])
    }

    @Test("attributes in any order", arguments: 0..<6)
    func attributeOrder(permutation: Int) throws {
        let attributes = [#"BANDWIDTH=2000000"#, #"CODECS="avc1.640028,mp4a.40.2""#, #"RESOLUTION=1920x1080"#]
        let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
        let list = orders[permutation].map { attributes[$0] }.joined(separator: ",")
        let playlist = try parseMultivariant(m3u8("#EXTM3U", "#EXT-X-STREAM-INF:" + list, "hd.m3u8"))
        #expect(
            playlist.variants == [
                VariantStream(
                    uri: "hd.m3u8",
                    bandwidth: 2_000_000,
                    codecs: "avc1.640028,mp4a.40.2",
                    resolution: Resolution(width: 1920, height: 1080)
                )
            ]
        )
    }

    @Test("quoted strings may hold commas, equals signs and other delimiters")
    func quotedDelimiters() throws {
        let playlist = try parseMultivariant(
            m3u8(
                "#EXTM3U",
                #"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a,b",NAME="Dolby 5.1, Director's cut=yes",URI="a.m3u8?x=1,y=2""#,
                #"#EXT-X-STREAM-INF:BANDWIDTH=1,AUDIO="a,b",CODECS="ec-3,avc1.64001f""#,
                "v.m3u8"
            )
        )
        #expect(playlist.renditions[0].groupID == "a,b")
        #expect(playlist.renditions[0].name == "Dolby 5.1, Director's cut=yes")
        #expect(playlist.renditions[0].uri == "a.m3u8?x=1,y=2")
        #expect(playlist.variants[0].codecs == "ec-3,avc1.64001f")
        try expectRoundTrip(.multivariant(playlist))
    }

    @Test("EXTINF without comma, without title, with commas in the title")
    func extinfForms() throws {
        let playlist = try parseMedia(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10", "a.ts", "#EXTINF:10,", "b.ts", "#EXTINF:10,Hello, World, 1", "c.ts")
        )
        #expect(playlist.segments.map(\.title) == [nil, nil, "Hello, World, 1"])
        #expect(playlist.segments.map(\.duration) == [10, 10, 10])
        try expectRoundTrip(.media(playlist))
    }

    @Test("tags between EXTINF and its URI belong to that segment")
    func tagsBetweenExtinfAndURI() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                "#EXTINF:10,",
                "a.ts",
                "#EXTINF:10,",
                "#EXT-X-DISCONTINUITY",
                "#EXT-X-PROGRAM-DATE-TIME:2024-01-01T00:00:00Z",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k""#,
                "# comment",
                "#EXT-X-BYTERANGE:100@0",
                "b.ts"
            )
        )
        #expect(
            playlist.segments[1].tags == [
                .discontinuity, .programDateTime("2024-01-01T00:00:00Z"), .key(EncryptionKey(method: .aes128, uri: "k")),
                .other("# comment"), .byteRange(ByteRange(length: 100, offset: 0)),
            ]
        )
        let resolved = playlist.resolvedSegments(baseURL: nil)
        #expect(resolved.map(\.discontinuitySequence) == [0, 1])
        #expect(resolved.map(\.keys.count) == [0, 1])
        try expectRoundTrip(.media(playlist))
    }

    @Test("URIs with spaces are kept as written and resolved with %20")
    func urisWithSpaces() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=AES-128,URI="my keys/key 1.bin""#,
                "#EXTINF:10,",
                "my segments/segment 1.ts"
            )
        )
        #expect(playlist.segments[0].uri == "my segments/segment 1.ts")
        let segment = try #require(playlist.resolvedSegments(baseURL: URL(string: "https://example.com/show/index.m3u8")).first)
        #expect(segment.url?.absoluteString == "https://example.com/show/my%20segments/segment%201.ts")
        #expect(segment.keys.first?.url?.absoluteString == "https://example.com/show/my%20keys/key%201.bin")
        #expect(PlaylistWriter.write(.media(playlist)).contains("\nmy segments/segment 1.ts\n"))
    }

    @Test("tag values keep their case; hex IVs in either case")
    func hexCase() throws {
        let lower = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0xabcdef0123456789abcdef0123456789"#,
                "#EXTINF:10,",
                "a.ts"
            )
        )
        let upper = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0XABCDEF0123456789ABCDEF0123456789"#,
                "#EXTINF:10,",
                "a.ts"
            )
        )
        #expect(lower.segments[0].keyTags[0].ivBytes == upper.segments[0].keyTags[0].ivBytes)
        #expect(lower.segments[0].keyTags[0].ivBytes?.first == 0xAB)
    }

    @Test("a UTF-8 title and URI")
    func unicode() throws {
        let playlist = try parseMedia(m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,Überraschung – 日本語", "片段 1.ts"))
        #expect(playlist.segments[0].title == "Überraschung – 日本語")
        #expect(playlist.segments[0].uri == "片段 1.ts")
        #expect(
            playlist.resolvedSegments(baseURL: URL(string: "https://e.com/a/b.m3u8"))[0].url?.absoluteString
                == "https://e.com/a/%E7%89%87%E6%AE%B5%201.ts"
        )
        try expectRoundTrip(.media(playlist))
    }

    @Test("a tag name is matched exactly: lookalikes are unknown tags")
    func lookalikeTags() throws {
        let playlist = try parseMedia(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXT-X-KEYS:METHOD=AES-128", "#ext-x-gap", "#EXTINF-X:1", "#EXTINF:10,", "a.ts")
        )
        #expect(playlist.segments[0].tags == [.other("#EXT-X-KEYS:METHOD=AES-128"), .other("#ext-x-gap"), .other("#EXTINF-X:1")])
        #expect(!playlist.segments[0].isGap)
    }
}
