import StowageCrypto
import Testing

/// RFC 8032 section 7.1, Ed25519 test vectors TEST 1, 2, 3 and TEST SHA(abc).
struct Ed25519Vector: Sendable, CustomTestStringConvertible {
    let name: String
    let secretKey: [UInt8]
    let publicKey: [UInt8]
    let message: [UInt8]
    let signature: [UInt8]
    var testDescription: String { name }

    static let all = [
        Ed25519Vector(
            name: "TEST 1",
            secretKey: hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"),
            publicKey: hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"),
            message: [],
            signature: hex(
                """
                e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155
                5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b
                """
            )
        ),
        Ed25519Vector(
            name: "TEST 2",
            secretKey: hex("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"),
            publicKey: hex("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"),
            message: hex("72"),
            signature: hex(
                """
                92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da
                085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00
                """
            )
        ),
        Ed25519Vector(
            name: "TEST 3",
            secretKey: hex("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7"),
            publicKey: hex("fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025"),
            message: hex("af82"),
            signature: hex(
                """
                6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac
                18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a
                """
            )
        ),
        Ed25519Vector(
            name: "TEST SHA(abc)",
            secretKey: hex("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42"),
            publicKey: hex("ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf"),
            message: hex(
                """
                ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a
                2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f
                """
            ),
            signature: hex(
                """
                dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589
                09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704
                """
            )
        ),
    ]
}

@Suite("Ed25519")
struct Ed25519Tests {
    @Test("RFC 8032 section 7.1: public key, signature, verification", arguments: Ed25519Vector.all)
    func signsKnownAnswer(_ vector: Ed25519Vector) throws {
        let key = try Ed25519.PrivateKey(rawRepresentation: SecretBytes(vector.secretKey))
        #expect(key.publicKey.rawRepresentation == vector.publicKey)
        #expect(try key.signature(for: vector.message) == vector.signature)
        let publicKey = try Ed25519.PublicKey(rawRepresentation: vector.publicKey)
        #expect(publicKey == key.publicKey)
        #expect(publicKey.isValidSignature(vector.signature, for: vector.message))
    }

    @Test("A changed message or signature does not verify", arguments: Ed25519Vector.all)
    func rejectsTampering(_ vector: Ed25519Vector) throws {
        let publicKey = try Ed25519.PublicKey(rawRepresentation: vector.publicKey)
        #expect(!publicKey.isValidSignature(vector.signature, for: vector.message + [0]))
        if !vector.message.isEmpty {
            #expect(!publicKey.isValidSignature(vector.signature, for: flippingBit(0, of: vector.message)))
        }
        for bit in [0, 255, 256, 511] {  // first and last bit of R, then of S
            #expect(!publicKey.isValidSignature(flippingBit(bit, of: vector.signature), for: vector.message))
        }
        #expect(!publicKey.isValidSignature(Array(vector.signature.dropLast()), for: vector.message))
        #expect(!publicKey.isValidSignature([], for: vector.message))
    }

    @Test("Another key's signature does not verify")
    func rejectsOtherKey() throws {
        let first = Ed25519Vector.all[0]
        let second = Ed25519Vector.all[1]
        let publicKey = try Ed25519.PublicKey(rawRepresentation: first.publicKey)
        #expect(!publicKey.isValidSignature(second.signature, for: second.message))
    }

    @Test("Generated keys sign and verify")
    func generatedKeysRoundTrip() throws {
        let key = try Ed25519.PrivateKey.generate()
        let message = Array("lease 42".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.count == 64)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        let restored = try Ed25519.PrivateKey(rawRepresentation: key.rawRepresentation)
        #expect(restored.publicKey == key.publicKey)
        #expect(try restored.signature(for: message) == signature)
    }

    @Test("Keys of the wrong length are rejected", arguments: [0, 31, 33, 64])
    func rejectsKeyLength(count: Int) {
        #expect(throws: CryptoError.invalidPrivateKey) {
            try Ed25519.PrivateKey(rawRepresentation: SecretBytes([UInt8](repeating: 7, count: count)))
        }
        #expect(throws: CryptoError.invalidPublicKey) {
            try Ed25519.PublicKey(rawRepresentation: [UInt8](repeating: 7, count: count))
        }
    }
}
