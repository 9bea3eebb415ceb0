import Foundation
import StowageCrypto
import StowageTestSupport
import Testing

/// NIST SP 800-38A (2001) Appendix F.2, "CBC Example Vectors". F.2.1/F.2.2 are CBC-AES128
/// encrypt/decrypt, F.2.5/F.2.6 CBC-AES256; both use the same IV and the same four plaintext blocks.
struct CBCVector: Sendable, CustomTestStringConvertible {
    let name: String
    let key: [UInt8]
    let iv: [UInt8]
    let plaintext: [UInt8]
    let ciphertext: [UInt8]
    var testDescription: String { name }

    static let iv = hex("000102030405060708090a0b0c0d0e0f")
    static let plaintext = hex(
        """
        6bc1bee22e409f96e93d7e117393172a
        ae2d8a571e03ac9c9eb76fac45af8e51
        30c81c46a35ce411e5fbc1191a0a52ef
        f69f2445df4f9b17ad2b417be66c3710
        """
    )

    /// SP 800-38A F.2.1 (CBC-AES128.Encrypt) and F.2.2 (CBC-AES128.Decrypt).
    static let aes128 = CBCVector(
        name: "SP 800-38A F.2.1/F.2.2 CBC-AES128",
        key: hex("2b7e151628aed2a6abf7158809cf4f3c"),
        iv: iv,
        plaintext: plaintext,
        ciphertext: hex(
            """
            7649abac8119b246cee98e9b12e9197d
            5086cb9b507219ee95db113a917678b2
            73bed6b8e3c1743b7116e69e22229516
            3ff1caa1681fac09120eca307586e1a7
            """
        )
    )

    /// SP 800-38A F.2.5 (CBC-AES256.Encrypt) and F.2.6 (CBC-AES256.Decrypt).
    static let aes256 = CBCVector(
        name: "SP 800-38A F.2.5/F.2.6 CBC-AES256",
        key: hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"),
        iv: iv,
        plaintext: plaintext,
        ciphertext: hex(
            """
            f58c4c04d6e5f1ba779eabfb5f7bfbd6
            9cfc4e967edb808d679f777bc6702c7d
            39f23369a9d9bacfa530e26304231461
            b2eb05e2c39be9fcda6c19078c6a9d1b
            """
        )
    )

    static let all = [aes128, aes256]
}

/// Runs `input` through `cipher` in `chunkSize` pieces with one reused output buffer, as a file
/// decryptor would.
private func stream(_ input: [UInt8], through cipher: AESCBCCipher, chunkSize: Int) throws -> [UInt8] {
    var output: [UInt8] = []
    var scratch = [UInt8](repeating: 0, count: chunkSize + 16)
    var offset = 0
    while offset < input.count {
        let end = min(offset + chunkSize, input.count)
        let written = try input[offset..<end].withUnsafeBytes { chunk in
            try scratch.withUnsafeMutableBytes { try cipher.update(chunk, into: $0) }
        }
        output += scratch[..<written]
        offset = end
    }
    let written = try scratch.withUnsafeMutableBytes { try cipher.finish(into: $0) }
    output += scratch[..<written]
    return output
}

@Suite("AES-CBC")
struct AESCBCCipherTests {
    @Test("SP 800-38A encrypt (F.2.1, F.2.5)", arguments: CBCVector.all)
    func encryptsKnownAnswer(_ vector: CBCVector) throws {
        let key = SecretBytes(vector.key)
        #expect(try AESCBCCipher.encrypt(vector.plaintext, key: key, iv: vector.iv, padding: false) == vector.ciphertext)
    }

    @Test("SP 800-38A decrypt (F.2.2, F.2.6)", arguments: CBCVector.all)
    func decryptsKnownAnswer(_ vector: CBCVector) throws {
        let key = SecretBytes(vector.key)
        #expect(try AESCBCCipher.decrypt(vector.ciphertext, key: key, iv: vector.iv, padding: false) == vector.plaintext)
    }

    @Test("Streaming in odd chunk sizes gives the one-shot result", arguments: CBCVector.all, [1, 7, 17])
    func streamsInChunks(_ vector: CBCVector, chunkSize: Int) throws {
        let key = SecretBytes(vector.key)
        let encryptor = try AESCBCCipher(key: key, iv: vector.iv, direction: .encrypt, padding: false)
        #expect(try stream(vector.plaintext, through: encryptor, chunkSize: chunkSize) == vector.ciphertext)
        let decryptor = try AESCBCCipher(key: key, iv: vector.iv, direction: .decrypt, padding: false)
        #expect(try stream(vector.ciphertext, through: decryptor, chunkSize: chunkSize) == vector.plaintext)
    }

