import Foundation
import MediaCrypto
import StowageCrypto
import Testing

/// Oracle 1: our decryption of each Shaka Packager SAMPLE-AES segment against its clear twin, and oracle 4: the
/// same output whatever the chunking.
@Suite("SAMPLE-AES transport stream decryption")
struct SampleAESTransportStreamDecryptorTests {
    @Test("decrypts every segment of the Shaka fixtures to its clear twin, packet for packet", arguments: TransportStreamFixtures.all)
    func decryptsToClearTwin(fixture: TransportStreamFixtures.Fixture) async throws {
        let directory = try TransportStreamFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var packetsPerPlaylist: [String: Int] = [:]
        for segment in fixture.segments {
            let encrypted = try TransportStreamFixtures.read(segment.encrypted)
            let clear = try TransportStreamFixtures.read(segment.clear)
            let decrypted = try TransportStreamFixtures.decrypt(encrypted, key: segment.key, iv: segment.iv)

            // ffmpeg demuxes ours and the twin: every stream, every packet, same size and MD5.
            let output = directory.appendingPathComponent(segment.file)
            try Data(decrypted).write(to: output)
            let ours = TransportStreamFFmpeg.byStream(try await TransportStreamFFmpeg.packets(output))
            let twin = TransportStreamFFmpeg.byStream(try await TransportStreamFFmpeg.packets(segment.clear))
            #expect(ours.keys.sorted() == twin.keys.sorted(), "\(segment): streams")
            for (stream, expected) in twin {
                let actual = ours[stream] ?? []
                #expect(actual.count == expected.count, "\(segment) stream \(stream): packet count")
                for (index, (mine, theirs)) in zip(actual, expected).enumerated() where mine != theirs {
                    Issue.record("\(segment) stream \(stream) packet \(index): \(mine) instead of \(theirs)")
                }
                packetsPerPlaylist[String(segment.file.prefix(5)), default: 0] += expected.count
            }
            // Stronger than the oracle: Shaka packetizes the clear twin exactly as we repacketize, so the bytes match.
            #expect(decrypted == clear, "\(segment): not byte-identical to the clear twin")
        }
        // The twin's packets add up to what packet-counts.json says ffprobe finds in the whole playlists.
        let twinDirectory = fixture.name == TransportStreamFixtures.rotation ? "shaka/ts-clear-aac" : "shaka/ts-clear-\(fixture.name)"
        for (playlist, count) in packetsPerPlaylist {
            #expect(count == TransportStreamFixtures.packetCount(directory: twinDirectory, playlist: "\(playlist).m3u8", stream: playlist))
        }
    }

    @Test("the decrypted PMT has the clear stream types and no SAMPLE-AES descriptors", arguments: TransportStreamFixtures.names)
    func rewritesProgramMap(name: String) throws {
        let fixture = TransportStreamFixtures.fixture(name)
        for segment in [fixture.segments(of: "video")[0], fixture.segments(of: "audio")[0]] {
            let encrypted = try TransportStreamFixtures.read(segment.encrypted)
            let pmtPID = TransportStreamTestMuxing.pmtPID(encrypted)
            let before = TransportStreamTestMuxing.programMap(encrypted, pmtPID: pmtPID)
            let after = TransportStreamTestMuxing.programMap(
                try TransportStreamFixtures.decrypt(encrypted, key: segment.key, iv: segment.iv),
                pmtPID: pmtPID
            )
            #expect(before.count == 1 && after.count == 1)
            let mapping: [UInt8: UInt8] = [0xDB: 0x1B, 0xCF: 0x0F, 0xC1: 0x81, 0xC2: 0x87]
            #expect(after[0].streamType == mapping[before[0].streamType], "\(segment)")
            #expect(!before[0].descriptors.isEmpty)
            #expect(after[0].descriptors.isEmpty, "\(segment): descriptors left: \(after[0].descriptors)")
        }
    }

