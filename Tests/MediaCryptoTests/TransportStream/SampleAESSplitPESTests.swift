import Foundation
import MediaCrypto
import StowageCore
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
            return try TransportStreamFixtures.run(decryptor, Array(Data(contentsOf: segments[index])), chunkSize: chunk)
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
        #expect(error?.code == "neighbour_segment_pending")
        #expect(error?.message.contains("still downloading") == true)
    }

    @Test("with the previous segment still downloading, continuing packets wait in place until it is given", arguments: spanning)
    func previousPending(_ split: Split) throws {
        let expected = try split.decrypt(1, neighbours: split.neighbours(of: 1))
        let input = try Array(Data(contentsOf: split.segments[1]))
        let decryptor = try SampleAESTransportStreamDecryptor(
            key: split.key,
            iv: split.iv,
            segment: "split_2.ts",
            promptOutput: true,
            neighbours: TransportStreamNeighbours(next: split.neighbour(2), previousPending: true)
        )
        var output: [UInt8] = []
        try input.withUnsafeBytes { try decryptor.process($0) { output += $0 } }
        #expect(decryptor.needsPreviousSegment)
        // Nothing from the first waiting packet on has gone out.
        #expect(output.count < expected.count)
        #expect(output == Array(expected.prefix(output.count)))
        try decryptor.supplyPrevious(split.neighbour(0))
        #expect(!decryptor.needsPreviousSegment)
        try decryptor.finish { output += $0 }
        #expect(output == expected)

        let unsupplied = try SampleAESTransportStreamDecryptor(
            key: split.key,
            iv: split.iv,
            segment: "split_2.ts",
            neighbours: TransportStreamNeighbours(next: split.neighbour(2), previousPending: true)
        )
        try input.withUnsafeBytes { try unsupplied.process($0) { _ in } }
        let error = #expect(throws: SegmentCryptoError.self) { try unsupplied.finish { _ in } }
        #expect(error?.code == "neighbour_segment_pending")
        #expect(error?.message.contains("the previous segment, which is still downloading") == true, "\(String(describing: error))")
    }

    @Test("a neighbour that does not continue the segment is refused: continuity counters must join up")
    func notConsecutive() throws {
        let split = Split(name: "multislice", kind: "video")
        let error = #expect(throws: SegmentCryptoError.self) {
            // Segment 3 put before segment 2.
            try split.decrypt(1, neighbours: TransportStreamNeighbours(previous: split.neighbour(2), next: split.neighbour(2)))
        }
        #expect([.malformedContainer, .unsupportedStream].contains(error?.code))
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

/// SAMPLE-AES transport streams whose NAL units and audio frames span PES packets, as muxers that cut PES packets by
/// size write them: Shaka Packager's SAMPLE-AES segments with their elementary streams packed into PES packets again by
/// `Fixtures/media/repack-pes.py` (`shaka/ts-sample-aes-multislice-repacked`). Each segment's elementary stream,
/// decrypted, equals Shaka's clear twin's.
@Suite("SAMPLE-AES TS with NAL units and audio frames split between PES packets")
struct SampleAESRepackedPESTests {
    static let directory = TransportStreamFixtures.media.appendingPathComponent("shaka/ts-sample-aes-multislice-repacked")
    static let twin = TransportStreamFixtures.media.appendingPathComponent("shaka/ts-clear-multislice")
    static let segments = ["video", "audio"].flatMap { kind in (1...3).map { "\(kind)_\($0).ts" } }

    static func decrypt(_ name: String, chunk: Int = 4096) throws -> [UInt8] {
        let split = SampleAESSplitPESTests.Split(name: "multislice", kind: "video")
        let decryptor = try SampleAESTransportStreamDecryptor(key: split.key, iv: split.iv, segment: name)
        let input = try Array(Data(contentsOf: directory.appendingPathComponent("repacked_\(name)")))
        let output = try TransportStreamFixtures.run(decryptor, input, chunkSize: chunk)
        #expect(output.count == input.count, "\(name) keeps its size")
        return output
    }

    /// The media PID's PES payloads, in order.
    static func payloads(_ segment: [UInt8]) -> [[UInt8]] {
        let packets = TransportStreamTestMuxing.pesPackets(segment)
        let media = packets.max { $0.value.count < $1.value.count }!.key
        return packets[media]!.map(TransportStreamTestMuxing.pesPayload)
    }

    @Test("the fixtures split NAL units and frames: a PES payload begins inside one", arguments: segments)
    func fixturesSplit(_ name: String) throws {
        let encrypted = try Array(Data(contentsOf: Self.directory.appendingPathComponent("repacked_\(name)")))
        let continuing = Self.payloads(encrypted).filter { payload in
            name.hasPrefix("video") ? !(payload.starts(with: [0, 0, 1]) || payload.starts(with: [0, 0, 0, 1])) : payload.first != 0xFF
        }
        #expect(continuing.count >= 10, "\(name): \(continuing.count) PES payloads begin inside a NAL unit or frame")
    }

