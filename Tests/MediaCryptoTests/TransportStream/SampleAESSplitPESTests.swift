import Foundation
import MediaCrypto
import StowageCrypto
import Testing

/// SAMPLE-AES transport streams cut inside PES packets, as byte-count segmenters cut them: Shaka Packager's segments
/// joined and cut again by `Fixtures/media/recut-ts.py` (`shaka/ts-sample-aes-{multislice,ac3}-split`), decrypted
/// with their neighbours and compared with Shaka's clear twin.
@Suite("SAMPLE-AES TS with PES packets split between segments")
struct SampleAESSplitPESTests {
    struct Split: CustomStringConvertible, Sendable {
        let name: String
        let kind: String
        var description: String { "\(name)-split/\(kind)" }

        var directory: URL { TransportStreamFixtures.media.appendingPathComponent("shaka/ts-sample-aes-\(name)-split") }
        var twin: URL { TransportStreamFixtures.media.appendingPathComponent("shaka/ts-clear-\(name)") }
        var segments: [URL] { (1...3).map { directory.appendingPathComponent("split_\(kind)_\($0).ts") } }
        var twinSegments: [URL] { (1...3).map { twin.appendingPathComponent("\(kind)_\($0).ts") } }

        var key: SecretBytes { SecretBytes(try! Array(Data(contentsOf: directory.appendingPathComponent("sample-aes.test.key")))) }
        var iv: [UInt8] {
            let playlist = try! String(contentsOf: directory.appendingPathComponent("\(kind).m3u8"), encoding: .utf8)
            let hex = playlist.firstMatch(of: /IV=0x([0-9a-fA-F]{32})/)!.1
            return Hex.decode(String(hex))!
        }

        func neighbour(_ index: Int, key: SecretBytes? = nil) -> TransportStreamNeighbour {
            let url = segments[index]
            let bytes = try! Array(Data(contentsOf: url))
            return TransportStreamNeighbour(name: url.lastPathComponent, key: key ?? self.key, iv: iv, size: bytes.count) { offset, count in
                Array(bytes[min(offset, bytes.count)..<min(offset + count, bytes.count)])
            }
        }

        func neighbours(of index: Int) -> TransportStreamNeighbours {
            TransportStreamNeighbours(
                previous: index > 0 ? neighbour(index - 1) : nil,
                next: index < 2 ? neighbour(index + 1) : nil
            )
        }

        func decrypt(_ index: Int, neighbours: TransportStreamNeighbours, chunk: Int = 4096) throws -> [UInt8] {
            let decryptor = try SampleAESTransportStreamDecryptor(
                key: key,
                iv: iv,
                segment: segments[index].lastPathComponent,
                neighbours: neighbours
            )
            let input = try Array(Data(contentsOf: segments[index]))
            var output: [UInt8] = []
            var offset = 0
            while offset < input.count {
                let end = min(input.count, offset + chunk)
                try input[offset..<end].withUnsafeBytes { try decryptor.process($0) { output += $0 } }
                offset = end
            }
            try decryptor.finish { output += $0 }
            return output
        }
    }

    static let splits = ["multislice", "ac3"].flatMap { name in ["video", "audio"].map { Split(name: name, kind: $0) } }
    /// Those whose cuts fall inside PES packets (multislice's AAC frames each fit one packet, so its cuts fall between).
    static let spanning = splits.filter { $0.name == "ac3" || $0.kind == "video" }

    static func pid(_ bytes: [UInt8], at offset: Int) -> UInt16 { (UInt16(bytes[offset + 1] & 0x1F) << 8) | UInt16(bytes[offset + 2]) }

    /// The PID with the most packets: the one media stream of Shaka's single-stream segments.
    static func mediaPID(_ bytes: [UInt8]) -> UInt16 {
        var counts: [UInt16: Int] = [:]
        for offset in stride(from: 0, to: bytes.count, by: 188) { counts[pid(bytes, at: offset), default: 0] += 1 }
        return counts.max { $0.value < $1.value }!.key
    }

    /// The first PES packet of `pid` in a segment: whether it starts there (payload_unit_start_indicator).
    static func firstPacketStartsUnit(_ bytes: [UInt8], pid: UInt16) -> Bool? {
        for offset in stride(from: 0, to: bytes.count, by: 188) where Self.pid(bytes, at: offset) == pid {
            return bytes[offset + 1] & 0x40 != 0
        }
        return nil
    }