    @Test("chunks of 1, 187, 4096 bytes and the whole segment give the same output", arguments: TransportStreamFixtures.names)
    func chunkingDoesNotMatter(name: String) throws {
        let fixture = TransportStreamFixtures.fixture(name)
        for segment in fixture.segments where segment.file.hasSuffix("_1.ts") {
            let encrypted = try TransportStreamFixtures.read(segment.encrypted)
            let whole = try TransportStreamFixtures.decrypt(encrypted, key: segment.key, iv: segment.iv)
            for size in [1, 187, 188, 4096] {
                let chunked = try TransportStreamFixtures.decrypt(encrypted, key: segment.key, iv: segment.iv, chunkSize: size)
                #expect(chunked == whole, "\(segment) in chunks of \(size)")
            }
        }
    }

    @Test("prompt output: the same bytes, most of them out before the segment ends", arguments: TransportStreamFixtures.names)
    func promptOutputEmitsAsItGoes(name: String) throws {
        let fixture = TransportStreamFixtures.fixture(name)
        for segment in fixture.segments where segment.file.hasSuffix("_1.ts") {
            let encrypted = try TransportStreamFixtures.read(segment.encrypted)
            let whole = try TransportStreamFixtures.decrypt(encrypted, key: segment.key, iv: segment.iv)
            for chunkSize in [188, 4096] {
                let batched = try SampleAESTransportStreamDecryptor(key: SecretBytes(segment.key), iv: segment.iv, segment: "test.ts")
                let prompt = try SampleAESTransportStreamDecryptor(
                    key: SecretBytes(segment.key),
                    iv: segment.iv,
                    segment: "test.ts",
                    promptOutput: true
                )
                var (batchedBefore, promptBefore) = (0, 0)
                var output: [UInt8] = []
                var offset = 0
                while offset < encrypted.count {
                    let chunk = Array(encrypted[offset..<min(encrypted.count, offset + chunkSize)])
                    offset += chunk.count
                    try chunk.withUnsafeBytes { bytes in
                        try batched.process(bytes) { batchedBefore += $0.count }
                        try prompt.process(bytes) {
                            promptBefore += $0.count
                            output += $0
                        }
                    }
                }
                try prompt.finish { output += $0 }
                #expect(output == whole, "\(segment) in chunks of \(chunkSize)")
                // Prompt output is never later than batched output, and leaves as PES packets complete: all but the
                // last of each stream before the end. (Batched output waits for 256 KiB while another stream's PES
                // packet is incomplete: muxed segments such as the demo's, PlayWhileDownloadingTests.)
                #expect(promptBefore >= batchedBefore)
                #expect(promptBefore > whole.count / 2, "\(segment): \(promptBefore) of \(whole.count) bytes before the end")
            }
        }
    }

    /// The same packet-level change made to a Shaka segment and to its clear twin.
    enum PSILayout: String, CaseIterable, Sendable {
        /// PAT and PMT again after 40 packets, their continuity counters advanced.
        case repeated
        /// PAT and PMT after the first 30 media packets, as a segmenter cutting before a PSI repeat leaves them.
        case afterMedia
        /// A segment cut between the PAT and the PMT of a repeat: it starts with a PMT, then media, then PAT and PMT.
        case programMapFirst

        func apply(_ segment: [UInt8]) -> [UInt8] {
            var packets = TransportStreamTestMuxing.packets(segment).map { Array($0) }
            let psi = Array(packets[0..<2])
            #expect(TransportStreamTestMuxing.pid(psi[0][...]) == 0)
            switch self {
            case .repeated:
                let again = psi.map { packet -> [UInt8] in
                    var copy = packet
                    copy[3] = (copy[3] & 0xF0) | ((copy[3] & 0x0F) &+ 1) & 0x0F
                    return copy
                }
                packets.insert(contentsOf: again, at: 40)
            case .afterMedia:
                packets.removeFirst(2)
                packets.insert(contentsOf: psi, at: 30)
            case .programMapFirst:
                packets.removeFirst(2)
                var again = psi[1]
                again[3] = (again[3] & 0xF0) | ((again[3] & 0x0F) &+ 1) & 0x0F
                packets.insert(contentsOf: [psi[0], again], at: 30)
                packets.insert(psi[1], at: 0)
            }
            return packets.flatMap { $0 }
        }
    }

