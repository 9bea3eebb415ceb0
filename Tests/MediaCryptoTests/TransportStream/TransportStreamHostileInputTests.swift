import Foundation
import MediaCrypto
import StowageCore
import StowageCrypto
import Testing

/// Oracle 3: damaged and hostile segments give a typed ``SegmentCryptoError`` (or, when the damage leaves a
/// well-formed stream, output), never a crash, a hang or an unbounded allocation.
@Suite("hostile transport streams")
struct TransportStreamHostileInputTests {
    static let codes: Set<ErrorCode> = [.malformedContainer, .limitExceeded, .unsupportedStream]
    static let key = [UInt8](repeating: 0x11, count: 16)
    static let iv = [UInt8](repeating: 0x22, count: 16)

    /// What happens to `input` in the decryptor, the encryptor and the validator: nil when it went through, else
    /// the error's code. Any error other than a ``SegmentCryptoError`` with one of `codes` fails the test.
    @discardableResult
    static func outcome(_ input: [UInt8], key: [UInt8] = key, iv: [UInt8] = iv, _ comment: String) -> [ErrorCode?] {
        var results: [ErrorCode?] = []
        for run in [TransportStreamFixtures.decrypt, TransportStreamFixtures.encrypt] {
            do {
                _ = try run(input, key, iv, nil)
                results.append(nil)
            } catch let error as SegmentCryptoError {
                #expect(codes.contains(error.code), "\(comment): \(error)")
                #expect(error.segment == "test.ts")
                results.append(error.code)
            } catch {
                Issue.record("\(comment): untyped error \(error)")
            }
        }
        do throws(SegmentCryptoError) {
            _ = try TransportStreamFixtures.validate(input)
            results.append(nil)
        } catch {
            #expect(error.code == "malformed_container", "\(comment): \(error)")
            results.append(error.code)
        }
        return results
    }

    static var samples: [TransportStreamFixtures.Segment] {
        let multislice = TransportStreamFixtures.fixture("multislice")
        return [
            multislice.segments(of: "video")[0], multislice.segments(of: "audio")[0],
            TransportStreamFixtures.fixture("ac3").segments(of: "audio")[0], TransportStreamFixtures.fixture("eac3").segments(of: "audio")[1],
        ]
    }

