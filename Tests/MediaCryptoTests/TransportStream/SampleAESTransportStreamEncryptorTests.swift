import Foundation
import MediaCrypto
import StowageCore
import StowageCrypto
import Testing

/// Oracle 2: our encryptor on the clear twins, then our decryptor, gives the twins back; Shaka Packager's own
/// encryption of the twins matches ours; and ffmpeg decrypts our output except where its known defects strike.
@Suite("SAMPLE-AES transport stream encryption")
struct SampleAESTransportStreamEncryptorTests {
    @Test("encrypting a clear twin and decrypting it again gives the twin back, byte for byte", arguments: TransportStreamFixtures.names)
    func roundTrip(name: String) throws {
        for segment in TransportStreamFixtures.fixture(name).segments {
            let clear = try TransportStreamFixtures.read(segment.clear)
            let encrypted = try TransportStreamFixtures.encrypt(clear, key: segment.key, iv: segment.iv)
            #expect(encrypted != clear)
            #expect(try TransportStreamFixtures.decrypt(encrypted, key: segment.key, iv: segment.iv) == clear, "\(segment)")
            let validator = TransportStreamValidator(segment: segment.file)
            try encrypted.withUnsafeBytes { try validator.process($0) }
            #expect(try validator.finish().isEncrypted, "\(segment)")
        }
    }

    @Test("round trip of ffmpeg-muxed sources with video and audio interleaved in one stream")
    func roundTripMuxedSources() throws {
        let key = TransportStreamFixtures.bytes(hex: "000102030405060708090a0b0c0d0e0f")
        let iv = TransportStreamFixtures.bytes(hex: "f0e0d0c0b0a090807060504030201000")
        for source in ["h264_aac.ts", "h264_ac3.ts", "h264_eac3.ts", "h264_multislice.ts"] {
            let clear = try TransportStreamFixtures.read(TransportStreamFixtures.media.appendingPathComponent("src/\(source)"))
            let encrypted = try TransportStreamFixtures.encrypt(clear, key: key, iv: iv)
            #expect(encrypted.count == clear.count, "\(source): the packets keep their places")
            #expect(try TransportStreamFixtures.decrypt(encrypted, key: key, iv: iv) == clear, "\(source)")
            for size in [1, 4096] {
                #expect(try TransportStreamFixtures.encrypt(clear, key: key, iv: iv, chunkSize: size) == encrypted, "\(source), chunks of \(size)")
            }
        }
    }

    /// Shaka Packager encrypted the twins with the same key and IV, so our output must be the same bytes. The one
    /// exception: for AC-3 Shaka puts the first 10 bytes of the stream's first syncframe in every segment's PMT,
    /// where we take the segment's own first syncframe (it differs from segment 2 on, in its CRC and bit rate bits).
    @Test("our encryption of the twins is byte for byte Shaka Packager's", arguments: TransportStreamFixtures.names)
    func matchesShakaPackager(name: String) throws {
        for segment in TransportStreamFixtures.fixture(name).segments {
            let clear = try TransportStreamFixtures.read(segment.clear)
            let ours = try TransportStreamFixtures.encrypt(clear, key: segment.key, iv: segment.iv)
            let shaka = try TransportStreamFixtures.read(segment.encrypted)
            if ours == shaka { continue }
            #expect(name == "ac3" && !segment.isVideo && !segment.file.hasSuffix("_1.ts"), "\(segment) differs from Shaka Packager's output")
            let pmtPID = TransportStreamTestMuxing.pmtPID(shaka)
            #expect(ours.count == shaka.count)
            for (index, (mine, theirs)) in zip(TransportStreamTestMuxing.packets(ours), TransportStreamTestMuxing.packets(shaka)).enumerated()
            where TransportStreamTestMuxing.pid(theirs) != pmtPID && mine != theirs {
                Issue.record("\(segment): packet \(index) differs from Shaka Packager's")
            }
            let mine = TransportStreamTestMuxing.programMap(ours, pmtPID: pmtPID)[0].descriptors
            let theirs = TransportStreamTestMuxing.programMap(shaka, pmtPID: pmtPID)[0].descriptors
            #expect(mine.dropLast(10) == theirs.dropLast(10))
            let firstFrame = TransportStreamTestMuxing.pesPayload(TransportStreamTestMuxing.pesPackets(clear).values.first![0])
            #expect(Array(mine.suffix(10)) == Array(firstFrame.prefix(10)))
        }
    }

