import StowageCrypto
import Testing

/// RFC 7748 section 5.2, the two single-call test vectors: scalar, input u-coordinate, output.
/// The second input u has its top bit set, which implementations must mask (section 5).
struct X25519Vector: Sendable, CustomTestStringConvertible {
    let scalar: [UInt8]
    let u: [UInt8]
    let output: [UInt8]
    var testDescription: String { Hex.encode(scalar.prefix(4)) }

    static let all = [
        X25519Vector(
            scalar: hex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"),
            u: hex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c"),
            output: hex("c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552")
        ),
        X25519Vector(
            scalar: hex("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d"),
            u: hex("e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493"),
            output: hex("95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957")
        ),
    ]
}

@Suite("X25519")
struct X25519Tests {
    @Test("RFC 7748 section 5.2 single calls", arguments: X25519Vector.all)
    func computesKnownAnswer(_ vector: X25519Vector) throws {
        let key = try X25519.PrivateKey(rawRepresentation: SecretBytes(vector.scalar))
        #expect(try key.sharedSecret(with: vector.u) == SecretBytes(vector.output))
    }

    @Test("RFC 7748 section 5.2 iterated: after 1 and 1,000 iterations")
    func iterates() throws {
        // k = u = 9; then repeatedly k, u = X25519(k, u), k.
        var k = hex("0900000000000000000000000000000000000000000000000000000000000000")
        var u = k
        var results: [Int: [UInt8]] = [:]
        for iteration in 1...1000 {
            let output = try X25519.PrivateKey(rawRepresentation: SecretBytes(k)).sharedSecret(with: u)
            u = k
            k = output.withUnsafeBytes { Array($0) }
            if iteration == 1 || iteration == 1000 { results[iteration] = k }
        }
        #expect(results[1] == hex("422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079"))
        #expect(results[1000] == hex("684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51"))
    }

    @Test("RFC 7748 section 6.1 Alice and Bob")
    func agreesLikeAliceAndBob() throws {
        let alice = try X25519.PrivateKey(rawRepresentation: SecretBytes(hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")))
        let bob = try X25519.PrivateKey(rawRepresentation: SecretBytes(hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")))
        #expect(alice.publicKey == hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        #expect(bob.publicKey == hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
        let shared = SecretBytes(hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"))
        #expect(try alice.sharedSecret(with: bob.publicKey) == shared)
        #expect(try bob.sharedSecret(with: alice.publicKey) == shared)
    }

    @Test("Generated keys agree with each other and differ from one another")
    func generatedKeysAgree() throws {
        let first = try X25519.PrivateKey.generate()
        let second = try X25519.PrivateKey.generate()
        #expect(first.rawRepresentation.count == 32)
        #expect(first.publicKey != second.publicKey)
        #expect(try first.sharedSecret(with: second.publicKey) == second.sharedSecret(with: first.publicKey))
    }

    @Test(
        "Wrong-length or small-order public keys are invalidPublicKey",
        arguments: [
            [UInt8](repeating: 0, count: 31),
            [UInt8](repeating: 9, count: 33),
            [UInt8](repeating: 0, count: 32),  // u = 0: the all-zero shared secret (RFC 7748 section 6.1)
            hex("0100000000000000000000000000000000000000000000000000000000000000"),  // u = 1, order 1
        ]
    )
    func rejectsPublicKey(_ peer: [UInt8]) throws {
        let key = try X25519.PrivateKey.generate()
        #expect(throws: CryptoError.invalidPublicKey) { try key.sharedSecret(with: peer) }
    }

    @Test("Private keys other than 32 bytes are invalidPrivateKey", arguments: [0, 31, 33])
    func rejectsPrivateKey(count: Int) {
        #expect(throws: CryptoError.invalidPrivateKey) {
            try X25519.PrivateKey(rawRepresentation: SecretBytes([UInt8](repeating: 1, count: count)))
        }
    }
}