    @Test("truncation at every packet boundary", arguments: samples)
    func truncatedAtPacketBoundaries(segment: TransportStreamFixtures.Segment) throws {
        let encrypted = try TransportStreamFixtures.read(segment.encrypted)
        for packets in 0...(encrypted.count / 188) {
            let results = Self.outcome(
                Array(encrypted.prefix(packets * 188)),
                key: segment.key,
                iv: segment.iv,
                "\(segment) cut after \(packets) packets"
            )
            // Before the PAT and PMT have gone by there is nothing to decrypt: the segment is refused.
            if packets < 2 { #expect(results == [.malformedContainer, .malformedContainer, .malformedContainer]) }
        }
        #expect(Self.outcome(encrypted, key: segment.key, iv: segment.iv, "\(segment) whole") == [nil, nil, nil])
    }

    @Test("truncation inside a packet is always refused", arguments: samples)
    func truncatedInsidePackets(segment: TransportStreamFixtures.Segment) throws {
        let encrypted = try TransportStreamFixtures.read(segment.encrypted)
        var random = TransportStreamTestRandom(state: 188)
        for _ in 0..<60 {
            var length = Int(random.next() % UInt64(encrypted.count))
            if length % 188 == 0 { length += 1 }
            let results = Self.outcome(Array(encrypted.prefix(length)), key: segment.key, iv: segment.iv, "\(segment) cut at \(length)")
            #expect(results == [.malformedContainer, .malformedContainer, .malformedContainer], "cut at byte \(length)")
        }
    }

    @Test("flipped bits in packet, adaptation field, PSI and PES headers", arguments: samples)
    func flippedHeaderBytes(segment: TransportStreamFixtures.Segment) throws {
        let encrypted = try TransportStreamFixtures.read(segment.encrypted)
        for packet in 0..<min(12, encrypted.count / 188) {
            // The 4-byte header, then the adaptation field, pointer_field, section or PES header that follows.
            for offset in 0..<24 {
                for mask: UInt8 in [0x01, 0x40, 0xFF] {
                    var damaged = encrypted
                    damaged[packet * 188 + offset] ^= mask
                    Self.outcome(damaged, key: segment.key, iv: segment.iv, "\(segment) packet \(packet) byte \(offset) ^ \(mask)")
                }
            }
        }
    }

    @Test("random damage anywhere")
    func randomDamage() throws {
        var random = TransportStreamTestRandom(state: 0xDA_0A6E)
        for segment in Self.samples {
            let encrypted = try TransportStreamFixtures.read(segment.encrypted)
            for trial in 0..<100 {
                var damaged = encrypted
                for _ in 0...(random.next() % 4) {
                    damaged[Int(random.next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: random.next())
                }
                Self.outcome(damaged, key: segment.key, iv: segment.iv, "\(segment) trial \(trial)")
            }
        }
    }

    @Test("garbage, silence and an empty segment are refused")
    func garbage() {
        var random = TransportStreamTestRandom(state: 42)
        let noise = (0..<(188 * 50)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        #expect(Self.outcome(noise, "noise") == [.malformedContainer, .malformedContainer, .malformedContainer])
        // Noise behind sync bytes: packets on random PIDs before any PAT.
        var synced = noise
        for index in stride(from: 0, to: synced.count, by: 188) { synced[index] = 0x47 }
        #expect(Self.outcome(synced, "synced noise") == [.malformedContainer, .malformedContainer, .malformedContainer])
        #expect(
            Self.outcome([UInt8](repeating: 0, count: 188 * 4), "zeros") == [.malformedContainer, .malformedContainer, .malformedContainer]
        )
        #expect(Self.outcome([], "empty") == [.malformedContainer, .malformedContainer, .malformedContainer])
    }

    @Test("a segment without its PMT, or without its PAT, is refused")
    func missingProgramSpecificInformation() throws {
        let segment = Self.samples[0]
        let encrypted = try TransportStreamFixtures.read(segment.encrypted)
        let pmtPID = TransportStreamTestMuxing.pmtPID(encrypted)
        for missing: UInt16 in [pmtPID, 0] {
            let stripped = TransportStreamTestMuxing.packets(encrypted).filter { TransportStreamTestMuxing.pid($0) != missing }.flatMap { $0 }
            let results = Self.outcome(stripped, key: segment.key, iv: segment.iv, "without PID \(missing)")
            #expect(results == [.malformedContainer, .malformedContainer, .malformedContainer])
        }
    }

    @Test("a PES packet that never ends is refused at 32 MiB, without buffering more")
    func endlessPES() throws {
        let streams: [TransportStreamTestMuxing.StreamEntry] = [.init(pid: 0x100, streamType: 0xDB)]
        var start = TransportStreamTestMuxing.segment(streams: streams, pes: [])
        // A PES header with PES_packet_length 0 (unbounded: it ends only at the next PES packet), then data forever.
        var counter: UInt8 = 0
        var first = [0x47, 0x41, 0x00, 0x10 | counter] + [0, 0, 1, 0xE0, 0, 0, 0x80, 0x00, 0x00, 0, 0, 1, 0x65]
        first += [UInt8](repeating: 0xAB, count: 188 - first.count)
        start += first
        let decryptor = try SampleAESTransportStreamDecryptor(key: SecretBytes(Self.key), iv: Self.iv, segment: "endless.ts")
        var fed = 0
        var caught: SegmentCryptoError?
        var chunk = [UInt8](repeating: 0xAB, count: 188 * 5000)
        do {
            try decryptor.process(start) { _ in }
            while fed < 40 << 20 {
                for index in 0..<5000 {
                    counter = (counter + 1) & 0x0F
                    chunk.replaceSubrange((index * 188)..<(index * 188 + 4), with: [0x47, 0x01, 0x00, 0x10 | counter])
                }
                try decryptor.process(chunk) { _ in }
                fed += chunk.count
            }
        } catch let error as SegmentCryptoError {
            caught = error
        }
        #expect(caught?.code == "limit_exceeded", "\(String(describing: caught))")
        #expect(fed <= 33 << 20)
    }

    @Test("lengths that lie: PES_packet_length, section_length, ADTS frame_length")
    func lyingLengths() {
        var random = TransportStreamTestRandom(state: 99)
        // A bounded audio PES packet that declares more than arrives before the next one.
        let frame = SampleAESSampleEncryptionTests.adtsFrame(length: 200, crc: false, random: &random)
        var pes = TransportStreamTestMuxing.pes(streamID: 0xC0, payload: frame)
        pes[4] = 0x10
        let streams: [TransportStreamTestMuxing.StreamEntry] = [.init(pid: 0x101, streamType: 0xCF)]
        let longPES = TransportStreamTestMuxing.segment(
            streams: streams,
            pes: [(0x101, pes), (0x101, TransportStreamTestMuxing.pes(streamID: 0xC0, payload: frame))]
        )
        #expect(Self.outcome(longPES, "PES_packet_length too long")[0] == "malformed_container")

        // An ADTS frame that claims 8191 bytes in a PES packet of 200.
        var absurd = frame
        absurd[3] |= 0x03
        absurd[4] = 0xFF
        absurd[5] |= 0xE0
        let absurdFrame = TransportStreamTestMuxing.segment(
            streams: streams,
            pes: [(0x101, TransportStreamTestMuxing.pes(streamID: 0xC0, payload: absurd))]
        )
        #expect(Self.outcome(absurdFrame, "frame_length 8191")[0] == "malformed_container")

        // A PMT whose section_length claims the maximum: the section never completes before the next one starts.
        var segment = TransportStreamTestMuxing.segment(
            streams: streams,
            pes: [(0x101, TransportStreamTestMuxing.pes(streamID: 0xC0, payload: frame))]
        )
        segment[188 + 6] = 0xB3
        segment[188 + 7] = 0xFD
        segment += segment[188..<376]
        #expect(Self.outcome(segment, "section_length 1021") == [.malformedContainer, .malformedContainer, .malformedContainer])
        var tooLong = segment
        tooLong[188 + 6] = 0xBF
        tooLong[188 + 7] = 0xFF
        #expect(Self.outcome(tooLong, "section_length 4095") == [.malformedContainer, .malformedContainer, .malformedContainer])
    }

    @Test("a missing packet (continuity gap) is refused")
    func continuityGap() throws {
        let segment = Self.samples[0]
        let encrypted = try TransportStreamFixtures.read(segment.encrypted)
        var packets = TransportStreamTestMuxing.packets(encrypted)
        packets.remove(at: 10)
        let results = Self.outcome(packets.flatMap { $0 }, key: segment.key, iv: segment.iv, "packet 10 missing")
        // The encryptor passes encrypted streams through without looking at them; it checks the clear one.
        #expect(results == [.malformedContainer, nil, .malformedContainer])
        var clearPackets = TransportStreamTestMuxing.packets(try TransportStreamFixtures.read(segment.clear))
        clearPackets.remove(at: 10)
        #expect(Self.outcome(clearPackets.flatMap { $0 }, key: segment.key, iv: segment.iv, "clear, packet 10 missing")[1] == "malformed_container")
        // A packet sent twice is allowed (ISO/IEC 13818-1 2.4.3.3) and dropped.
        var repeated = TransportStreamTestMuxing.packets(encrypted)
        repeated.insert(repeated[10], at: 11)
        let decrypted = try TransportStreamFixtures.decrypt(repeated.flatMap { $0 }, key: segment.key, iv: segment.iv)
        #expect(decrypted == (try TransportStreamFixtures.read(segment.clear)))
    }
}