    @Test(
        "the PMT signals SAMPLE-AES as section 3.0 requires, with the audio setup information",
        arguments: [
            ("aac", 0xCF, "aacd", "zaac"), ("ac3", 0xC1, "ac3d", "zac3"), ("eac3", 0xC2, "ec3d", "zec3"),
        ]
    )
    func signaling(name: String, streamType: Int, indicator: String, audioType: String) throws {
        let fixture = TransportStreamFixtures.fixture(name)
        let video = fixture.segments(of: "video")[0]
        let audio = fixture.segments(of: "audio")[0]
        let encryptedVideo = try TransportStreamFixtures.encrypt(try TransportStreamFixtures.read(video.clear), key: video.key, iv: video.iv)
        let videoMap = TransportStreamTestMuxing.programMap(encryptedVideo, pmtPID: TransportStreamTestMuxing.pmtPID(encryptedVideo))
        #expect(videoMap.map(\.streamType) == [0xDB])
        #expect(videoMap.map(\.descriptors) == [[0x0F, 4] + Array("zavc".utf8)])

        let clearAudio = try TransportStreamFixtures.read(audio.clear)
        let encryptedAudio = try TransportStreamFixtures.encrypt(clearAudio, key: audio.key, iv: audio.iv)
        let audioMap = TransportStreamTestMuxing.programMap(encryptedAudio, pmtPID: TransportStreamTestMuxing.pmtPID(encryptedAudio))
        #expect(audioMap.map(\.streamType) == [UInt8(streamType)])
        let descriptors = audioMap[0].descriptors
        #expect(Array(descriptors.prefix(6)) == [0x0F, 4] + Array(indicator.utf8))
        // registration_descriptor: tag 5, length, 'apad', audio_type, priming 0, version 1, setup_data_length, setup_data.
        let registration = Array(descriptors.dropFirst(6))
        #expect(registration.count >= 14 && registration[0] == 0x05 && Int(registration[1]) == registration.count - 2)
        #expect(Array(registration[2..<6]) == Array("apad".utf8))
        #expect(Array(registration[6..<10]) == Array(audioType.utf8))
        #expect(Array(registration[10..<13]) == [0, 0, 1])
        let setup = Array(registration[14...])
        #expect(Int(registration[13]) == setup.count)
        let firstFrame = TransportStreamTestMuxing.pesPayload(TransportStreamTestMuxing.pesPackets(clearAudio).values.first![0])
        switch name {
        case "aac":
            // AudioSpecificConfig from the ADTS header: AAC-LC (2), the sampling frequency index, the channels.
            let index = (firstFrame[2] >> 2) & 0x0F
            let channels = (firstFrame[2] & 1) << 2 | firstFrame[3] >> 6
            #expect(setup == [0x10 | index >> 1, (index & 1) << 7 | channels << 3])
        case "ac3":
            #expect(setup == Array(firstFrame.prefix(10)))
        default:
            // dec3: data_rate 48 kb/s, one independent substream, fscod 0, bsid 16, acmod and lfeon of the frame.
            #expect(setup.count == 5)
            #expect(Int(setup[0]) << 5 | Int(setup[1]) >> 3 == 48)
            #expect(setup[2] == 16 << 1)
            #expect(setup[3] == firstFrame[4] & 0x0F)
        }
    }