    @Test("the fixtures are cut inside PES packets: a segment begins with a packet that continues one")
    func fixturesSplitPESPackets() throws {
        for split in Self.spanning {
            for index in 1...2 {
                let segment = try Array(Data(contentsOf: split.segments[index]))
                #expect(
                    Self.firstPacketStartsUnit(segment, pid: Self.mediaPID(segment)) == false,
                    "\(split): segment \(index + 1) should begin inside a PES packet"
                )
            }
        }
    }

    @Test("decrypted with their neighbours, the segments join to Shaka's clear twin byte for byte", arguments: splits)
    func joinsToClearTwin(_ split: Split) throws {
        var joined: [UInt8] = []
        for index in 0..<3 {
            let clear = try split.decrypt(index, neighbours: split.neighbours(of: index))
            let encryptedSize = try Data(contentsOf: split.segments[index]).count
            #expect(clear.count == encryptedSize, "\(split) segment \(index + 1) keeps its size")
            joined += clear
        }
        let twin = try split.twinSegments.flatMap { try Array(Data(contentsOf: $0)) }
        #expect(joined.count == twin.count)
        #expect(joined == twin, "\(split): the joined clear segments differ from the twin's")
    }

    @Test("chunks of 1 and 188 bytes and the whole segment give the same output", arguments: [Split(name: "multislice", kind: "video")])
    func chunkSizes(_ split: Split) throws {
        let whole = try split.decrypt(1, neighbours: split.neighbours(of: 1), chunk: 1 << 20)
        #expect(try split.decrypt(1, neighbours: split.neighbours(of: 1), chunk: 1) == whole)
        #expect(try split.decrypt(1, neighbours: split.neighbours(of: 1), chunk: 188) == whole)
    }

    @Test("without its previous segment, a segment that begins inside a PES packet is refused")
    func withoutPrevious() throws {
        let split = Split(name: "multislice", kind: "video")
        let error = #expect(throws: SegmentCryptoError.self) {
            try split.decrypt(1, neighbours: TransportStreamNeighbours(next: split.neighbour(2)))
        }
        #expect(error?.code == "malformed_container")
        #expect(error?.detail.contains("began before the segment, and the previous segment is not at hand") == true, "\(String(describing: error))")
    }

    @Test("without its next segment, a segment that ends inside a bounded PES packet is refused as truncated")
    func withoutNext() throws {
        let split = Split(name: "ac3", kind: "audio")
        let error = #expect(throws: SegmentCryptoError.self) {
            try split.decrypt(0, neighbours: .none)
        }
        #expect(error?.code == "malformed_container")
        #expect(error?.detail.contains("PES_packet_length declares") == true, "\(String(describing: error))")
    }

    @Test("with the next segment still downloading, a segment cut inside a PES packet waits for it", arguments: spanning)
    func nextPending(_ split: Split) throws {
        let error = #expect(throws: SegmentCryptoError.self) {
            try split.decrypt(1, neighbours: TransportStreamNeighbours(previous: split.neighbour(0), nextPending: true))
        }
        #expect(error?.code == "next_segment_pending")
        #expect(error?.waitsForNextSegment == true)
        #expect(error?.message.contains("still downloading") == true)
    }

    @Test("a neighbour that does not continue the segment is refused: continuity counters must join up")
    func notConsecutive() throws {
        let split = Split(name: "multislice", kind: "video")
        let error = #expect(throws: SegmentCryptoError.self) {
            // Segment 3 put before segment 2.
            try split.decrypt(1, neighbours: TransportStreamNeighbours(previous: split.neighbour(2), next: split.neighbour(2)))
        }
        #expect(["malformed_container", "unsupported_stream"].contains(error?.code ?? ""))
        #expect(
            error?.detail.contains("not consecutive") == true || error?.detail.contains("already completed") == true,
            "\(String(describing: error))"
        )
    }

    @Test("a PES packet across more than two segments is refused, naming the limit")
    func acrossThreeSegments() throws {
        let split = Split(name: "multislice", kind: "video")
        // A previous segment made of segment 2's first packets: they continue a PES packet and start none on the PID.
        let second = try Array(Data(contentsOf: split.segments[1]))
        let media = Self.mediaPID(second)
        var leading = 0
        while leading + 188 <= second.count, Self.pid(second, at: leading) != media || second[leading + 1] & 0x40 == 0 {
            leading += 188
        }
        let fake = Array(second[0..<leading])
        let previous = TransportStreamNeighbour(name: "fake.ts", key: split.key, iv: split.iv, size: fake.count) { offset, count in
            Array(fake[min(offset, fake.count)..<min(offset + count, fake.count)])
        }
        let error = #expect(throws: SegmentCryptoError.self) {
            try split.decrypt(1, neighbours: TransportStreamNeighbours(previous: previous, next: split.neighbour(2)))
        }
        #expect(error?.code == "unsupported_stream")
        #expect(error?.detail.contains("more than two segments") == true, "\(String(describing: error))")
    }

    @Test("the part of a PES packet in the previous segment is decrypted with that segment's key")
    func previousSegmentsKey() throws {
        let split = Split(name: "multislice", kind: "video")
        let right = try split.decrypt(1, neighbours: split.neighbours(of: 1))
        let wrongKey = SecretBytes([UInt8](repeating: 7, count: 16))
        let wrong = try split.decrypt(1, neighbours: TransportStreamNeighbours(previous: split.neighbour(0, key: wrongKey), next: split.neighbour(2)))
        #expect(wrong.count == right.count)
        #expect(wrong != right, "the lead-in's PES packet must be decrypted with the previous segment's key")
    }
}