    @Test("The array update and finish overloads stream like the buffer ones")
    func streamsWithArrayOverloads() throws {
        let vector = CBCVector.aes128
        let cipher = try AESCBCCipher(key: SecretBytes(vector.key), iv: vector.iv, direction: .decrypt, padding: false)
        var output = try cipher.update(Array(vector.ciphertext[..<20]))
        output += try cipher.update(Array(vector.ciphertext[20...]))
        output += try cipher.finish()
        #expect(output == vector.plaintext)
    }

    @Test("PKCS#7 round trip with the padding RFC 5652 section 6.3 prescribes", arguments: 0...33)
    func roundTripsWithPadding(length: Int) throws {
        let key = SecretBytes(CBCVector.aes128.key)
        let iv = CBCVector.iv
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let ciphertext = try AESCBCCipher.encrypt(plaintext, key: key, iv: iv)
        let padLength = 16 - length % 16
        #expect(ciphertext.count == length + padLength)
        let unpadded = try AESCBCCipher.decrypt(ciphertext, key: key, iv: iv, padding: false)
        #expect(unpadded == plaintext + [UInt8](repeating: UInt8(padLength), count: padLength))
        #expect(try AESCBCCipher.decrypt(ciphertext, key: key, iv: iv) == plaintext)
        let streamed = try stream(ciphertext, through: AESCBCCipher(key: key, iv: iv, direction: .decrypt, padding: true), chunkSize: 7)
        #expect(streamed == plaintext)
    }

