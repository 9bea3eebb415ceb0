import Foundation
import StowageCore
import Testing

@testable import HLS

/// SplitMix64: a small seeded generator, so every run makes the same mutations.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Deterministic damage to a fixture: byte flips, insertions, deletions, line shuffles, truncations, big numbers and
/// stray tags.
struct PlaylistMutation {
    static let count = 400

    /// Bytes that mean something to the parser.
    static let palette = Array(",\"=\n\r#@:019-. x{$}/YNAe\t".utf8) + [0]
    /// Lines that change the meaning of what follows them.
    static let strayLines = [
        "#EXT-X-DISCONTINUITY", "#EXT-X-BYTERANGE:100", "#EXT-X-BYTERANGE:9223372036854775807@0", "#EXT-X-KEY:METHOD=NONE",
        #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x01"#, #"#EXT-X-MAP:URI="i.mp4",BYTERANGE="10""#, "#EXT-X-SKIP:SKIPPED-SEGMENTS=2",
        "#EXT-X-MEDIA-SEQUENCE:9223372036854775807", "#EXT-X-DISCONTINUITY-SEQUENCE:9223372036854775807", "#EXT-X-GAP",
        "#EXT-X-BITRATE:1", "#EXTINF:1,", "#EXT-X-STREAM-INF:BANDWIDTH=1", "#EXT-X-ENDLIST", "# comment", "#EXT-X-UNKNOWN",
        #"#EXT-X-DEFINE:NAME="v",VALUE="{$v}""#, "#EXT-X-TARGETDURATION:1", "segment.ts", "",
    ]
    static let numbers = ["0", "9223372036854775807", "9223372036854775808", "18446744073709551615", "1e308", "-1", "00"]

    let seed: Int
    let fixture: String
    let bytes: [UInt8]

    init(seed: Int) throws {
        self.seed = seed
        fixture = Fixtures.all[seed % Fixtures.all.count]
        var generator = SplitMix64(seed: UInt64(seed) &* 0x2545_F491_4F6C_DD1D)
        var bytes = Array(try Fixtures.data(fixture))
        for _ in 0..<Int.random(in: 1...3, using: &generator) {
            Self.mutate(&bytes, using: &generator)
        }
        self.bytes = bytes
    }

    private static func mutate(_ bytes: inout [UInt8], using generator: inout SplitMix64) {
        guard !bytes.isEmpty else { return }
        let position = Int.random(in: 0..<bytes.count, using: &generator)
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map(Array.init)
        let line = Int.random(in: 0..<lines.count, using: &generator)
        switch Int.random(in: 0..<11, using: &generator) {
        case 0, 1:
            bytes[position] = palette.randomElement(using: &generator)!
        case 2:
            bytes.insert(palette.randomElement(using: &generator)!, at: position)
        case 3:
            bytes.removeSubrange(position..<min(bytes.count, position + Int.random(in: 1...8, using: &generator)))
        case 4:
            bytes[position] = UInt8.random(in: 0...255, using: &generator)
        case 5:
            lines.swapAt(line, Int.random(in: 0..<lines.count, using: &generator))
            bytes = Array(lines.joined(separator: [UInt8(ascii: "\n")]))
        case 6:
            lines.remove(at: line)
            bytes = Array(lines.joined(separator: [UInt8(ascii: "\n")]))
        case 7:
            lines.insert(lines[line], at: Int.random(in: 0...lines.count, using: &generator))
            bytes = Array(lines.joined(separator: [UInt8(ascii: "\n")]))
        case 8:
            bytes.removeSubrange(position...)
        case 9:
            // Replace a run of digits with a number at the edge of the integer range.
            guard let start = bytes[position...].firstIndex(where: { (0x30...0x39).contains($0) }) else { return }
            let end = bytes[start...].firstIndex(where: { !(0x30...0x39).contains($0) }) ?? bytes.count
            bytes.replaceSubrange(start..<end, with: Array(numbers.randomElement(using: &generator)!.utf8))
        default:
            lines.insert(Array(strayLines.randomElement(using: &generator)!.utf8), at: max(1, Int.random(in: 0...lines.count, using: &generator)))
            bytes = Array(lines.joined(separator: [UInt8(ascii: "\n")]))
        }
    }

    var text: String { String(decoding: bytes, as: UTF8.self) }
    var url: URL { Fixtures.loadURL(fixture) }
    var importedVariables: [String: String] { Fixtures.importedVariables(fixture) }

    func parse() throws(PlaylistError) -> ParsedPlaylist {
        try PlaylistParser.parse(bytes, url: url, importedVariables: importedVariables)
    }
}

/// The parser either refuses damaged input with a ``PlaylistError`` or reads it into a model that survives writing,
/// re-parsing, resolving and JSON.
@Suite("Mutated playlists")
struct MutationTests {
    @Test("a mutated fixture fails cleanly or round-trips", arguments: 0..<PlaylistMutation.count)
    func mutation(seed: Int) throws {
        let mutation = try PlaylistMutation(seed: seed)
        let parsed: ParsedPlaylist
        do {
            parsed = try mutation.parse()
        } catch {
            #expect(!error.code.rawValue.isEmpty && error.line >= 0)
            return
        }
        let context = "seed \(seed), \(mutation.fixture):\n\(mutation.text)"
        let written = PlaylistWriter.write(parsed.playlist)
        let reparsed: ParsedPlaylist
        do {
            reparsed = try PlaylistParser.parse(written, url: mutation.url, importedVariables: mutation.importedVariables)
        } catch {
            Issue.record("the written playlist does not parse: \(error)\n\(context)\nwritten:\n\(written)")
            return
        }
        #expect(reparsed.playlist == parsed.playlist, "\(context)\nwritten:\n\(written)")
        #expect(PlaylistWriter.write(reparsed.playlist) == written, "\(context)")

        if let media = parsed.playlist.media {
            let resolved = media.resolvedSegments(baseURL: mutation.url)
            #expect(resolved.count == media.segments.count)
            #expect(resolved.allSatisfy { $0.keys.allSatisfy { $0.iv.count == 16 } })
            #expect(resolved.allSatisfy { ($0.byteRange?.httpRangeHeader.hasPrefix("bytes=") ?? true) })
            #expect(try JSONDecoder().decode([ResolvedSegment].self, from: JSONEncoder().encode(resolved)) == resolved)
        }
        #expect(try JSONDecoder().decode(Playlist.self, from: JSONEncoder().encode(parsed.playlist)) == parsed.playlist)
    }

    @Test("the mutations are a mix of accepted and refused playlists")
    func mix() throws {
        var accepted = 0
        var codes: Set<String> = []
        for seed in 0..<PlaylistMutation.count {
            let mutation = try PlaylistMutation(seed: seed)
            do {
                _ = try mutation.parse()
                accepted += 1
            } catch {
                codes.insert(error.code.rawValue)
            }
        }
        #expect(accepted > PlaylistMutation.count / 5, "accepted \(accepted)")
        #expect(accepted < PlaylistMutation.count * 4 / 5, "accepted \(accepted)")
        #expect(codes.count >= 6, "\(codes.sorted())")
    }
}
