import StowageCrypto
import Testing

/// McGrew and Viega, "The Galois/Counter Mode of Operation (GCM)", revised 2005, Appendix B test
/// cases 13-16: the AES-256 cases with a 96-bit IV (17 and 18 use other IV lengths, which this API
/// does not accept).
struct GCMVector: Sendable, CustomTestStringConvertible {
    let name: String
    let key: [UInt8]
    let nonce: [UInt8]
    let plaintext: [UInt8]
    let aad: [UInt8]
    let ciphertext: [UInt8]
    let tag: [UInt8]
    var testDescription: String { name }

    private static let zeroKey = [UInt8](repeating: 0, count: 32)
    private static let key = hex("feffe9928665731c6d6a8f9467308308 feffe9928665731c6d6a8f9467308308")
    private static let nonce = hex("cafebabefacedbaddecaf888")
    private static let plaintext = hex(
        """
        d9313225f88406e5a55909c5aff5269a 86a7a9531534f7da2e4c303d8a318a72
        1c3c0c95956809532fcf0e2449a6b525 b16aedf5aa0de657ba637b391aafd255
        """
    )
    private static let ciphertext = hex(
        """
        522dc1f099567d07f47f37a32a84427d 643a8cdcbfe5c0c97598a2bd2555d1aa
        8cb08e48590dbb3da7b08b1056828838 c5f61e6393ba7a0abcc9f662898015ad
        """
    )

    static let all = [
        GCMVector(
            name: "Test Case 13",
            key: zeroKey,
            nonce: [UInt8](repeating: 0, count: 12),
            plaintext: [],
            aad: [],
            ciphertext: [],
            tag: hex("530f8afbc74536b9a963b4f1c4cb738b")
        ),
        GCMVector(
            name: "Test Case 14",
            key: zeroKey,
            nonce: [UInt8](repeating: 0, count: 12),
            plaintext: [UInt8](repeating: 0, count: 16),
            aad: [],
            ciphertext: hex("cea7403d4d606b6e074ec5d3baf39d18"),
            tag: hex("d0d1c8a799996bf0265b98b5d48ab919")
        ),
        GCMVector(
            name: "Test Case 15",
            key: key,
            nonce: nonce,
            plaintext: plaintext,
            aad: [],
            ciphertext: ciphertext,
            tag: hex("b094dac5d93471bdec1a502270e3cc6c")
        ),
        GCMVector(
            name: "Test Case 16",
            key: key,
            nonce: nonce,
            plaintext: Array(plaintext.prefix(60)),
            aad: hex("feedfacedeadbeeffeedfacedeadbeef abaddad2"),
            ciphertext: Array(ciphertext.prefix(60)),
            tag: hex("76fc6ece0f4e1768cddf8853bb2d551b")
        ),
    ]

    static let testCase16 = all[3]
}

@Suite("AES-256-GCM")
struct AESGCMTests {
    @Test("GCM spec seal", arguments: GCMVector.all)
    func sealsKnownAnswer(_ vector: GCMVector) throws {
        let sealed = try AESGCM.seal(vector.plaintext, key: SecretBytes(vector.key), nonce: vector.nonce, authenticating: vector.aad)
        #expect(sealed.ciphertext == vector.ciphertext)
        #expect(sealed.tag == vector.tag)
    }

    @Test("GCM spec seal of secret plaintext", arguments: GCMVector.all)
    func sealsSecretKnownAnswer(_ vector: GCMVector) throws {
        let sealed = try AESGCM.seal(
            SecretBytes(vector.plaintext),
            key: SecretBytes(vector.key),
            nonce: vector.nonce,
            authenticating: vector.aad
        )
        #expect(sealed.ciphertext == vector.ciphertext)
        #expect(sealed.tag == vector.tag)
    }

    @Test("GCM spec open", arguments: GCMVector.all)
    func opensKnownAnswer(_ vector: GCMVector) throws {
        let opened = try AESGCM.open(
            vector.ciphertext,
            tag: vector.tag,
            key: SecretBytes(vector.key),
            nonce: vector.nonce,
            authenticating: vector.aad
        )
        #expect(opened == SecretBytes(vector.plaintext))
    }

    @Test("Any flipped bit in tag, ciphertext, AAD or nonce is authenticationFailed", arguments: [0, 7, 63, 100, 127])
    func rejectsTampering(bit: Int) throws {
        let vector = GCMVector.testCase16
        let key = SecretBytes(vector.key)
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(vector.ciphertext, tag: flippingBit(bit, of: vector.tag), key: key, nonce: vector.nonce, authenticating: vector.aad)
        }
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(flippingBit(bit, of: vector.ciphertext), tag: vector.tag, key: key, nonce: vector.nonce, authenticating: vector.aad)
        }
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(vector.ciphertext, tag: vector.tag, key: key, nonce: vector.nonce, authenticating: flippingBit(bit % 160, of: vector.aad))
        }
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(vector.ciphertext, tag: vector.tag, key: key, nonce: flippingBit(bit % 96, of: vector.nonce), authenticating: vector.aad)
        }
    }

    @Test("Missing AAD, a short tag or a different key is authenticationFailed")
    func rejectsMismatches() throws {
        let vector = GCMVector.testCase16
        let key = SecretBytes(vector.key)
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(vector.ciphertext, tag: vector.tag, key: key, nonce: vector.nonce)
        }
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(vector.ciphertext, tag: Array(vector.tag.prefix(12)), key: key, nonce: vector.nonce, authenticating: vector.aad)
        }
        let otherKey = SecretBytes(flippingBit(0, of: vector.key))
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(vector.ciphertext, tag: vector.tag, key: otherKey, nonce: vector.nonce, authenticating: vector.aad)
        }
    }

    @Test("Only 32-byte keys and 12-byte nonces are accepted")
    func rejectsLengths() {
        let vector = GCMVector.testCase16
        #expect(throws: CryptoError.invalidKeyLength) {
            try AESGCM.seal(vector.plaintext, key: SecretBytes(Array(vector.key.prefix(16))), nonce: vector.nonce)
        }
        #expect(throws: CryptoError.invalidNonceLength) {
            try AESGCM.seal(vector.plaintext, key: SecretBytes(vector.key), nonce: Array(vector.nonce.prefix(8)))
        }
        #expect(throws: CryptoError.invalidNonceLength) {
            try AESGCM.open(vector.ciphertext, tag: vector.tag, key: SecretBytes(vector.key), nonce: vector.nonce + [0])
        }
    }
}
