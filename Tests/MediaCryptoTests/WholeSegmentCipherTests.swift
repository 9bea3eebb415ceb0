import Foundation
import MediaCrypto
import StowageCrypto
import StowageTestSupport
import Testing

/// Whole-segment AES-CBC against `openssl enc`, a tool nobody here wrote.
struct WholeSegmentCipherTests {
    private static func openssl(_ arguments: [String], input: [UInt8]) async throws -> [UInt8] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-wsc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let inputURL = directory.appendingPathComponent("in")
        let outputURL = directory.appendingPathComponent("out")
        try Data(input).write(to: inputURL)
        let result = try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/openssl"),
            arguments + ["-in", inputURL.path, "-out", outputURL.path]
        )
        #expect(result.status == 0)
        return Array(try Data(contentsOf: outputURL))
    }

    private static func run(_ cipher: WholeSegmentCipher, _ input: [UInt8], chunk: Int) throws -> [UInt8] {
        var output: [UInt8] = []
        var offset = 0
        while offset < input.count {
            try cipher.process(Array(input[offset..<min(input.count, offset + chunk)])) { output += $0 }
            offset += chunk
        }
        try cipher.finish { output += $0 }
        return output
    }

    @Test(arguments: [WholeSegmentCipher.Method.aes128, .aes256], [1, 13, 4096, 300_000])
    func decryptsWhatOpenSSLEncrypted(method: WholeSegmentCipher.Method, chunk: Int) async throws {
        let key = try SecureRandom.bytes(count: method.keyLength)
        let iv = try SecureRandom.bytes(count: 16)
        let clear = try SecureRandom.bytes(count: 600_001)
        let name = method == .aes128 ? "-aes-128-cbc" : "-aes-256-cbc"
        let encrypted = try await Self.openssl(["enc", name, "-K", Hex.encode(key), "-iv", Hex.encode(iv)], input: clear)
        let cipher = try WholeSegmentCipher(method: method, key: SecretBytes(key), iv: iv, direction: .decrypt, segment: "s.ts")
        #expect(try Self.run(cipher, encrypted, chunk: chunk) == clear)
    }

    @Test func encryptsWhatOpenSSLDecrypts() async throws {
        let key = try SecureRandom.bytes(count: 16)
        let iv = try SecureRandom.bytes(count: 16)
        let clear = try SecureRandom.bytes(count: 70_000)
        let cipher = try WholeSegmentCipher(method: .aes128, key: SecretBytes(key), iv: iv, direction: .encrypt, segment: "s.ts")
        let encrypted = try Self.run(cipher, clear, chunk: 777)
        #expect(encrypted.count == 70_000 + 16 - 70_000 % 16)
        let decrypted = try await Self.openssl(["enc", "-d", "-aes-128-cbc", "-K", Hex.encode(key), "-iv", Hex.encode(iv)], input: encrypted)
        #expect(decrypted == clear)
    }

    @Test func wrongKeyIsBadPaddingNamingTheSegment() throws {
        // Fixed bytes, so the outcome is deterministic: with this wrong key the last block decrypts to invalid padding.
        let key = Array(repeating: UInt8(0x11), count: 16)
        let iv = Array(repeating: UInt8(0), count: 16)
        let encrypted = try AESCBCCipher.encrypt(Array(repeating: 0x47, count: 1000), key: SecretBytes(key), iv: iv)
        var wrong = key
        wrong[0] ^= 1
        let cipher = try WholeSegmentCipher(method: .aes128, key: SecretBytes(wrong), iv: iv, direction: .decrypt, segment: "seg7.ts")
        #expect(throws: SegmentCryptoError.badPadding(segment: "seg7.ts")) { _ = try Self.run(cipher, encrypted, chunk: 100) }
    }

    @Test func truncatedSegmentIsTyped() throws {
        let key = SecretBytes(Array(repeating: UInt8(7), count: 16))
        let cipher = try WholeSegmentCipher(method: .aes128, key: key, iv: Array(repeating: 0, count: 16), direction: .decrypt, segment: "seg3.ts")
        #expect(throws: SegmentCryptoError.truncatedSegment(segment: "seg3.ts")) {
            _ = try Self.run(cipher, Array(repeating: 1, count: 100), chunk: 64)
        }
    }

    @Test func keyLengthMustMatchMethod() {
        #expect(throws: SegmentCryptoError.invalidKey(segment: "x")) {
            _ = try WholeSegmentCipher(
                method: .aes256,
                key: SecretBytes(Array(repeating: UInt8(1), count: 16)),
                iv: Array(repeating: 0, count: 16),
                direction: .decrypt,
                segment: "x"
            )
        }
        #expect(throws: SegmentCryptoError.invalidIV(segment: "x")) {
            _ = try WholeSegmentCipher(
                method: .aes128,
                key: SecretBytes(Array(repeating: UInt8(1), count: 16)),
                iv: [1, 2, 3],
                direction: .decrypt,
                segment: "x"
            )
        }
    }
}
