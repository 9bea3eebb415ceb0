import Foundation
import MediaCrypto
import StowageCrypto
import Testing

/// mp4ff's public cbcs vectors (Fixtures/golden/mp4ff): our decryption's samples must equal those of mp4ff's
/// decrypted twin, byte for byte.
struct CBCSGoldenDecryptionTests {
    struct Vector: CustomTestStringConvertible, Sendable {
        let encrypted: String
        let decrypted: String
        let key: String
        var testDescription: String { encrypted }
    }

    static let vectors = [
        Vector(encrypted: "cbcs.mp4", decrypted: "cbcsdec.mp4", key: "22bdb0063805260307ee5045c0f3835a"),
        Vector(encrypted: "cbcs_audio.mp4", decrypted: "cbcs_audiodec.mp4", key: "5ffd93861fa776e96cccd934898fc1c8"),
    ]

    /// Decrypts an mp4ff file (init and fragments in one file) and returns clear init + decrypted fragments.
    static func decrypt(_ vector: Vector, chunkSize: Int = 4096) throws -> [UInt8] {
        let file = try FMP4TestSupport.fixture("Fixtures/golden/mp4ff/\(vector.encrypted)")
        let (initBytes, fragments) = FMP4TestSupport.splitAtFirstFragment(file)
        let initSection = try CBCSInitSection.parse(initBytes, segment: vector.encrypted)
        let decryptor = try CBCSFragmentDecryptor(initSection: initSection, key: SecretBytes(Hex.decode(vector.key)!), segment: vector.encrypted)
        return try initSection.clearInitSection() + FMP4TestSupport.run(decryptor, fragments, chunkSize: chunkSize)
    }

    @Test(arguments: vectors)
    func decryptsToMp4ffSamples(vector: Vector) throws {
        let ours = FMP4SampleReader.samples(try Self.decrypt(vector))
        let theirs = FMP4SampleReader.samples(try FMP4TestSupport.fixture("Fixtures/golden/mp4ff/\(vector.decrypted)"))
        let encrypted = FMP4SampleReader.samples(
            FMP4TestSupport.splitAtFirstFragment(try FMP4TestSupport.fixture("Fixtures/golden/mp4ff/\(vector.encrypted)")).fragments
        )
        #expect(ours.keys.sorted() == theirs.keys.sorted())
        // Not vacuous: the vector has samples, and decryption changed some of them.
        #expect(theirs.values.reduce(0) { $0 + $1.count } > 50)
        #expect(encrypted.count > 0 && encrypted != theirs)
        for (track, expected) in theirs {
            let actual = ours[track] ?? []
            #expect(actual.count == expected.count, "track \(track)")
            let mismatches = zip(actual, expected).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
            #expect(mismatches.isEmpty, "track \(track): samples \(mismatches.prefix(10)) differ")
        }
    }
}
