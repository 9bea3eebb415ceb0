import Foundation
import KeyDelivery
import StowageCrypto
import Testing

struct RequestSigningTests {
    static let body = Array(#"{"version":1,"leaseId":"l","deviceId":"d","nonce":"AAECAwQFBgcICQoLDA0ODw==","clientTime":1763700000}"#.utf8)

    @Test func signsTheExactBodyBytes() throws {
        let device = try Ed25519.PrivateKey.generate()
        let header = try RequestSigning.signature(for: Self.body, with: device)
        #expect(StrictBase64.decode(header, byteCount: 64) != nil)
        try RequestSigning.verify(header, body: Self.body, signingKey: device.publicKey)
        #expect(RequestSigning.headerName == "Stowage-Device-Signature")
    }

    @Test func knownAnswerFromRFC8032() throws {
        // RFC 8032 section 7.1 TEST 1: the empty message.
        let key = try Ed25519.PrivateKey(
            rawRepresentation: SecretBytes(Hex.decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")!)
        )
        let expected =
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        #expect(try RequestSigning.signature(for: [], with: key) == StrictBase64.encode(Hex.decode(expected)!))
    }

    @Test func anyChangeToTheBodyIsRefused() throws {
        let device = try Ed25519.PrivateKey.generate()
        let header = try RequestSigning.signature(for: Self.body, with: device)
        // Same JSON meaning, other bytes: a space after the first comma.
        var respaced = Self.body
        respaced.insert(UInt8(ascii: " "), at: 12)
        var flipped = Self.body
        flipped[20] ^= 0x01
        for body in [respaced, flipped, Array(Self.body.dropLast())] {
            #expect(throws: SignatureVerificationError.badSignature) { try RequestSigning.verify(header, body: body, signingKey: device.publicKey) }
        }
    }

    @Test func tamperedOrForeignSignaturesAreRefused() throws {
        let device = try Ed25519.PrivateKey.generate()
        var signature = StrictBase64.decode(try RequestSigning.signature(for: Self.body, with: device))!
        signature[10] ^= 0x04
        #expect(throws: SignatureVerificationError.badSignature) {
            try RequestSigning.verify(StrictBase64.encode(signature), body: Self.body, signingKey: device.publicKey)
        }
        let other = try Ed25519.PrivateKey.generate()
        #expect(throws: SignatureVerificationError.badSignature) {
            try RequestSigning.verify(try RequestSigning.signature(for: Self.body, with: other), body: Self.body, signingKey: device.publicKey)
        }
        #expect(throws: SignatureVerificationError.missingSignature) { try RequestSigning.verify(nil, body: Self.body, signingKey: device.publicKey) }
        #expect(throws: SignatureVerificationError.malformedSignature) {
            try RequestSigning.verify("not base64", body: Self.body, signingKey: device.publicKey)
        }
        #expect(throws: SignatureVerificationError.malformedSignature) {
            try RequestSigning.verify(StrictBase64.encode([UInt8](repeating: 1, count: 32)), body: Self.body, signingKey: device.publicKey)
        }
    }
}