    @Test("media that SAMPLE-AES cannot protect in a transport stream is refused, not left clear")
    func refusesUnprotectableStreams() throws {
        for streamType: UInt8 in [0x24, 0x03, 0x02] {
            let segment = TransportStreamTestMuxing.segment(
                streams: [.init(pid: 0x100, streamType: streamType)],
                pes: [(0x100, TransportStreamTestMuxing.pes(streamID: 0xE0, payload: [0, 0, 1, 0x40, 1, 2, 3]))]
            )
            #expect {
                try TransportStreamFixtures.encrypt(segment, key: [UInt8](repeating: 1, count: 16), iv: [UInt8](repeating: 2, count: 16))
            } throws: { error in
                (error as? SegmentCryptoError)?.code == "unsupported_stream"
            }
        }
    }

    @Test("AAC profiles without a SAMPLE-AES audio type are refused")
    func refusesAACMain() throws {
        var random = TransportStreamTestRandom(state: 1)
        var frame = SampleAESSampleEncryptionTests.adtsFrame(length: 100, crc: false, random: &random)
        frame[2] &= 0x3F  // profile 0: AAC Main
        let segment = TransportStreamTestMuxing.segment(
            streams: [.init(pid: 0x101, streamType: 0x0F)],
            pes: [(0x101, TransportStreamTestMuxing.pes(streamID: 0xC0, payload: frame))]
        )
        #expect {
            try TransportStreamFixtures.encrypt(segment, key: [UInt8](repeating: 1, count: 16), iv: [UInt8](repeating: 2, count: 16))
        } throws: { error in
            (error as? SegmentCryptoError)?.code == "unsupported_stream"
        }
    }

    @Test("the PMT waits for the first audio frame; an audio stream without frames gets no setup information")
    func programMapWaitsForAudio() throws {
        var random = TransportStreamTestRandom(state: 5)
        let key = [UInt8](repeating: 1, count: 16)
        let iv = [UInt8](repeating: 2, count: 16)
        let video = TransportStreamTestMuxing.pes(
            streamID: 0xE0,
            payload: [0, 0, 0, 1] + SampleAESSampleEncryptionTests.nalUnit(type: 5, length: 900, random: &random),
            bounded: false
        )
        let audio = TransportStreamTestMuxing.pes(
            streamID: 0xC0,
            payload: SampleAESSampleEncryptionTests.adtsFrame(length: 300, crc: false, random: &random)
        )
        let streams: [TransportStreamTestMuxing.StreamEntry] = [.init(pid: 0x100, streamType: 0x1B), .init(pid: 0x101, streamType: 0x0F)]
        // The audio frame comes after a whole video picture: the PMT goes out first all the same.
        let clear = TransportStreamTestMuxing.segment(streams: streams, pes: [(0x100, video), (0x101, audio)])
        for size in [1, 188, clear.count] {
            let encrypted = try TransportStreamFixtures.encrypt(clear, key: key, iv: iv, chunkSize: size)
            // PAT, PMT (held until the audio frame was seen, then written in its place), the picture (grown by a
            // packet of emulation prevention bytes), the audio frame.
            let pids = TransportStreamTestMuxing.packets(encrypted).map(TransportStreamTestMuxing.pid)
            #expect(pids == [0, 0x1000] + [UInt16](repeating: 0x100, count: 7) + [0x101, 0x101])
            let map = TransportStreamTestMuxing.programMap(encrypted, pmtPID: TransportStreamTestMuxing.pmtPID(encrypted))
            #expect(map.map(\.streamType) == [0xDB, 0xCF])
            #expect(Array(map[1].descriptors.dropFirst(6).prefix(10)) == [0x05, 14] + Array("apadzaac".utf8))
            // Decryption keeps the encrypted segment's packets (the picture's extra one ends in stuffing), so the PES
            // packets, not the packet layout, equal the clear ones.
            let decrypted = try TransportStreamFixtures.decrypt(encrypted, key: key, iv: iv)
            #expect(decrypted.count == encrypted.count)
            #expect(TransportStreamTestMuxing.pesPackets(decrypted) == TransportStreamTestMuxing.pesPackets(clear))
        }
        let silent = TransportStreamTestMuxing.segment(streams: streams, pes: [(0x100, video)])
        let encrypted = try TransportStreamFixtures.encrypt(silent, key: key, iv: iv)
        let map = TransportStreamTestMuxing.programMap(encrypted, pmtPID: TransportStreamTestMuxing.pmtPID(encrypted))
        #expect(map[1].descriptors == [0x0F, 4] + Array("aacd".utf8))
        let decrypted = try TransportStreamFixtures.decrypt(encrypted, key: key, iv: iv)
        #expect(decrypted.count == encrypted.count)
        #expect(TransportStreamTestMuxing.pesPackets(decrypted) == TransportStreamTestMuxing.pesPackets(silent))
    }

    // MARK: - ffmpeg as the client

    /// Our encryption of each twin, one IV per segment, played by ffmpeg from an HLS playlist.
    ///
    /// ffmpeg's SAMPLE-AES decryption (libavformat/hls_sample_encryption.c and hls.c) has known defects; the test
    /// predicts from the stream which packets they touch and requires exactly those, and no other, to differ:
    /// 1. H.264, AC-3 and E-AC-3 (not ADTS): its demuxer hands out the last packet of a segment only after it has
    ///    moved to the next segment, so that packet is decrypted with the NEXT segment's IV, and the last packet of
    ///    the playlist is not decrypted at all. It differs when it has an encrypted block and the IV is wrong.
    /// 2. H.264 with several slices: after a NAL unit shrinks (emulation prevention removed) it moves the following
    ///    NAL units down only while the last protected NAL unit shrank too; a protected NAL unit that does not shrink
    ///    (and anything after it) stays where it was, so the packet is garbled.
    @Test("ffmpeg decrypts our encryption through a playlist, except where its known defects strike", arguments: TransportStreamFixtures.names)
    func ffmpegDecryptsOurOutput(name: String) async throws {
        let fixture = TransportStreamFixtures.fixture(name)
        let directory = try TransportStreamFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for kind in ["video", "audio"] {
            let clear = try fixture.segments(of: kind).map { try TransportStreamFixtures.read($0.clear) }
            let result = try await Self.playThroughFFmpeg(clear, key: fixture.segments[0].key, name: kind, directory: directory)
            #expect(
                result.differing == result.predicted,
                "\(fixture) \(kind): ffmpeg differs at \(result.differing.sorted()), its defects predict \(result.predicted.sorted())"
            )
            if kind == "video" { #expect(!result.predicted.isEmpty, "the video playlists exercise defect 1") }
        }
    }

    /// Defect 2 needs a picture whose slices are protected and of which an earlier one carries an emulation
    /// prevention byte in a clear part: the committed multi-slice fixture has none such, so one is made from it by
    /// writing `00 00 03 01` into the clear bytes of one slice (past the slice header, so demuxing is unchanged).
    @Test("ffmpeg garbles a multi-slice picture after a slice with an emulation prevention byte, as predicted")
    func ffmpegMultiSliceDefect() async throws {
        let segment = TransportStreamFixtures.fixture("multislice").segments(of: "video")[0]
        let original = try TransportStreamFixtures.read(segment.clear)
        let pid = TransportStreamTestMuxing.programMap(original, pmtPID: TransportStreamTestMuxing.pmtPID(original))[0].pid
        var pictures = TransportStreamTestMuxing.pesPackets(original)[pid]!
        var modified: Int?
        search: for (index, pes) in pictures.enumerated() {
            let headerSize = 9 + Int(pes[8])
            let nalUnits = TransportStreamTestMuxing.nalUnits(Array(pes[headerSize...]))
            for (first, second) in zip(nalUnits, nalUnits.dropFirst())
            where [1, 5].contains(first[0] & 0x1F) && [1, 5].contains(second[0] & 0x1F) && first.count > 110 && second.count > 48
                && FFmpegDefectModel.emulationPreventionBytesRemoved(second) == 0
            {
                // The NAL unit's bytes 100..<104 lie in its first clear run after the first encrypted block.
                let start = headerSize + TransportStreamFixtures.firstIndex(of: first, in: Array(pes[headerSize...]))!
                pictures[index].replaceSubrange((start + 99)..<(start + 104), with: [0xAA, 0x00, 0x00, 0x03, 0x01])
                modified = index
                break search
            }
        }
        let picture = try #require(modified, "no picture with two protected slices in a row")
        let clear = TransportStreamTestMuxing.segment(streams: [.init(pid: pid, streamType: 0x1B)], pes: pictures.map { (pid, $0) })
        let directory = try TransportStreamFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try await Self.playThroughFFmpeg([clear], key: segment.key, name: "video", directory: directory)
        #expect(result.misplaced.contains(picture), "the modified picture \(picture) triggers defect 2")
        #expect(
            result.differing == result.predicted,
            "ffmpeg differs at \(result.differing.sorted()), its defects predict \(result.predicted.sorted())"
        )
        #expect(
            try TransportStreamFixtures.decrypt(
                TransportStreamFixtures.encrypt(clear, key: segment.key, iv: segment.iv),
                key: segment.key,
                iv: segment.iv
            ) == clear
        )
    }

    /// Encrypts `segments` (one IV each), plays them through ffmpeg from a SAMPLE-AES playlist and compares with
    /// ffmpeg's demux of the clear segments. Returns the packet indexes (over the playlist) that differ, those the
    /// defects predict, and those defect 2 predicts.
    static func playThroughFFmpeg(
        _ segments: [[UInt8]],
        key: [UInt8],
        name: String,
        directory: URL
    ) async throws -> (differing: Set<Int>, predicted: Set<Int>, misplaced: Set<Int>) {
        try Data(key).write(to: directory.appendingPathComponent("key.bin"))
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:3\n"
        var expected: [TransportStreamFFmpeg.Packet] = []
        var predicted: Set<Int> = []
        var misplaced: Set<Int> = []
        let ivs = segments.indices.map { index in (0..<16).map { UInt8(truncatingIfNeeded: 0x30 + index * 16 + $0) } }
        for (index, clear) in segments.enumerated() {
            let clearURL = directory.appendingPathComponent("\(name)-clear-\(index).ts")
            try Data(clear).write(to: clearURL)
            let encrypted = try TransportStreamFixtures.encrypt(clear, key: key, iv: ivs[index])
            try Data(encrypted).write(to: directory.appendingPathComponent("\(name)-\(index).ts"))
            playlist += "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"key.bin\",IV=0x\(TransportStreamFixtures.hex(ivs[index]))\n"
            playlist += "#EXTINF:2.0,\n\(name)-\(index).ts\n"

            let twin = try await TransportStreamFFmpeg.packets(clearURL)
            let frames = TransportStreamTestMuxing.pesPackets(encrypted).values.first!.map(TransportStreamTestMuxing.pesPayload)
            let streamType = TransportStreamTestMuxing.programMap(encrypted, pmtPID: TransportStreamTestMuxing.pmtPID(encrypted))[0].streamType
            if streamType == 0xDB {
                #expect(frames.count == twin.count, "one PES packet per access unit")
                for (position, payload) in frames.enumerated() where FFmpegDefectModel.misplacesNALUnits(payload) {
                    misplaced.insert(expected.count + position)
                }
            }
            // Defect 1: the segment's last packet, decrypted with the next IV or not at all.
            let wrongIV = index == segments.count - 1 || ivs[index + 1] != ivs[index]
            if streamType != 0xCF && wrongIV && FFmpegDefectModel.hasEncryptedBlock(frames.last!, streamType: streamType) {
                predicted.insert(expected.count + twin.count - 1)
            }
            expected += twin
        }
        playlist += "#EXT-X-ENDLIST\n"
        let playlistURL = directory.appendingPathComponent("\(name).m3u8")
        try playlist.write(to: playlistURL, atomically: true, encoding: .utf8)
        let actual = try await TransportStreamFFmpeg.packets(playlistURL, extraArguments: ["-allowed_extensions", "ALL"])
        #expect(actual.count == expected.count, "\(name): ffmpeg demuxes \(actual.count) packets, the clear segments \(expected.count)")
        let differing = Set(zip(actual, expected).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset))
        return (differing, predicted.union(misplaced), misplaced)
    }
}

