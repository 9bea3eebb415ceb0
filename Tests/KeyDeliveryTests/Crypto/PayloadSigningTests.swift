import Foundation
import KeyDelivery
import StowageCrypto
import Testing

/// The payload's wire bytes and signature as an independent implementation produces them, computed with Python
/// (`json.dumps(payload, sort_keys=True, separators=(",", ":"))`, then `cryptography`'s Ed25519 with the RFC 8032
/// section 7.1 TEST 1 key).
struct PayloadSigningTests {
    static let serverSeed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
    static let serverPublic = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    static let payloadJSON = """
        {"keys":[{"ephemeralKey":"3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=","keyId":"000102030405060708090a0b0c0d0e0f",\
        "nonce":"AAECAwQFBgcICQoL","wrappedKey":"euQuaecA6jFnTcY3Fhnea1vICqZM6FfZn6uH+KkAA7c="}],"lease":{"assetId":"movie-1",\
        "deviceId":"fdeab9acf3710362bd2658cdc9a29e8f","issuedAt":1763700000,"keyIds":["000102030405060708090a0b0c0d0e0f"],\
        "leaseId":"123e4567-e89b-12d3-a456-426614174000","playbackDuration":172800,"renewableUntil":1768884000,\
        "requestNonce":"AAECAwQFBgcICQoLDA0ODw==","storageExpiresAt":1766292000,"type":"persistent"},"serverTime":1763700000,"version":1}
        """
    static let signature = "6LIPFZWo0yv5mBJsTONEKyqxxtRt1BR7ZybP13oIzYp3aZZfZb9HzPYFIi7X2620pRzsy2aIw48Go2BE5Y2SAw=="

    static let payload = LeasePayload(
        lease: .init(
            leaseId: "123e4567-e89b-12d3-a456-426614174000",
            assetId: "movie-1",
            deviceId: "fdeab9acf3710362bd2658cdc9a29e8f",
            keyIds: ["000102030405060708090a0b0c0d0e0f"],
            type: .persistent,
            issuedAt: 1_763_700_000,
            storageExpiresAt: 1_766_292_000,
            playbackDuration: 172_800,
            renewableUntil: 1_768_884_000,
            requestNonce: "AAECAwQFBgcICQoLDA0ODw=="
        ),
        keys: [KeyWrappingTests.wrapped],
        serverTime: 1_763_700_000
    )

    static func serverKey() throws -> Ed25519.PrivateKey { try Ed25519.PrivateKey(rawRepresentation: SecretBytes(Hex.decode(serverSeed)!)) }
    static func serverPublicKey() throws -> Ed25519.PublicKey { try Ed25519.PublicKey(rawRepresentation: Hex.decode(serverPublic)!) }

    @Test func signsTheKnownBytes() throws {
        #expect(PayloadSigning.encode(Self.payload) == Array(Self.payloadJSON.utf8))
        let signed = try PayloadSigning.sign(Self.payload, with: Self.serverKey())
        #expect(signed.payload == StrictBase64.encode(Array(Self.payloadJSON.utf8)))
        #expect(signed.signature == Self.signature)
    }

