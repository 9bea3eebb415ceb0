import Foundation
import MediaCrypto
import StowageCrypto
import Testing

/// Known answers for the sample-level rules, from a literal reading of the specification (Apple, "MPEG-2 Stream
/// Encryption Format for HTTP Live Streaming" 2.2 Listing 2-1 and 2.3; ISO/IEC 14496-10 7.4.1 for emulation
/// prevention) run with our AES on synthetic streams, compared with what the encryptor writes and the decryptor
/// restores.
@Suite("SAMPLE-AES sample encryption, known answers")
struct SampleAESSampleEncryptionTests {
    static let key = TransportStreamFixtures.bytes(hex: "2b7e151628aed2a6abf7158809cf4f3c")
    static let iv = TransportStreamFixtures.bytes(hex: "000102030405060708090a0b0c0d0e0f")

    // MARK: Reference

    /// 7.4.1: emulation_prevention_three_byte before any byte of 0 to 3 that follows two zeros, and after a final zero.
    static func escape(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        var zeros = 0
        for byte in bytes {
            if zeros == 2 && byte <= 3 {
                output.append(3)
                zeros = 0
            }
            output.append(byte)
            zeros = byte == 0 ? zeros + 1 : 0
        }
        if bytes.last == 0 { output.append(3) }
        return output
    }

    /// Encrypts the blocks at `offsets` of `bytes` as one CBC chain from the IV.
    static func encryptBlocks(_ bytes: [UInt8], at offsets: [Int]) throws -> [UInt8] {
        guard !offsets.isEmpty else { return bytes }
        let gathered = offsets.flatMap { bytes[$0..<($0 + 16)] }
        let encrypted = try AESCBCCipher.encrypt(gathered, key: SecretBytes(key), iv: iv, padding: false)
        var output = bytes
        for (index, offset) in offsets.enumerated() {
            output.replaceSubrange(offset..<(offset + 16), with: encrypted[(index * 16)..<(index * 16 + 16)])
        }
        return output
    }

    /// Listing 2-1, as written: type byte, 31-byte leader, then encrypted block if more than 16 bytes remain and
    /// MIN(144, remaining) clear bytes, until nothing remains; then emulation prevention over the result.
    static func encryptNALUnit(_ nal: [UInt8]) throws -> [UInt8] {
        let type = nal[0] & 0x1F
        guard type == 1 || type == 5, nal.count > 48 else { return nal }
        var offsets: [Int] = []
        var position = 32
        var remaining = nal.count - 32
        while remaining > 0 {
            if remaining > 16 {
                offsets.append(position)
                position += 16
                remaining -= 16
            }
            let clear = min(144, remaining)
            position += clear
            remaining -= clear
        }
        return escape(try encryptBlocks(nal, at: offsets))
    }

    /// 2.3: header (7 or 9 bytes for ADTS, none for AC-3 and E-AC-3) and 16 bytes clear, then whole blocks.
    static func encryptFrame(_ frame: [UInt8], header: Int) throws -> [UInt8] {
        let leader = header + 16
        guard frame.count > leader else { return frame }
        let blocks = (frame.count - leader) / 16
        return try encryptBlocks(frame, at: (0..<blocks).map { leader + $0 * 16 })
    }

    // MARK: Synthetic media

    /// An escaped NAL unit of `length` bytes before escaping, dense in zeros so that it carries emulation prevention
    /// bytes, ending in a non-zero byte (the RBSP stop bit).
    static func nalUnit(type: UInt8, length: Int, random: inout TransportStreamTestRandom) -> [UInt8] {
        var body = (1..<length).map { _ in random.next() % 3 == 0 ? UInt8(0) : UInt8(truncatingIfNeeded: random.next() % 4) }
        body[body.count - 1] = 0x80
        return escape([0x60 | type] + body)
    }

