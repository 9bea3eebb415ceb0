import Foundation
import MediaCrypto
import StowageCore
import StowageCrypto
import Testing

/// Oracle 5: the validator accepts every clear and encrypted fixture, describes it, and rejects damaged ones.
@Suite("transport stream validation")
struct TransportStreamValidatorTests {
    @Test("accepts and describes every segment of the Shaka fixtures and their twins", arguments: TransportStreamFixtures.all)
    func acceptsFixtures(fixture: TransportStreamFixtures.Fixture) throws {
        let encryptedTypes: Set<UInt8> = [0xDB, 0xCF, 0xC1, 0xC2]
        for segment in fixture.segments {
            let encrypted = try TransportStreamFixtures.validate(try TransportStreamFixtures.read(segment.encrypted), segment: segment.file)
            let clear = try TransportStreamFixtures.validate(try TransportStreamFixtures.read(segment.clear), segment: segment.file)
            #expect(encrypted.isEncrypted && !clear.isEncrypted, "\(segment)")
            #expect(encrypted.streams.count == 1 && clear.streams.count == 1)
            #expect(encryptedTypes.contains(encrypted.streams[0].streamType))
            #expect(encrypted.streams.map(\.pid) == clear.streams.map(\.pid))
            #expect(encrypted.programs == clear.programs && encrypted.programs.count == 1)
            #expect(encrypted.packetCount * 188 == (try TransportStreamFixtures.read(segment.encrypted)).count)
            #expect(encrypted.pesCount == clear.pesCount)
            if segment.isVideo {
                // One PES packet per picture: 48 pictures (2 s at 24 fps) per segment.
                #expect(clear.pesCount[clear.streams[0].pid] == 48, "\(segment)")
            }
        }
    }

    @Test("accepts the ffmpeg-muxed sources with two streams", arguments: ["h264_aac.ts", "h264_ac3.ts", "h264_eac3.ts", "h264_multislice.ts"])
    func acceptsSources(source: String) throws {
        let summary = try TransportStreamFixtures.validate(
            try TransportStreamFixtures.read(TransportStreamFixtures.media.appendingPathComponent("src/\(source)"))
        )
        #expect(summary.streams.count == 2 && !summary.isEncrypted)
        #expect(summary.streams[0].streamType == 0x1B)
        #expect(summary.pesCount[summary.streams[0].pid] == 144)
    }

    /// ffmpeg's h264+AAC stream cut at packet boundaries that fall inside PES packets, as byte-count segmenters cut it.
    static func cutInsidePES(_ source: String) throws -> (pieces: [[UInt8]], spanning: Int) {
        let bytes = try TransportStreamFixtures.read(TransportStreamFixtures.media.appendingPathComponent("src/\(source)"))
        let packets = TransportStreamTestMuxing.packets(bytes)
        // The first packet at or after a third and two thirds of the stream that continues a PES packet.
        let cuts = [packets.count / 3, 2 * packets.count / 3].compactMap { from in
            packets.indices.dropFirst(from).first { isContinuation(packets[$0]) }
        }
        var pieces: [[UInt8]] = []
        var start = 0
        for end in cuts + [packets.count] {
            pieces.append(packets[start..<end].flatMap { $0 })
            start = end
        }
        // A cut spans a PES packet when the packet after it continues one (payload_unit_start_indicator clear).
        let spanning = cuts.filter { isContinuation(packets[$0]) }.count
        return (pieces, spanning)
    }

    /// A packet on an elementary PID that continues a PES packet (payload_unit_start_indicator clear).
    static func isContinuation(_ packet: ArraySlice<UInt8>) -> Bool {
        packet[packet.startIndex + 1] & 0x40 == 0 && TransportStreamTestMuxing.pid(packet) > 0x20 && TransportStreamTestMuxing.pid(packet) != 0x1FFF
    }

    static func validate(_ bytes: [UInt8], boundaries: TransportStreamValidator.Boundaries) throws(SegmentCryptoError) -> TransportStreamSummary {
        let validator = TransportStreamValidator(segment: "test.ts", boundaries: boundaries)
        var failure: SegmentCryptoError?
        bytes.withUnsafeBytes { chunk in
            do throws(SegmentCryptoError) { try validator.process(chunk) } catch { failure = error }
        }
        if let failure { throw failure }
        return try validator.finish()
    }

    @Test("segments cut inside PES packets: valid with open boundaries, refused as streams on their own", arguments: ["h264_aac.ts", "h264_ac3.ts"])
    func openBoundaries(source: String) throws {
        let (pieces, spanning) = try Self.cutInsidePES(source)
        #expect(spanning == 2)
        var starts = 0
        for (index, piece) in pieces.enumerated() {
            let summary = try Self.validate(piece, boundaries: .open)
            starts += summary.pesCount.values.reduce(0, +)
            // PES packets that start before the segment's first PMT are skipped, not counted.
            let packets = TransportStreamTestMuxing.packets(piece)
            let pmtPID = TransportStreamTestMuxing.pmtPID(piece)
            let firstPMT = packets.firstIndex { TransportStreamTestMuxing.pid($0) == pmtPID } ?? 0
            starts += packets[..<firstPMT].filter { TransportStreamTestMuxing.pid($0) > 0x20 && $0[$0.startIndex + 1] & 0x40 != 0 }.count
            if index > 0 {
                #expect(throws: SegmentCryptoError.self) { try Self.validate(piece, boundaries: .closed) }
            }
        }
        // Every PES packet of the stream starts in exactly one segment.
        let whole = try Self.validate(pieces.flatMap { $0 }, boundaries: .closed)
        #expect(starts == whole.pesCount.values.reduce(0, +))
    }