    @Test func handWrittenEncodingMatchesJSONEncoder() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var odd = Self.payload
        odd.lease.assetId = "a\"b\\c/d\n\r\t\u{8}\u{c}\u{1}\u{1f}é"
        odd.lease.playbackDuration = nil
        odd.lease.renewableUntil = nil
        odd.lease.type = .streaming
        odd.lease.keyIds = []
        odd.keys = []
        odd.serverTime = -5
        var two = Self.payload
        two.keys.append(.init(keyId: "k2", ephemeralKey: "e2", nonce: "n2", wrappedKey: "w2"))
        two.lease.keyIds.append("k2")
        // The optional extension members, in their sorted places: exportAllowed only when true.
        var extended = Self.payload
        extended.lease.firstPlayedAt = 1_763_700_100
        extended.lease.exportAllowed = true
        var exportFalse = extended
        exportFalse.lease.exportAllowed = false
        #expect(
            String(decoding: PayloadSigning.encode(extended), as: UTF8.self).contains(
                #""deviceId":"fdeab9acf3710362bd2658cdc9a29e8f","exportAllowed":true,"firstPlayedAt":1763700100,"#
            )
        )
        #expect(!String(decoding: PayloadSigning.encode(exportFalse), as: UTF8.self).contains("exportAllowed"))
        for payload in [Self.payload, odd, two, extended, exportFalse] {
            #expect(PayloadSigning.encode(payload) == Array(try encoder.encode(payload)))
        }
        let signed = SignedPayload(payload: "cGF5/+==", signature: "c2ln")
        #expect(PayloadSigning.responseBody(signed) == Array(try encoder.encode(signed)))
    }

    @Test func verifiesAndDecodesTheKnownPair() throws {
        let signed = SignedPayload(payload: StrictBase64.encode(Array(Self.payloadJSON.utf8)), signature: Self.signature)
        let payload = try PayloadSigning.verify(signed, serverKey: Self.serverPublicKey())
        #expect(payload == Self.payload)
    }

    @Test func verifiesBytesItDidNotEncode() throws {
        // Another server may order members differently, add spaces or add members: the client verifies the bytes.
        let json =
            #"{ "version": 1, "serverTime": 5, "extra": true, "keys": [], "lease": {"leaseId": "l", "assetId": "a", "#
            + #""deviceId": "d", "keyIds": [], "type": "streaming", "issuedAt": 1, "storageExpiresAt": 2, "requestNonce": "n"} }"#
        let signed = try PayloadSigning.sign(payloadBytes: Array(json.utf8), with: Self.serverKey())
        let payload = try PayloadSigning.verify(signed, serverKey: Self.serverPublicKey())
        #expect(payload.lease.type == .streaming)
        #expect(payload.lease.playbackDuration == nil)
        #expect(payload.lease.renewableUntil == nil)
        #expect(try PayloadSigning.verifiedPayloadBytes(signed, serverKey: Self.serverPublicKey()) == Array(json.utf8))
    }

    @Test(arguments: [0, 1, 100, 400, 578])
    func aFlippedBitInThePayloadIsRefused(byte: Int) throws {
        var bytes = Array(Self.payloadJSON.utf8)
        bytes[byte] ^= 0x01
        let signed = SignedPayload(payload: StrictBase64.encode(bytes), signature: Self.signature)
        #expect(throws: SignatureVerificationError.badSignature) { try PayloadSigning.verify(signed, serverKey: Self.serverPublicKey()) }
    }

    @Test(arguments: [0, 31, 32, 63])
    func aFlippedBitInTheSignatureIsRefused(byte: Int) throws {
        var signature = StrictBase64.decode(Self.signature)!
        signature[byte] ^= 0x80
        let signed = SignedPayload(payload: StrictBase64.encode(Array(Self.payloadJSON.utf8)), signature: StrictBase64.encode(signature))
        #expect(throws: SignatureVerificationError.badSignature) { try PayloadSigning.verify(signed, serverKey: Self.serverPublicKey()) }
    }

    @Test func anotherServerKeyIsRefused() throws {
        let signed = try PayloadSigning.sign(Self.payload, with: Self.serverKey())
        let other = try Ed25519.PrivateKey.generate().publicKey
        #expect(throws: SignatureVerificationError.badSignature) { try PayloadSigning.verify(signed, serverKey: other) }
    }

    @Test func malformedPairsAreTypedErrors() throws {
        let key = try Self.serverPublicKey()
        let good = try PayloadSigning.sign(Self.payload, with: Self.serverKey())
        #expect(throws: SignatureVerificationError.malformedSignature) {
            try PayloadSigning.verify(SignedPayload(payload: good.payload, signature: "AAAA"), serverKey: key)
        }
        #expect(throws: SignatureVerificationError.malformedPayload) {
            try PayloadSigning.verify(SignedPayload(payload: good.payload + "!", signature: good.signature), serverKey: key)
        }
        // Signed, but not a lease payload: refused after verification, never half-decoded.
        let notAPayload = try PayloadSigning.sign(payloadBytes: Array(#"{"version":1}"#.utf8), with: Self.serverKey())
        #expect(throws: SignatureVerificationError.malformedPayload) { try PayloadSigning.verify(notAPayload, serverKey: key) }
        var future = Self.payload
        future.version = 2
        let futurePair = try PayloadSigning.sign(future, with: Self.serverKey())
        #expect(throws: SignatureVerificationError.unsupportedVersion) { try PayloadSigning.verify(futurePair, serverKey: key) }
    }
}