extension SampleAESTransportStreamEncryptorTests {
    /// What ffmpeg's SAMPLE-AES H.264 decryption does with a packet, to predict where it goes wrong.
    enum FFmpegDefectModel {
        /// Defect 2: whether ffmpeg leaves a NAL unit in the wrong place after an earlier one shrank.
        static func misplacesNALUnits(_ payload: [UInt8]) -> Bool {
            var shrunk = 0
            var moving = false
            for nal in TransportStreamTestMuxing.nalUnits(payload) {
                if let type = nal.first.map({ $0 & 0x1F }), type == 1 || type == 5, nal.count > 48 {
                    let removed = emulationPreventionBytesRemoved(nal)
                    moving = removed > 0
                    if !moving && shrunk > 0 { return true }
                    shrunk += removed
                } else if !moving && shrunk > 0 {
                    return true
                }
            }
            return false
        }

        /// ffmpeg's remove_scep_3_bytes: `00 00 03` with more than 3 bytes left from its first zero.
        static func emulationPreventionBytesRemoved(_ nal: [UInt8]) -> Int {
            var count = 0
            var index = 0
            while index < nal.count {
                if nal.count - index > 3 && nal[index] == 0 && nal[index + 1] == 0 && nal[index + 2] == 3 {
                    count += 1
                    index += 3
                } else {
                    index += 1
                }
            }
            return count
        }

        /// Whether a packet of the given (encrypted) stream type carries at least one encrypted block.
        static func hasEncryptedBlock(_ payload: [UInt8], streamType: UInt8) -> Bool {
            switch streamType {
            case 0xDB:
                return TransportStreamTestMuxing.nalUnits(payload).contains { nal in
                    let type = nal[0] & 0x1F
                    return (type == 1 || type == 5) && nal.count - emulationPreventionBytesRemoved(nal) > 48
                }
            default:
                // AC-3 and E-AC-3 frames are far longer than the 16-byte leader plus one block.
                return payload.count >= 32
            }
        }
    }
}