    @Test("open boundaries still find damage inside a segment")
    func openBoundariesFindDamage() throws {
        let (pieces, _) = try Self.cutInsidePES("h264_aac.ts")
        var middle = pieces[1]
        // A packet lost in the middle: the continuity counter jumps.
        middle.removeSubrange((188 * 40)..<(188 * 41))
        #expect { try Self.validate(middle, boundaries: .open) } throws: { error in
            (error as? SegmentCryptoError)?.detail.contains("continuity_counter") == true
        }
        // A continuation packet in the middle marked as the start of a new PES packet: no 00 00 01 there.
        let packets = TransportStreamTestMuxing.packets(pieces[1])
        let index = try #require(packets.indices.dropFirst(packets.count / 2).first { Self.isContinuation(packets[$0]) })
        var damaged = pieces[1]
        damaged[188 * index + 1] |= 0x40
        #expect { try Self.validate(damaged, boundaries: .open) } throws: { error in
            (error as? SegmentCryptoError)?.code == "malformed_container"
        }
    }

    @Test("accepts a segment fed one byte at a time")
    func byteByByte() throws {
        let segment = TransportStreamFixtures.fixture("eac3").segments[3]
        let bytes = try TransportStreamFixtures.read(segment.encrypted)
        let validator = TransportStreamValidator(segment: segment.file)
        for byte in bytes { try [byte].withUnsafeBytes { try validator.process($0) } }
        #expect(try validator.finish() == TransportStreamFixtures.validate(bytes, segment: segment.file))
    }

    @Test(
        "rejects damaged segments with the damage named",
        arguments: [
            ("truncated inside a packet", "ends 100 bytes into packet"),
            ("sync byte", "not the sync byte"),
            ("PMT CRC", "CRC_32"),
            ("missing packet", "continuity_counter"),
            ("PES start code", "does not start with 00 00 01"),
            ("no PMT", "before the PAT and PMT"),
            ("truncated PES", "PES_packet_length declares"),
        ]
    )
    func rejectsDamage(damage: String, detail: String) throws {
        let segment = TransportStreamFixtures.fixture("ac3").segments(of: "audio")[0]
        var bytes = try TransportStreamFixtures.read(segment.encrypted)
        let pmtPID = TransportStreamTestMuxing.pmtPID(bytes)
        let packets = TransportStreamTestMuxing.packets(bytes)
        let pesStart = packets.firstIndex { ![0, pmtPID].contains(TransportStreamTestMuxing.pid($0)) }!
        switch damage {
        case "truncated inside a packet": bytes = Array(bytes.prefix(188 * 5 + 100))
        case "sync byte": bytes[188 * 7] = 0x48
        case "PMT CRC": bytes[188 * 1 + 185] ^= 0x01
        case "missing packet": bytes.removeSubrange((188 * 9)..<(188 * 10))
        case "PES start code": bytes[188 * pesStart + 4 + 1 + Int(bytes[188 * pesStart + 4]) + 2] = 0x02
        case "no PMT": bytes = packets.filter { TransportStreamTestMuxing.pid($0) != pmtPID }.flatMap { $0 }
        default: bytes = Array(bytes.prefix(188 * (pesStart + 3)))
        }
        #expect {
            try TransportStreamFixtures.validate(bytes)
        } throws: { error in
            let error = error as? SegmentCryptoError
            return error?.code == "malformed_container" && error?.detail.contains(detail) == true && error?.segment == "test.ts"
        }
    }

    @Test("recognizes transport streams by their sync bytes")
    func detection() throws {
        let segment = try TransportStreamFixtures.read(TransportStreamFixtures.fixture("aac").segments[0].encrypted)
        #expect(TransportStreamDetection.looksLikeTransportStream(Array(segment.prefix(377))))
        #expect(TransportStreamDetection.looksLikeTransportStream(Array(segment.prefix(189))))
        #expect(!TransportStreamDetection.looksLikeTransportStream(Array(segment.prefix(188))))
        var broken = Array(segment.prefix(400))
        broken[376] = 0
        #expect(!TransportStreamDetection.looksLikeTransportStream(broken))
        broken = Array(segment.prefix(400))
        broken[188] = 0
        #expect(!TransportStreamDetection.looksLikeTransportStream(broken))
        let mp4 = try TransportStreamFixtures.read(TransportStreamFixtures.media.appendingPathComponent("shaka/fmp4-clear/video_init.mp4"))
        #expect(!TransportStreamDetection.looksLikeTransportStream(Array(mp4.prefix(400))))
        #expect(!TransportStreamDetection.looksLikeTransportStream([]))
    }
}