    @Test(
        "PAT and PMT repeated, after the media they describe, or a PMT before the PAT: the clear twin laid out the same way (its media, for a PMT first)",
        arguments: PSILayout.allCases
    )
    func programTablesAnywhere(layout: PSILayout) throws {
        let fixture = TransportStreamFixtures.fixture("aac")
        for segment in fixture.segments {
            let encrypted = layout.apply(try TransportStreamFixtures.read(segment.encrypted))
            let clear = layout.apply(try TransportStreamFixtures.read(segment.clear))
            let decrypted = try TransportStreamFixtures.decrypt(encrypted, key: segment.key, iv: segment.iv)
            #expect(try TransportStreamFixtures.decrypt(encrypted, key: segment.key, iv: segment.iv, chunkSize: 188) == decrypted)
            if layout == .programMapFirst {
                // The PMT held before the PAT is written after it: the media packets are the twin's, in order.
                let pmtPID = TransportStreamTestMuxing.pmtPID(clear)
                func media(_ bytes: [UInt8]) -> [[UInt8]] {
                    TransportStreamTestMuxing.packets(bytes).filter { ![0, pmtPID].contains(TransportStreamTestMuxing.pid($0)) }.map { Array($0) }
                }
                #expect(media(decrypted) == media(clear), "\(segment) \(layout)")
                // The PMT's table is in the output, after the PAT.
                let pids = TransportStreamTestMuxing.packets(decrypted).map { TransportStreamTestMuxing.pid($0) }
                let pat = try #require(pids.firstIndex(of: 0))
                #expect(pids[pat...].contains(pmtPID))
            } else {
                #expect(decrypted == clear, "\(segment) \(layout)")
            }
        }
    }

    @Test("a clear segment passes through byte for byte")
    func clearSegmentPassesThrough() throws {
        for segment in TransportStreamFixtures.fixture("multislice").segments {
            let clear = try TransportStreamFixtures.read(segment.clear)
            #expect(try TransportStreamFixtures.decrypt(clear, key: segment.key, iv: segment.iv) == clear, "\(segment)")
        }
        for source in ["h264_aac.ts", "h264_ac3.ts", "h264_eac3.ts", "h264_multislice.ts"] {
            let clear = try TransportStreamFixtures.read(TransportStreamFixtures.media.appendingPathComponent("src/\(source)"))
            #expect(try TransportStreamFixtures.decrypt(clear, key: [UInt8](repeating: 1, count: 16), iv: [UInt8](repeating: 2, count: 16)) == clear)
        }
    }

    @Test("the wrong key gives a well-formed segment with different media, not a crash")
    func wrongKey() throws {
        let segment = TransportStreamFixtures.fixture("multislice").segments[0]
        let encrypted = try TransportStreamFixtures.read(segment.encrypted)
        let wrong = try TransportStreamFixtures.decrypt(encrypted, key: [UInt8](repeating: 0x55, count: 16), iv: segment.iv)
        #expect(wrong != (try TransportStreamFixtures.read(segment.clear)))
        let validator = TransportStreamValidator(segment: segment.file)
        try wrong.withUnsafeBytes { try validator.process($0) }
        #expect(try validator.finish().isEncrypted == false)
    }

    @Test("keys and IVs of the wrong length are refused")
    func badKeyMaterial() {
        #expect(throws: SegmentCryptoError.invalidKey(segment: "s.ts")) {
            try SampleAESTransportStreamDecryptor(
                key: SecretBytes([UInt8](repeating: 0, count: 32)),
                iv: [UInt8](repeating: 0, count: 16),
                segment: "s.ts"
            )
        }
        #expect(throws: SegmentCryptoError.invalidIV(segment: "s.ts")) {
            try SampleAESTransportStreamDecryptor(
                key: SecretBytes([UInt8](repeating: 0, count: 16)),
                iv: [UInt8](repeating: 0, count: 8),
                segment: "s.ts"
            )
        }
        #expect(throws: SegmentCryptoError.invalidKey(segment: "s.ts")) {
            try SampleAESTransportStreamEncryptor(
                key: SecretBytes([UInt8](repeating: 0, count: 15)),
                iv: [UInt8](repeating: 0, count: 16),
                segment: "s.ts"
            )
        }
    }
}
