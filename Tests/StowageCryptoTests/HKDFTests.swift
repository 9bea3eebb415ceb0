import StowageCrypto
import Testing

/// RFC 5869 Appendix A, test cases 1-3 (the SHA-256 ones).
struct HKDFVector: Sendable, CustomTestStringConvertible {
    let name: String
    let inputKeyMaterial: [UInt8]
    let salt: [UInt8]
    let info: [UInt8]
    let outputKeyMaterial: [UInt8]
    var testDescription: String { name }

    static let all = [
        HKDFVector(
            name: "A.1 Test Case 1",
            inputKeyMaterial: [UInt8](repeating: 0x0b, count: 22),
            salt: hex("000102030405060708090a0b0c"),
            info: hex("f0f1f2f3f4f5f6f7f8f9"),
            outputKeyMaterial: hex(
                """
                3cb25f25faacd57a90434f64d0362f2a
                2d2d0a90cf1a5a4c5db02d56ecc4c5bf
                34007208d5b887185865
                """
            )
        ),
        HKDFVector(
            name: "A.2 Test Case 2",
            inputKeyMaterial: byteRange(0x00, through: 0x4f),
            salt: byteRange(0x60, through: 0xaf),
            info: byteRange(0xb0, through: 0xff),
            outputKeyMaterial: hex(
                """
                b11e398dc80327a1c8e7f78c596a4934
                4f012eda2d4efad8a050cc4c19afa97c
                59045a99cac7827271cb41c65e590e09
                da3275600c2f09b8367793a9aca3db71
                cc30c58179ec3e87c14c01d5c1f3434f
                1d87
                """
            )
        ),
        HKDFVector(
            name: "A.3 Test Case 3",
            inputKeyMaterial: [UInt8](repeating: 0x0b, count: 22),
            salt: [],
            info: [],
            outputKeyMaterial: hex(
                """
                8da4e775a563c18f715f802a063c5a31
                b8a11f5c5ee1879ec3454e5f3c738d2d
                9d201395faa4b61a96c8
                """
            )
        ),
    ]
}

@Suite("HKDF-SHA256")
struct HKDFTests {
    @Test("RFC 5869 Appendix A", arguments: HKDFVector.all)
    func derivesKnownAnswer(_ vector: HKDFVector) throws {
        let derived = try HKDF.deriveKey(
            inputKeyMaterial: SecretBytes(vector.inputKeyMaterial),
            salt: vector.salt,
            info: vector.info,
            outputByteCount: vector.outputKeyMaterial.count
        )
        #expect(derived == SecretBytes(vector.outputKeyMaterial))
    }

    @Test("A shorter output is a prefix of a longer one (RFC 5869 section 2.3, T(1) | T(2) ...)")
    func shorterOutputIsPrefix() throws {
        let vector = HKDFVector.all[0]
        let derived = try HKDF.deriveKey(
            inputKeyMaterial: SecretBytes(vector.inputKeyMaterial),
            salt: vector.salt,
            info: vector.info,
            outputByteCount: 16
        )
        #expect(derived == SecretBytes(vector.outputKeyMaterial.prefix(16)))
    }

    @Test("Output length must be 1...255 * 32 and the input key material non-empty", arguments: [0, -1, 8161])
    func rejectsOutputLength(count: Int) throws {
        #expect(throws: CryptoError.invalidKeyLength) {
            try HKDF.deriveKey(inputKeyMaterial: SecretBytes([1, 2, 3]), salt: [], info: [], outputByteCount: count)
        }
        #expect(try HKDF.deriveKey(inputKeyMaterial: SecretBytes([1, 2, 3]), salt: [], info: [], outputByteCount: 8160).count == 8160)
        #expect(throws: CryptoError.invalidKeyLength) {
            try HKDF.deriveKey(inputKeyMaterial: SecretBytes([]), salt: [], info: [], outputByteCount: 32)
        }
    }
}
