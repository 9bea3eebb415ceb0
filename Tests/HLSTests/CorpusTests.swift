import Foundation
import StowageCore
import Testing

@testable import HLS

/// The public corpus of real-world test playlists of the Python `m3u8` library (globocom/m3u8, tests/playlists.py,
/// extracted by `Playlists/m3u8-corpus/extract.py`; source and licence in that folder's NOTICE.md), read the lenient way
/// players read them, with the counts that library gives as the oracle.
@Suite("The m3u8 library's playlist corpus")
struct CorpusTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Playlists/m3u8-corpus")

    /// What the `m3u8` library (6.0.0) read from each playlist.
    struct Expected: Decodable {
        var parsed: Bool
        var error: String?
        var is_variant: Bool?
        var variants: Int?
        var iframe_variants: Int?
        var renditions: Int?
        var segments: Int?
        var encrypted_segments: Int?
    }

    struct Corpus: Decodable {
        var playlists: [String: Expected]
    }

    static let expected: [String: Expected] = {
        guard let data = try? Data(contentsOf: directory.appendingPathComponent("expected.json")),
            let corpus = try? JSONDecoder().decode(Corpus.self, from: data)
        else { return [:] }
        return corpus.playlists
    }()

    static var names: [String] { expected.keys.sorted() }

    /// The playlists Stowage refuses, each for a reason no player accepts.
    static let refused: [String: String] = [
        // `#EXT-X-KEY:METHOD=AES-128,URI="[KEY]",IV=[IV]`: template placeholders for the key and the IV, so no player
        // can decrypt a segment of it.
        "PLAYLIST_WITH_TAG_MEDIA_READY.m3u8": "invalid_attribute_value"
    ]

    @Test("the corpus is all there: every playlist file has the library's reading and the other way round")
    func complete() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).filter { $0.hasSuffix(".m3u8") }.sorted()
        #expect(files == Self.names)
        #expect(files.count >= 90)
        // The bar: at most two refused, each named below with its reason (the per-playlist test fails on any
        // other refusal).
        #expect(Self.refused.count <= 2)
    }

    @Test("each playlist parses (or is one of at most two refused), with the library's counts", arguments: names)
    func playlist(_ name: String) throws {
        let bytes = Array(try Data(contentsOf: Self.directory.appendingPathComponent(name)))
        let url = URL(string: "https://example.com/corpus/\(name)")!
        let parsed: ParsedPlaylist
        do {
            parsed = try PlaylistParser.parse(bytes, url: url)
        } catch {
            #expect(Self.refused[name] == error.code.rawValue, "\(name) refused: \(error)")
            return
        }
        #expect(Self.refused[name] == nil, "\(name) is listed as refused but parses")
        guard let expected = Self.expected[name], expected.parsed else { return }
        switch parsed.playlist {
        case .multivariant(let playlist) where expected.is_variant == false:
            // Multivariant-only tags (EXT-X-SESSION-DATA, EXT-X-MEDIA, EXT-X-I-FRAME-STREAM-INF) with no variant: the
            // library calls any playlist without EXT-X-STREAM-INF a media playlist. Both read nothing to fetch.
            #expect(playlist.variants.isEmpty && expected.segments == 0, "\(name)")
            #expect(playlist.iFrameVariants.count == expected.iframe_variants, "\(name): I-frame variants")
            #expect(playlist.renditions.count == expected.renditions, "\(name): renditions")
        case .multivariant(let playlist):
            #expect(expected.is_variant == true, "\(name): read as multivariant, the library reads a media playlist")
            #expect(playlist.variants.count == expected.variants, "\(name): variants")
            #expect(playlist.iFrameVariants.count == expected.iframe_variants, "\(name): I-frame variants")
            #expect(playlist.renditions.count == expected.renditions, "\(name): renditions")
        case .media(let playlist):
            #expect(expected.is_variant == false, "\(name): read as a media playlist, the library reads a multivariant one")
            // The library counts two entries Stowage does not keep as segments: the segment still being written in a
            // low-latency playlist (EXT-X-PART lines after the last URI, kept as trailing tags) and an EXTINF the text
            // ends on without a URI (ignored with a warning, as ffmpeg and hls.js do).
            let unfinished = playlist.trailingTags.contains { if case .part = $0 { true } else { false } }
            let dangling = parsed.warnings.contains { $0.message.contains("EXTINF is not followed by a URI line") }
            #expect(playlist.segments.count + (unfinished || dangling ? 1 : 0) == expected.segments, "\(name): segments")
            let encrypted = playlist.resolvedSegments(baseURL: url).filter { !$0.keys.isEmpty }.count
            #expect(encrypted == expected.encrypted_segments, "\(name): encrypted segments")
        }
    }
}