    static func adtsFrame(length: Int, crc: Bool, random: inout TransportStreamTestRandom) -> [UInt8] {
        // MPEG-4, AAC-LC (profile 1), 48 kHz (index 3), 2 channels, buffer fullness 0x7FF, one raw data block.
        var frame: [UInt8] = [
            0xFF, crc ? 0xF0 : 0xF1, 0x4C, 0x80 | UInt8(length >> 11), UInt8((length >> 3) & 0xFF), UInt8((length & 7) << 5) | 0x1F, 0xFC,
        ]
        if crc { frame += [0x12, 0x34] }
        return frame + (frame.count..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    /// An AC-3 syncframe (bsid 8) whose size comes from fscod and frmsizecod (ATSC A/52 Table 5.18).
    static func ac3Frame(fscod: UInt8, frmsizecod: UInt8, size: Int, random: inout TransportStreamTestRandom) -> [UInt8] {
        [0x0B, 0x77, 0x00, 0x00, fscod << 6 | frmsizecod, 0x40, 0x40] + (7..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    /// An E-AC-3 syncframe (bsid 16) of (frmsiz + 1) * 2 bytes.
    static func eac3Frame(frmsiz: Int, random: inout TransportStreamTestRandom) -> [UInt8] {
        let size = (frmsiz + 1) * 2
        return [0x0B, 0x77, UInt8(frmsiz >> 8), UInt8(frmsiz & 0xFF), 0x34, 0x80, 0x00]
            + (7..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    /// Encrypts a one-stream segment made of `pes` payloads and returns the encrypted payloads; checks that
    /// decryption restores the segment.
    static func encryptPayloads(_ payloads: [[UInt8]], streamType: UInt8, streamID: UInt8, bounded: Bool) throws -> [[UInt8]] {
        let segment = TransportStreamTestMuxing.segment(
            streams: [.init(pid: 0x101, streamType: streamType)],
            pes: payloads.enumerated().map {
                (
                    0x101,
                    TransportStreamTestMuxing.pes(streamID: streamID, pts: UInt64(90_000 + 3600 * $0.offset), payload: $0.element, bounded: bounded)
                )
            }
        )
        let encrypted = try TransportStreamFixtures.encrypt(segment, key: key, iv: iv)
        // Decryption restores the PES packets; it keeps the encrypted segment's packets (one grown by escaping ends
        // in stuffing), so its size, not the clear layout.
        for chunkSize in [nil, 100] {
            let decrypted = try TransportStreamFixtures.decrypt(encrypted, key: key, iv: iv, chunkSize: chunkSize)
            #expect(decrypted.count == encrypted.count)
            #expect(
                TransportStreamTestMuxing.pesPackets(decrypted) == TransportStreamTestMuxing.pesPackets(segment),
                "decryption restores the PES packets"
            )
        }
        return TransportStreamTestMuxing.pesPackets(encrypted)[0x101]!.map(TransportStreamTestMuxing.pesPayload)
    }

    // MARK: Tests

    @Test("H.264: the 1-in-10 pattern after a 32-byte leader, one chain per NAL unit, escaped again")
    func h264Pattern() throws {
        var random = TransportStreamTestRandom(state: 264)
        // Lengths around every boundary of Listing 2-1: 48 (all clear), 49 (one block, one clear byte), 64 (a last
        // remainder of exactly 16 stays clear), 65, 208 (= 32 + 160 + 16), 209, and long ones.
        let lengths = [10, 32, 48, 49, 50, 63, 64, 65, 192, 208, 209, 224, 225, 400, 4000, 20000]
        var pictures: [[UInt8]] = []
        var expected: [[UInt8]] = []
        for type: UInt8 in [1, 5, 6, 7] {
            var clear: [UInt8] = [0, 0, 0, 1, 0x09, 0xF0]
            var encrypted = clear
            for length in lengths {
                let nal = Self.nalUnit(type: type, length: length, random: &random)
                clear += [0, 0, 0, 1] + nal
                encrypted += [0, 0, 0, 1] + (try Self.encryptNALUnit(nal))
            }
            pictures.append(clear)
            expected.append(encrypted)
        }
        let actual = try Self.encryptPayloads(pictures, streamType: 0x1B, streamID: 0xE0, bounded: false)
        #expect(actual.count == expected.count)
        for (index, (mine, reference)) in zip(actual, expected).enumerated() {
            #expect(mine == reference, "picture \(index) (NAL type \([1, 5, 6, 7][index]))")
        }
        // The NAL units do carry emulation prevention bytes, in clear and in encrypted parts.
        #expect(pictures[0].count > lengths.reduce(0, +))
    }

    @Test("H.264 PES packets with PES_packet_length grow with the added escaping and shrink back")
    func h264BoundedPES() throws {
        var random = TransportStreamTestRandom(state: 7)
        let pictures = (0..<5).map { _ in [0, 0, 1] + Self.nalUnit(type: 5, length: 3000, random: &random) }
        let actual = try Self.encryptPayloads(pictures, streamType: 0x1B, streamID: 0xE0, bounded: true)
        #expect(try actual == pictures.map { [0, 0, 1] + (try Self.encryptNALUnit(Array($0.dropFirst(3)))) })
    }

    @Test("AAC: ADTS header and 16 bytes clear, whole blocks encrypted, the tail clear")
    func aacFrames() throws {
        var random = TransportStreamTestRandom(state: 15)
        let sizes = [17, 23, 38, 39, 40, 55, 56, 100, 1000, 2047]
        var payloads: [[UInt8]] = []
        var expected: [[UInt8]] = []
        for crc in [false, true] {
            let frames = sizes.map { Self.adtsFrame(length: $0 + (crc ? 2 : 0), crc: crc, random: &random) }
            payloads.append(frames.flatMap { $0 })
            expected.append(try frames.flatMap { try Self.encryptFrame($0, header: crc ? 9 : 7) })
        }
        #expect(try Self.encryptPayloads(payloads, streamType: 0x0F, streamID: 0xC0, bounded: true) == expected)
    }

    @Test("AC-3 and E-AC-3: 16 bytes clear from the sync word, then whole blocks")
    func dolbyFrames() throws {
        var random = TransportStreamTestRandom(state: 3)
        // 48 kHz at 32 and 40 kb/s: 128 and 160 bytes; 44.1 kHz at 32 kb/s with the odd frmsizecod: 140 bytes;
        // 32 kHz at 32 kb/s: 192 bytes.
        let ac3 = [
            Self.ac3Frame(fscod: 0, frmsizecod: 0, size: 128, random: &random), Self.ac3Frame(fscod: 0, frmsizecod: 2, size: 160, random: &random),
            Self.ac3Frame(fscod: 1, frmsizecod: 1, size: 140, random: &random), Self.ac3Frame(fscod: 2, frmsizecod: 0, size: 192, random: &random),
        ]
        #expect(
            try Self.encryptPayloads([ac3.flatMap { $0 }], streamType: 0x81, streamID: 0xBD, bounded: true) == [
                try ac3.flatMap { try Self.encryptFrame($0, header: 0) }
            ]
        )
        let eac3 = [9, 15, 16, 20, 100, 383].map { Self.eac3Frame(frmsiz: $0, random: &random) }
        #expect(
            try Self.encryptPayloads([eac3.flatMap { $0 }], streamType: 0x87, streamID: 0xBD, bounded: true) == [
                try eac3.flatMap { try Self.encryptFrame($0, header: 0) }
            ]
        )
    }
}
