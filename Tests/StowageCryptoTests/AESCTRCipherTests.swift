import StowageCrypto
import Testing

@Suite("AES-256-CTR")
struct AESCTRCipherTests {
    // NIST SP 800-38A F.5.5 (CTR-AES256.Encrypt) and F.5.6 (Decrypt).
    static let key = "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"
    static let counter = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"
    static let plaintext =
        "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710"
    static let ciphertext =
        "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c52b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6"

    @Test(arguments: [1, 7, 16, 17, 64])
    func nistVectorsInAnyChunking(chunk: Int) throws {
        let key = SecretBytes(try #require(Hex.decode(Self.key)))
        let input = try #require(Hex.decode(Self.plaintext))
        let cipher = try AESCTRCipher(key: key, iv: try #require(Hex.decode(Self.counter)))
        var output: [UInt8] = []
        var offset = 0
        while offset < input.count {
            output += try cipher.update(Array(input[offset..<min(input.count, offset + chunk)]))
            offset += chunk
        }
        #expect(Hex.encode(output) == Self.ciphertext)
        // CTR decryption is the same operation.
        let back = try AESCTRCipher(key: key, iv: try #require(Hex.decode(Self.counter))).update(output)
        #expect(back == input)
    }

    /// NIST SP 800-38A F.5.1 (CTR-AES128.Encrypt), first two blocks, with the keystream restarted by reset(iv:).
    @Test func aes128KnownAnswerAndReset() throws {
        let cipher = try AESCTRCipher(
            key: SecretBytes(try #require(Hex.decode("2b7e151628aed2a6abf7158809cf4f3c"))),
            iv: try #require(Hex.decode("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"))
        )
        let plaintext = try #require(Hex.decode("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"))
        let expected = "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff"
        // A partial block, then the rest: the keystream carries across calls.
        #expect(Hex.encode(try cipher.update(Array(plaintext.prefix(5))) + cipher.update(Array(plaintext.dropFirst(5)))) == expected)
        try Hex.decode("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")!.withUnsafeBytes { try cipher.reset(iv: $0) }
        #expect(Hex.encode(try cipher.update(plaintext)) == expected)
        #expect(throws: CryptoError.invalidIVLength) { try [UInt8](repeating: 0, count: 8).withUnsafeBytes { try cipher.reset(iv: $0) } }
    }

    @Test func wrongLengthsAreTyped() throws {
        #expect(throws: CryptoError.invalidKeyLength) {
            _ = try AESCTRCipher(key: SecretBytes([UInt8](repeating: 1, count: 24)), iv: [UInt8](repeating: 0, count: 16))
        }
        #expect(throws: CryptoError.invalidIVLength) { _ = try AESCTRCipher(key: SecretBytes([UInt8](repeating: 1, count: 32)), iv: [1]) }
    }
}