    @Test("decrypted, each segment's elementary stream equals the clear twin's, in as many PES packets", arguments: segments)
    func elementaryStreamEqualsTwin(_ name: String) throws {
        let clear = Self.payloads(try Array(Data(contentsOf: Self.twin.appendingPathComponent(name))))
        let decrypted = Self.payloads(try Self.decrypt(name))
        #expect(decrypted.count == clear.count)
        #expect(decrypted.flatMap { $0 } == clear.flatMap { $0 }, "\(name): the decrypted elementary stream differs from the twin's")
    }

    /// The outer emulation prevention bytes of an encrypted elementary stream (every `00 00 03` of a protected NAL unit:
    /// type 1 or 5, longer than 48 bytes), by the position of their `03`.
    static func outerEscapes(_ es: [UInt8]) -> [Int] {
        var starts: [Int] = []
        var index = 0
        while index + 2 < es.count {
            if es[index] == 0, es[index + 1] == 0, es[index + 2] == 1 {
                starts.append(index + 3)
                index += 3
            } else {
                index += 1
            }
        }
        var escapes: [Int] = []
        for (n, start) in starts.enumerated() {
            var end = n + 1 < starts.count ? starts[n + 1] - 3 : es.count
            while end > start && es[end - 1] == 0 { end -= 1 }
            guard end - start > 48, [1, 5].contains(es[start] & 0x1F) else { continue }
            var i = start
            while i + 2 < end {
                if es[i] == 0, es[i + 1] == 0, es[i + 2] == 3 {
                    escapes.append(i + 2)
                    i += 3
                } else {
                    i += 1
                }
            }
        }
        return escapes
    }

    @Test("a NAL unit split after an emulation prevention byte: each PES packet keeps its own part, less its own escapes")
    func splitPointsFollowTheEscapes() throws {
        var cutAfterEscape = 0
        for number in 1...3 {
            let name = "video_\(number).ts"
            let encrypted = Self.payloads(try Array(Data(contentsOf: Self.directory.appendingPathComponent("repacked_\(name)"))))
            let escapes = Self.outerEscapes(encrypted.flatMap { $0 })
            let decrypted = Self.payloads(try Self.decrypt(name))
            var boundary = 0
            var expected: [Int] = []
            for payload in encrypted {
                let end = boundary + payload.count
                expected.append(payload.count - escapes.filter { $0 >= boundary && $0 < end }.count)
                if escapes.contains(where: { $0 >= end - 1 && $0 < end }) || escapes.contains(where: { $0 < end && $0 >= end - 2 }) {
                    cutAfterEscape += 1
                }
                boundary = end
            }
            #expect(decrypted.map(\.count) == expected, "\(name): PES payload sizes after decryption")
        }
        #expect(cutAfterEscape >= 3, "the fixture should cut NAL units right after an escape")
    }

    @Test("a NAL unit split between PES packets in different segments is refused in both, naming the next segment")
    func nalAcrossPESAndSegments() throws {
        let joined = try (1...3).flatMap { try Array(Data(contentsOf: Self.directory.appendingPathComponent("repacked_video_\($0).ts"))) }
        let media = SampleAESSplitPESTests.mediaPID(joined)
        // A cut at the first packet of a PES packet that begins inside a NAL unit, past the first segment's PSI.
        var cut = 20 * 188
        while cut < joined.count {
            let payload = cut + 4 + (joined[cut + 3] & 0x20 != 0 ? 1 + Int(joined[cut + 4]) : 0)
            if SampleAESSplitPESTests.pid(joined, at: cut) == media, joined[cut + 1] & 0x40 != 0 {
                let start = payload + 9 + Int(joined[payload + 8])
                if !(joined[start] == 0 && joined[start + 1] == 0) { break }
            }
            cut += 188
        }
        try #require(cut < joined.count)
        let first = Array(joined[0..<cut])
        let second = Array(joined[cut...])
        let split = SampleAESSplitPESTests.Split(name: "multislice", kind: "video")
        let next = TransportStreamNeighbour(name: "second.ts", key: split.key, iv: split.iv, size: second.count) { offset, count in
            Array(second[min(offset, second.count)..<min(offset + count, second.count)])
        }
        let decryptor = try SampleAESTransportStreamDecryptor(
            key: split.key,
            iv: split.iv,
            segment: "first.ts",
            neighbours: TransportStreamNeighbours(next: next)
        )
        let error = #expect(throws: SegmentCryptoError.self) {
            try first.withUnsafeBytes { try decryptor.process($0) { _ in } }
            try decryptor.finish { _ in }
        }
        #expect(error?.code == "unsupported_stream")
        #expect(error?.detail.contains("goes on in a PES packet of the next segment, second.ts") == true, "\(String(describing: error))")
    }

    @Test("chunks of 1 and 188 bytes give the whole segment's output", arguments: ["video_1.ts", "audio_2.ts"])
    func chunkSizes(_ name: String) throws {
        let whole = try Self.decrypt(name, chunk: 1 << 20)
        #expect(try Self.decrypt(name, chunk: 1) == whole)
        #expect(try Self.decrypt(name, chunk: 188) == whole)
    }
}
