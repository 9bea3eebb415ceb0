import Foundation
import MediaCrypto
import StowageCrypto
import Testing

/// The cenc, cbc1 and cens sample ciphers and the packed audio decryptor give the same bytes whatever the chunking:
/// windows that end inside a subsample's protected range, inside a CBC block, inside an audio frame or an ID3 tag.
/// (The whole-segment output is checked against the clear twins in SampleAESCTRTests and PlaylistDecryptionTests.)
struct CommonEncryptionChunkingTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var directory: String
        var stream: String
        var key: String
        var method: SegmentEncryptionMethod
        var testDescription: String { "\(directory)/\(stream)" }
    }

    static let cases = [
        Case(directory: "fmp4-cenc", stream: "video", key: "a1b2c3d4e5f60718293a4b5c6d7e8f90", method: .sampleAESCTR),
        Case(directory: "fmp4-cenc", stream: "audio", key: "a1b2c3d4e5f60718293a4b5c6d7e8f90", method: .sampleAESCTR),
        Case(directory: "fmp4-cbc1", stream: "video", key: "0f1e2d3c4b5a69788796a5b4c3d2e1f0", method: .sampleAES),
        Case(directory: "fmp4-cens", stream: "video", key: "1032547698badcfe0123456789abcdef", method: .sampleAESCTR),
    ]

    @Test("fMP4 fragments: chunks of 1, 333, 777 and 4096 bytes give the whole segment's output", arguments: cases)
    func fragments(_ testCase: Case) throws {
        let key = SecretBytes(try #require(Hex.decode(testCase.key)))
        let initSection = try CBCSInitSection.parse(
            try FMP4TestSupport.fixture("Fixtures/media/shaka/\(testCase.directory)/\(testCase.stream)_init.mp4"),
            segment: "init.mp4"
        )
        for index in 1...3 {
            let segment = try FMP4TestSupport.fixture("Fixtures/media/shaka/\(testCase.directory)/\(testCase.stream)_\(index).m4s")
            func decrypt(_ chunkSize: Int?) throws -> [UInt8] {
                let decryptor = try SegmentCryptography.decryptor(
                    method: testCase.method,
                    container: .fragmentedMP4,
                    key: key,
                    iv: [UInt8](repeating: 0, count: 16),
                    initSection: initSection,
                    segment: "seg.m4s"
                )
                return try TransportStreamFixtures.run(decryptor, segment, chunkSize: chunkSize)
            }
            let whole = try decrypt(nil)
            #expect(whole.count == segment.count)
            #expect(whole != segment)
            for size in [1, 333, 777, 4096] {
                #expect(try decrypt(size) == whole, "\(testCase) segment \(index) in chunks of \(size)")
            }
        }
    }

    @Test("packed audio: chunks of 1, 7 and 333 bytes give the whole segment's output")
    func packedAudio() throws {
        let key = SecretBytes(try #require(Hex.decode("c0ffee00deadbeef0123456789abcdef")))
        let iv = try #require(Hex.decode("4f3e2d1c0b0a99887766554433221100"))
        for index in 1...3 {
            let segment = try FMP4TestSupport.fixture("Fixtures/media/shaka/packed-aac-sample-aes/audio_\(index).aac")
            #expect(SegmentContainer.detect(Array(segment.prefix(SegmentContainer.detectionLength))) == .packedAudio)
            func decrypt(_ chunkSize: Int?) throws -> [UInt8] {
                let decryptor = try SegmentCryptography.decryptor(method: .sampleAES, container: .packedAudio, key: key, iv: iv, segment: "a.aac")
                return try TransportStreamFixtures.run(decryptor, segment, chunkSize: chunkSize)
            }
            let whole = try decrypt(nil)
            for size in [1, 7, 333] {
                #expect(try decrypt(size) == whole, "segment \(index) in chunks of \(size)")
            }
        }
        // Cut short inside a frame: refused as truncated, not passed on.
        let segment = try FMP4TestSupport.fixture("Fixtures/media/shaka/packed-aac-sample-aes/audio_1.aac")
        let decryptor = try SegmentCryptography.decryptor(method: .sampleAES, container: .packedAudio, key: key, iv: iv, segment: "a.aac")
        #expect(throws: SegmentCryptoError.self) { try TransportStreamFixtures.run(decryptor, Array(segment.dropLast(5))) }
    }
}
