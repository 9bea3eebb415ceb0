import Foundation
import Testing

@testable import HLS

/// The JSON form of the model (for `stowage inspect --json` and the offline package index).
@Suite("JSON coding")
struct PlaylistCodingTests {
    @Test("every fixture encodes to JSON and decodes back to an equal model", arguments: Fixtures.all)
    func roundTrip(name: String) throws {
        let playlist = try Fixtures.parse(name).playlist
        let data = try JSONEncoder().encode(playlist)
        #expect(try JSONDecoder().decode(Playlist.self, from: data) == playlist)
    }

    /// The JSON of a fixture as nested dictionaries and arrays.
    func json(_ name: String) throws -> [String: Any] {
        let data = try JSONEncoder().encode(try Fixtures.parse(name).playlist)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("the JSON text spells the kind and the segment tag types")
    func jsonText() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let text = String(decoding: try encoder.encode(try Fixtures.parse("rfc8216-8.3-encrypted").playlist), as: UTF8.self)
        #expect(text.hasPrefix(#"{"kind":"media","media":{"#))
        #expect(text.contains(#""targetDuration":15"#))
        #expect(
            text.contains(
                #"{"key":{"method":"AES-128","otherAttributes":[],"uri":"https://priv.example.com/key.php?r=52"},"type":"key"}"#
            )
        )
    }

    @Test("field names of a media playlist")
    func mediaFieldNames() throws {
        let root = try json("media-all-tags")
        #expect(root["kind"] as? String == "media")
        let media = try #require(root["media"] as? [String: Any])
        #expect(media["targetDuration"] as? Int == 6)
        #expect(media["mediaSequence"] as? Int == 100)
        #expect(media["playlistType"] as? String == "VOD")
        #expect(media["endList"] as? Bool == true)
        let segments = try #require(media["segments"] as? [[String: Any]])
        #expect(segments.count == 7)
        #expect(segments[0]["uri"] as? String == "media-1.mp4")
        #expect(segments[0]["duration"] as? Double == 6)
        #expect(segments[0]["title"] as? String == "first segment")
        let tags = try #require(segments[0]["tags"] as? [[String: Any]])
        #expect(
            tags.map { $0["type"] as? String } == [
                "other", "key", "key", "map", "programDateTime", "dateRange", "bitrate", "byteRange",
            ]
        )
        #expect(tags[0]["text"] as? String == "# A fragmented MP4 playlist with every media segment tag.")
        let key = try #require(tags[1]["key"] as? [String: Any])
        #expect(key["method"] as? String == "SAMPLE-AES")
        #expect(key["uri"] as? String == "skd://key-1")
        #expect(key["keyFormat"] as? String == "com.apple.streamingkeydelivery")
        #expect((tags[3]["map"] as? [String: Any])?["uri"] as? String == "init-1.mp4")
        #expect(tags[6]["bitrate"] as? Int == 1200)
        #expect((tags[7]["byteRange"] as? [String: Any])?["offset"] as? Int == 720)
        let fourth = try #require(segments[3]["tags"] as? [[String: Any]])
        #expect(fourth.map { $0["type"] as? String } == ["discontinuity", "key", "map", "bitrate"])
        #expect(fourth[0].count == 1)
    }

    @Test("field names of a multivariant playlist")
    func multivariantFieldNames() throws {
        let root = try json("rfc8216-8.6-alternative-audio")
        #expect(root["kind"] as? String == "multivariant")
        let multivariant = try #require(root["multivariant"] as? [String: Any])
        let renditions = try #require(multivariant["renditions"] as? [[String: Any]])
        #expect(renditions[0]["type"] as? String == "AUDIO")
        #expect(renditions[0]["groupID"] as? String == "aac")
        #expect(renditions[0]["isDefault"] as? Bool == true)
        let variants = try #require(multivariant["variants"] as? [[String: Any]])
        #expect(variants.map { $0["bandwidth"] as? Int } == [1_280_000, 2_560_000, 7_680_000, 65000])
    }

    @Test("an unknown segment tag type does not decode")
    func unknownTagType() {
        let json = Data(#"{"type":"teleport","text":"x"}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(SegmentTag.self, from: json) }
    }

    @Test("resolved segments encode IVs as 32 hex digits and decode back")
    func resolvedSegments() throws {
        let playlist = try #require(try Fixtures.parse("media-all-tags").playlist.media)
        let resolved = playlist.resolvedSegments(baseURL: URL(string: "https://example.com/v/index.m3u8"))
        let data = try JSONEncoder().encode(resolved)
        #expect(try JSONDecoder().decode([ResolvedSegment].self, from: data) == resolved)
        let objects = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        let key = try #require((objects[5]["keys"] as? [[String: Any]])?.first)
        #expect(key["iv"] as? String == "0f0e0d0c0b0a09080706050403020100")
        #expect(key["ivIsExplicit"] as? Bool == true)
        #expect(key["url"] as? String == "https://example.com/keys/k5.bin")
    }

    @Test("a resolved key with an IV of the wrong length does not decode")
    func badIV() {
        let json = Data(#"{"method":"AES-128","keyFormat":"identity","uri":"k","iv":"0102","ivIsExplicit":true}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(ResolvedKey.self, from: json) }
    }

    @Test("warnings encode their line and message")
    func warnings() throws {
        let warning = PlaylistWarning(line: 4, message: "m")
        let data = try JSONEncoder().encode(warning)
        #expect(try JSONDecoder().decode(PlaylistWarning.self, from: data) == warning)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["line"] as? Int == 4)
        #expect(object["message"] as? String == "m")
    }
}
