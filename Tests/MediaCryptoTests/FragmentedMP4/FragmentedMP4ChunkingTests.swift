import Foundation
import MediaCrypto
import StowageCrypto
import Testing

/// The same bytes in 1-byte, 7-byte, 4096-byte and whole chunks give the same output, for every transform.
struct FragmentedMP4ChunkingTests {
    static let chunkSizes = [1, 7, 4096, Int.max]

    static func mp4ffFragments() throws -> (initSection: CBCSInitSection, fragments: [UInt8]) {
        let (initBytes, fragments) = FMP4TestSupport.splitAtFirstFragment(try FMP4TestSupport.fixture("Fixtures/golden/mp4ff/cbcs.mp4"))
        return (try CBCSInitSection.parse(initBytes, segment: "cbcs.mp4"), fragments)
    }

    @Test(arguments: ["Fixtures/golden/mp4ff/cbcs.mp4", "Fixtures/golden/mp4ff/cbcs_audio.mp4"])
    func decryptionDoesNotDependOnChunking(path: String) throws {
        let (initBytes, fragments) = FMP4TestSupport.splitAtFirstFragment(try FMP4TestSupport.fixture(path))
        let initSection = try CBCSInitSection.parse(initBytes, segment: path)
        let key = path.hasSuffix("audio.mp4") ? "5ffd93861fa776e96cccd934898fc1c8" : "22bdb0063805260307ee5045c0f3835a"
        let outputs = try Self.chunkSizes.map { size in
            try FMP4TestSupport.run(
                CBCSFragmentDecryptor(initSection: initSection, key: SecretBytes(Hex.decode(key)!), segment: path),
                fragments,
                chunkSize: size
            )
        }
        #expect(outputs.allSatisfy { $0 == outputs[0] })
        // Decryption keeps every byte count: the output has the input's length and layout.
        #expect(outputs[0].count == fragments.count)
        #expect(outputs[0] != fragments)
    }

    @Test(arguments: ["video_1.m4s", "audio_2.m4s"])
    func encryptionDoesNotDependOnChunking(segment: String) throws {
        let outputs = try Self.chunkSizes.map { try CBCSEncryptorRoundTripTests.encrypted(segment, chunkSize: $0).segment }
        #expect(outputs.allSatisfy { $0 == outputs[0] })
    }

    @Test func shakaDecryptionDoesNotDependOnChunking() throws {
        let outputs = try Self.chunkSizes.map { try CBCSShakaFixtureTests.decrypted("video_2.m4s", chunkSize: $0) }
        #expect(outputs.allSatisfy { $0 == outputs[0] })
    }

    @Test func validationDoesNotDependOnChunking() throws {
        let (initSection, fragments) = try Self.mp4ffFragments()
        let whole = try FragmentedMP4Validator.validate(fragments, initSection: initSection, segment: "cbcs.mp4")
        for size in [1, 7, 4096] {
            let stream = FragmentedMP4Validator.Stream(initSection: initSection, segment: "cbcs.mp4")
            var offset = 0
            while offset < fragments.count {
                try stream.process(Array(fragments[offset..<min(fragments.count, offset + size)]))
                offset += size
            }
            #expect(try stream.finish() == whole)
        }
    }
}