    @Test("Matches `openssl enc` as an independent oracle", arguments: [0, 1, 15, 16, 17, 33, 4099])
    func matchesOpenSSLCommandLine(length: Int) async throws {
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 3) }
        for (cipherName, vector) in [("aes-128-cbc", CBCVector.aes128), ("aes-256-cbc", CBCVector.aes256)] {
            let expected = try await OpenSSLCommand.encrypt(plaintext, cipher: cipherName, key: vector.key, iv: vector.iv)
            let key = SecretBytes(vector.key)
            #expect(try AESCBCCipher.encrypt(plaintext, key: key, iv: vector.iv) == expected)
            #expect(try AESCBCCipher.decrypt(expected, key: key, iv: vector.iv) == plaintext)
        }
    }

    @Test(
        "A last block that is not PKCS#7 padding is badPadding",
        arguments: [
            [UInt8](repeating: 0, count: 16),  // pad byte 0 is never valid
            [UInt8](repeating: 0, count: 15) + [17],  // pad byte larger than the block
            [UInt8](repeating: 0xaa, count: 12) + [1, 4, 4, 4],  // declares 4 bytes, only 3 match
        ]
    )
    func rejectsBadPadding(lastBlock: [UInt8]) throws {
        let key = SecretBytes(CBCVector.aes128.key)
        let ciphertext = try AESCBCCipher.encrypt(CBCVector.plaintext + lastBlock, key: key, iv: CBCVector.iv, padding: false)
        #expect(throws: CryptoError.badPadding) {
            try AESCBCCipher.decrypt(ciphertext, key: key, iv: CBCVector.iv)
        }
    }

    @Test("Input that ends inside a block is truncatedInput")
    func rejectsTruncatedInput() throws {
        let vector = CBCVector.aes128
        let key = SecretBytes(vector.key)
        let padded = try AESCBCCipher.encrypt(vector.plaintext, key: key, iv: vector.iv)
        #expect(throws: CryptoError.truncatedInput) {
            try AESCBCCipher.decrypt(Array(padded.dropLast()), key: key, iv: vector.iv)
        }
        #expect(throws: CryptoError.truncatedInput) {
            try AESCBCCipher.decrypt(Array(vector.ciphertext.prefix(20)), key: key, iv: vector.iv, padding: false)
        }
        #expect(throws: CryptoError.truncatedInput) {
            try AESCBCCipher.encrypt([1, 2, 3, 4, 5], key: key, iv: vector.iv, padding: false)
        }
        #expect(throws: CryptoError.truncatedInput) {
            try AESCBCCipher.decrypt([], key: key, iv: vector.iv)
        }
    }

    @Test("Keys other than 16 or 32 bytes are invalidKeyLength (AES-192, F.2.3, is not offered)", arguments: [0, 15, 17, 24, 31, 33])
    func rejectsKeyLength(count: Int) {
        let key = SecretBytes([UInt8](repeating: 0x2b, count: count))
        #expect(throws: CryptoError.invalidKeyLength) {
            try AESCBCCipher(key: key, iv: CBCVector.iv, direction: .decrypt, padding: true)
        }
    }

    @Test("IVs other than 16 bytes are invalidIVLength", arguments: [0, 12, 15, 17, 32])
    func rejectsIVLength(count: Int) throws {
        let key = SecretBytes(CBCVector.aes128.key)
        let iv = [UInt8](repeating: 0, count: count)
        #expect(throws: CryptoError.invalidIVLength) {
            try AESCBCCipher(key: key, iv: iv, direction: .encrypt, padding: false)
        }
        let cipher = try AESCBCCipher(key: key, iv: CBCVector.iv, direction: .encrypt, padding: false)
        #expect(throws: CryptoError.invalidIVLength) { try cipher.reset(iv: iv) }
    }

    @Test("transformBlocksInPlace decrypts F.2.2 and encrypts F.2.1 as one chain")
    func transformsBlocksInPlace() throws {
        let vector = CBCVector.aes128
        let key = SecretBytes(vector.key)
        var buffer = vector.ciphertext
        let decryptor = try AESCBCCipher(key: key, iv: vector.iv, direction: .decrypt, padding: false)
        try buffer.withUnsafeMutableBytes { try decryptor.transformBlocksInPlace($0) }
        #expect(buffer == vector.plaintext)

        // Two calls continue one chain, as cbcs needs across a subsample's encrypted blocks.
        let encryptor = try AESCBCCipher(key: key, iv: vector.iv, direction: .encrypt, padding: false)
        try buffer.withUnsafeMutableBytes { blocks in
            try encryptor.transformBlocksInPlace(UnsafeMutableRawBufferPointer(rebasing: blocks[..<16]))
            try encryptor.transformBlocksInPlace(UnsafeMutableRawBufferPointer(rebasing: blocks[16...]))
        }
        #expect(buffer == vector.ciphertext)

        var partial = [UInt8](repeating: 0, count: 24)
        #expect(throws: CryptoError.truncatedInput) {
            try partial.withUnsafeMutableBytes { try decryptor.transformBlocksInPlace($0) }
        }
    }

    @Test("reset(iv:) restarts the chain with the new IV")
    func resetRestartsChain() throws {
        let vector = CBCVector.aes256
        let key = SecretBytes(vector.key)
        let cipher = try AESCBCCipher(key: key, iv: vector.iv, direction: .encrypt, padding: false)
        var first = vector.plaintext
        try first.withUnsafeMutableBytes { try cipher.transformBlocksInPlace($0) }
        #expect(first == vector.ciphertext)

        try cipher.reset(iv: vector.iv)
        #expect(try stream(vector.plaintext, through: cipher, chunkSize: 5) == vector.ciphertext)

        // CBC: encrypting blocks 2...4 with ciphertext block 1 as the IV gives ciphertext blocks 2...4.
        try Array(vector.ciphertext[..<16]).withUnsafeBytes { try cipher.reset(iv: $0) }
        #expect(try stream(Array(vector.plaintext[16...]), through: cipher, chunkSize: 16) == Array(vector.ciphertext[16...]))
    }

    @Test("reset(iv:) recovers a decryptor after badPadding and keeps the padding setting")
    func resetAfterFailure() throws {
        let vector = CBCVector.aes128
        let key = SecretBytes(vector.key)
        let cipher = try AESCBCCipher(key: key, iv: vector.iv, direction: .decrypt, padding: true)
        #expect(throws: CryptoError.badPadding) {
            try stream(vector.ciphertext, through: cipher, chunkSize: 64)
        }
        let padded = try AESCBCCipher.encrypt(vector.plaintext, key: key, iv: vector.iv)
        try cipher.reset(iv: vector.iv)
        #expect(try stream(padded, through: cipher, chunkSize: 64) == vector.plaintext)
    }
}

/// `/usr/bin/openssl enc`, run as a separate process so its output is an oracle independent of our
/// EVP calls.
enum OpenSSLCommand {
    struct Failure: Error, CustomStringConvertible {
        let status: Int32
        var description: String { "openssl enc exited with status \(status)" }
    }

    static func encrypt(_ plaintext: [UInt8], cipher: String, key: [UInt8], iv: [UInt8]) async throws -> [UInt8] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("StowageCryptoTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("plain.bin")
        let output = directory.appendingPathComponent("cipher.bin")
        try Data(plaintext).write(to: input)
        let result = try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/openssl"),
            ["enc", "-\(cipher)", "-K", Hex.encode(key), "-iv", Hex.encode(iv), "-in", input.path, "-out", output.path]
        )
        guard result.status == 0 else { throw Failure(status: result.status) }
        return [UInt8](try Data(contentsOf: output))
    }
}
