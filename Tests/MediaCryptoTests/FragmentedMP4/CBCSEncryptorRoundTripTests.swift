import Foundation
import MediaCrypto
import StowageCrypto
import Testing

/// Our encryptor on Shaka Packager's clear twin, checked three ways: our decryptor gives the clear samples back,
/// ffmpeg decrypts our output to the clear twin's packets, and with Shaka's key and IV our ciphertext equals Shaka's.
struct CBCSEncryptorRoundTripTests {
    static let segments = CBCSShakaFixtureTests.segments

    /// The clear twin's init and segment, encrypted by us with the fixture's key, key ID and IV.
    static func encrypted(_ segment: String, chunkSize: Int = 4096) throws -> (initSection: CBCSInitSection, segment: [UInt8]) {
        let keys = try FMP4TestSupport.shakaKeys()
        let initName = CBCSShakaFixtureTests.initName(segment)
        let clearInit = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/\(initName)")
        let initSection = try CBCSInitSection.encrypting(clearInit: clearInit, keyID: keys.keyID, constantIV: keys.iv, segment: initName)
        let encryptor = try CBCSFragmentEncryptor(initSection: initSection, key: SecretBytes(keys.key), segment: segment)
        let clear = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/\(segment)")
        return (initSection, try FMP4TestSupport.run(encryptor, clear, chunkSize: chunkSize))
    }

    @Test(arguments: segments)
    func ourDecryptorRestoresTheClearSamples(segment: String) throws {
        let keys = try FMP4TestSupport.shakaKeys()
        let (initSection, encrypted) = try Self.encrypted(segment)
        let decryptor = try CBCSFragmentDecryptor(initSection: initSection, key: SecretBytes(keys.key), segment: segment)
        let decrypted = try initSection.clearInitSection() + FMP4TestSupport.run(decryptor, encrypted, chunkSize: 1000)
        let twin = FMP4SampleReader.samples(try CBCSShakaFixtureTests.clearTwin(segment))
        #expect(FMP4SampleReader.samples(decrypted) == twin)
        #expect(FMP4SampleReader.samples(initSection.bytes + encrypted) != twin)
    }

    @Test(arguments: segments)
    func ffmpegDecryptsOurOutputToTheClearTwin(segment: String) async throws {
        let keys = try FMP4TestSupport.shakaKeys()
        let (initSection, encrypted) = try Self.encrypted(segment)
        let ours = try await FMP4FFmpeg.frameHashes(of: initSection.bytes + encrypted, decryptionKey: keys.key)
        let twin = try await FMP4FFmpeg.frameHashes(of: try CBCSShakaFixtureTests.clearTwin(segment))
        #expect(twin.count > 20)
        #expect(ours == twin)
        // Without the key ffmpeg sees ciphertext: the comparison above is not vacuous.
        #expect(try await FMP4FFmpeg.frameHashes(of: initSection.bytes + encrypted) != twin)
    }

    /// Same key, IV and subsample rule as Shaka Packager: the encrypted samples must be byte for byte Shaka's.
    @Test(arguments: segments)
    func ciphertextEqualsShakaPackagers(segment: String) throws {
        let (initSection, encrypted) = try Self.encrypted(segment)
        let ours = FMP4SampleReader.samples(initSection.bytes + encrypted)
        let shaka = FMP4SampleReader.samples(
            try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.encryptedDirectory)/\(CBCSShakaFixtureTests.initName(segment))")
                + FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.encryptedDirectory)/\(segment)")
        )
        #expect(!shaka.isEmpty)
        for (track, expected) in shaka {
            let actual = ours[track] ?? []
            #expect(actual.count == expected.count)
            let mismatches = zip(actual, expected).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
            #expect(mismatches.isEmpty, "track \(track): samples \(mismatches.prefix(10)) differ from Shaka Packager's")
        }
    }
}
