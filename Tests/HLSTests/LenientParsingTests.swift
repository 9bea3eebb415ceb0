import Foundation
import Testing

@testable import HLS

/// Playlists that break RFC 8216bis the way real packagers do and that players read anyway: read leniently by default,
/// each deviation a warning with its line; refused with `strict: true`.
@Suite("Lenient parsing")
struct LenientParsingTests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/playlists/lenient")

    static var fixtures: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".m3u8") }.sorted()
    }

    @Test("every fixture: read with warnings, refused strictly, and what was read is valid", arguments: fixtures)
    func fixture(_ name: String) throws {
        let bytes = Array(try Data(contentsOf: Self.directory.appendingPathComponent(name)))
        let parsed = try PlaylistParser.parse(bytes)
        #expect(!parsed.warnings.isEmpty)
        #expect(throws: PlaylistError.self) { try PlaylistParser.parse(bytes, strict: true) }
        let written = PlaylistWriter.write(parsed.playlist)
        let reparsed = try PlaylistParser.parse(written, strict: true)
        #expect(reparsed.playlist == parsed.playlist)
        #expect(reparsed.warnings.isEmpty, "\(reparsed.warnings)")
    }

    @Test("the fixtures and the table in their README name the same files")
    func coverage() throws {
        let readme = try String(contentsOf: Self.directory.appendingPathComponent("README.md"), encoding: .utf8)
        let listed = readme.split(separator: "\n").filter { $0.hasPrefix("| `") }.compactMap { row in
            row.dropFirst(3).split(separator: "`").first.map(String.init)
        }
        #expect(listed.sorted() == Self.fixtures)
        #expect(Self.fixtures.count >= 10)
    }

    @Test("what each deviation is read as")
    func values() throws {
        func media(_ name: String) throws -> MediaPlaylist {
            let parsed = try PlaylistParser.parse(Array(try Data(contentsOf: Self.directory.appendingPathComponent(name))))
            return try #require(parsed.playlist.media)
        }
        func multivariant(_ name: String) throws -> MultivariantPlaylist {
            let parsed = try PlaylistParser.parse(Array(try Data(contentsOf: Self.directory.appendingPathComponent(name))))
            guard case .multivariant(let playlist) = parsed.playlist else { throw PlaylistError.notAPlaylist(name) }
            return playlist
        }
        #expect(try media("no-target-duration.m3u8").targetDuration == 2)
        #expect(try media("negative-media-sequence.m3u8").mediaSequence == 0)
        #expect(try multivariant("float-bandwidth.m3u8").variants.map(\.bandwidth) == [800_000, 1_600_000])
        #expect(try media("iv-without-0x.m3u8").distinctKeys.first?.iv == "a97e67e7198ca85d61edaef31146d6fc")
        let none = try media("method-none-with-uri.m3u8")
        #expect(none.distinctKeys.isEmpty)
        #expect(none.resolvedSegments(baseURL: nil).first?.keys.isEmpty == true)
        let iptv = try media("iptv.m3u8")
        #expect(iptv.segments.map(\.duration) == [0, 0])
        #expect(iptv.segments.map(\.title) == ["News Channel", "Sport Channel"])
        #expect(!iptv.endList)
        let keyed = try multivariant("multivariant-with-key.m3u8")
        #expect(keyed.variants.map(\.uri) == ["low.m3u8"])
        #expect(keyed.sessionKeys.isEmpty)
        #expect(!PlaylistWriter.write(.multivariant(keyed)).contains("EXT-X-KEY"))
        #expect(try media("windows.m3u8").segments.map(\.uri) == ["media/seg_0.ts"])
        #expect(try media("leading-blank-line.m3u8").segments.count == 1)
    }

    @Test("lone CR line ends, quoted numbers, lower-case booleans, an upper-case X in RESOLUTION")
    func moreForms() throws {
        let oldMac = "#EXTM3U\r#EXT-X-TARGETDURATION:2\r#EXTINF:2,\ra.ts\r#EXT-X-ENDLIST\r"
        #expect(try PlaylistParser.parse(oldMac).playlist.media?.segments.map(\.uri) == ["a.ts"])
        let master = m3u8(
            "#EXTM3U",
            #"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",LANGUAGE="en",DEFAULT=yes,AUTOSELECT=true"#,
            #"#EXT-X-STREAM-INF:BANDWIDTH=1000,RESOLUTION=640X360,FRAME-RATE="25",AUDIO="a""#,
            "v.m3u8"
        )
        let parsed = try PlaylistParser.parse(master)
        guard case .multivariant(let playlist) = parsed.playlist else {
            Issue.record("expected a multivariant playlist")
            return
        }
        #expect(playlist.renditions.first?.name == "en")
        #expect(playlist.renditions.first?.isDefault == true)
        #expect(playlist.renditions.first?.autoselect == true)
        #expect(playlist.variants.first?.resolution == Resolution(width: 640, height: 360))
        #expect(playlist.variants.first?.frameRate == 25)
        #expect(parsed.warnings.map(\.line) == [2, 2, 2, 3, 3])
        #expect(throws: PlaylistError.self) { try PlaylistParser.parse(master, strict: true) }
    }

    @Test("a space after a tag's colon; a byte range without an offset after another resource's range")
    func spacesAndCarriedRanges() throws {
        let spaced = try PlaylistParser.parse(m3u8("#EXTM3U", "#EXT-X-VERSION: 10", "#EXT-X-TARGETDURATION: 4", "#EXTINF:4,", "a.ts"))
        #expect(spaced.playlist.media?.version == 10)
        #expect(spaced.playlist.media?.targetDuration == 4)
        #expect(spaced.warnings.map(\.line) == [2, 3])
        // As videojs' byteRange fixture writes it: the range of b.ts continues a.ts's (players carry the end over).
        let text = m3u8(
            "#EXTM3U",
            "#EXT-X-TARGETDURATION:10",
            "#EXTINF:10,",
            "#EXT-X-BYTERANGE:100@50",
            "a.ts",
            "#EXTINF:10,",
            "#EXT-X-BYTERANGE:70",
            "b.ts",
            "#EXTINF:10,",
            "#EXT-X-BYTERANGE:30",
            "b.ts"
        )
        let parsed = try PlaylistParser.parse(text)
        let resolved = try #require(parsed.playlist.media).resolvedSegments(baseURL: nil)
        #expect(
            resolved.map(\.byteRange) == [
                ResolvedByteRange(offset: 50, length: 100), ResolvedByteRange(offset: 150, length: 70), ResolvedByteRange(offset: 220, length: 30),
            ]
        )
        #expect(parsed.warnings.map(\.line) == [7])
        expectPlaylistError(text, code: "invalid_byte_range", line: 7)
        // With nothing before it, the range starts at 0.
        let first = try PlaylistParser.parse(m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", "#EXTINF:10,", "#EXT-X-BYTERANGE:100", "a.ts"))
        #expect(try #require(first.playlist.media).resolvedSegments(baseURL: nil).first?.byteRange == ResolvedByteRange(offset: 0, length: 100))
    }

    @Test("a data: key URI never appears in an error's text or a warning")
    func inlineKeysHidden() throws {
        let uri = "data:text/plain;base64,YY4MhQ2BSQZGFJGtlwif6g=="
        let error = expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-KEY:METHOD=AES-128,URI=\"\(uri)\",IV=0xZZ"),
            code: "invalid_attribute_value",
            line: 3,
            strict: false
        )
        #expect(error?.text.contains("data:…") == true)
        #expect(error?.description.contains("YY4M") == false)
        let warned = try PlaylistParser.parse(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-KEY:METHOD=AES-128,URI=\(uri)", "#EXTINF:2,", "a.ts")
        )
        #expect(!warned.warnings.isEmpty)
        #expect(!warned.warnings.contains { $0.message.contains("YY4M") }, "\(warned.warnings)")
    }

    @Test("a playlist of 100,000 deviations keeps 100 warnings and counts the rest")
    func warningsAreBounded() throws {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n" + String(repeating: "stray.ts\n", count: 100_000)
        let parsed = try PlaylistParser.parse(text)
        #expect(parsed.warnings.count == 101)
        #expect(parsed.warnings.last?.message == "99900 more deviation(s) like these are not listed")
    }

    @Test("an EXTINF of 1e19 seconds with no target duration: read, not a crash")
    func hugeDuration() throws {
        let parsed = try PlaylistParser.parse(m3u8("#EXTM3U", "#EXTINF:1e19,", "a.ts"))
        #expect(parsed.playlist.media?.targetDuration == 1_000_000_000)
    }

    @Test("what no player could read stays an error when lenient")
    func stillRefused() {
        // Not a playlist at all, an unterminated quoted string, a value with a quote where a quoted string belongs,
        // a duration that is not a number, an empty byte range (HTTP cannot ask for it).
        expectPlaylistError("<html>", code: "not_a_playlist", line: 1, strict: false)
        expectPlaylistError(m3u8("#EXTM3U", #"#EXT-X-KEY:METHOD=AES-128,URI="k"#), code: "malformed_tag", line: 2, strict: false)
        expectPlaylistError(m3u8("#EXTM3U", #"#EXT-X-KEY:METHOD=AES-128,URI=a"b"#), code: "invalid_attribute_value", line: 2, strict: false)
        expectPlaylistError(m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXTINF:two,", "a.ts"), code: "malformed_tag", line: 3, strict: false)
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-BYTERANGE:0@10", "#EXTINF:2,", "a.ts"),
            code: "invalid_byte_range",
            line: 3,
            strict: false
        )
        expectPlaylistError(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-STREAM-INF:BANDWIDTH=1", "v.m3u8", "#EXTINF:2,", "a.ts"),
            code: "mixed_playlist_kinds",
            line: 3,
            strict: false
        )
    }
}
