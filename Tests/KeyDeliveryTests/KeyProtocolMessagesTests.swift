import Foundation
import KeyDelivery
import StowageCrypto
import Testing

struct KeyProtocolMessagesTests {
    @Test func deviceIdentifierIsTheFirst16BytesOfSHA256OfBothPublicKeys() {
        let signing = [UInt8](0..<32)
        let agreement = [UInt8](32..<64)
        // SHA-256 of the bytes 0x00...0x3f, computed independently with Python hashlib.
        let expected = Hex.encode(SHA256Hasher.hash([UInt8](0..<64)).prefix(16))
        #expect(DeviceIdentifier.make(signingKey: signing, agreementKey: agreement) == expected)
        #expect(expected == "fdeab9acf3710362bd2658cdc9a29e8f")
    }

    @Test(arguments: [
        ("movie-1", true), ("a.b_c-D9", true), (String(repeating: "x", count: 128), true),
        ("", false), (String(repeating: "x", count: 129), false), ("movie/1", false), ("movie 1", false), ("é", false),
    ])
    func assetIDSyntax(id: String, valid: Bool) {
        #expect(KeyProtocol.isValidAssetID(id) == valid)
    }

    @Test func keyIDsAreLowercaseHex() {
        #expect(KeyProtocol.isValidKeyID("000102030405060708090a0b0c0d0e0f"))
        #expect(!KeyProtocol.isValidKeyID("000102030405060708090A0B0C0D0E0F"))
        #expect(!KeyProtocol.isValidKeyID("0001"))
    }

    @Test func leasePayloadWritesNullWindowsAndTheProtocolFieldNames() throws {
        let payload = LeasePayload(
            lease: .init(
                leaseId: "l",
                assetId: "movie-1",
                deviceId: "d",
                keyIds: ["k"],
                type: .persistent,
                issuedAt: 1,
                storageExpiresAt: 2,
                playbackDuration: nil,
                renewableUntil: nil,
                requestNonce: "n"
            ),
            keys: [.init(keyId: "k", ephemeralKey: "e", nonce: "n", wrappedKey: "w")],
            serverTime: 3
        )
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(payload)) as? [String: Any]
        let lease = try #require(object?["lease"] as? [String: Any])
        #expect(lease["playbackDuration"] is NSNull)
        #expect(lease["renewableUntil"] is NSNull)
        // The extension member is left out when unknown, so payloads stay as the protocol shows them.
        #expect(lease["firstPlayedAt"] == nil)
        #expect(lease["storageExpiresAt"] as? Int == 2)
        #expect(object?["serverTime"] as? Int == 3)
        #expect(try JSONDecoder().decode(LeasePayload.self, from: JSONEncoder().encode(payload)) == payload)
    }

    @Test func errorCodesCarryTheProtocolStatuses() {
        // The protocol's 14 and two extensions (docs/key-protocol-extensions.md).
        #expect(KeyProtocolErrorCode.allCases.count == 16)
        #expect(KeyProtocolErrorCode.clockSkew.httpStatus == 400)
        #expect(KeyProtocolErrorCode.streamLimitReached.httpStatus == 403)
        #expect(KeyProtocolErrorCode.replayedRequest.httpStatus == 409)
        #expect(KeyProtocolErrorCode.leaseExpired.httpStatus == 410)
        #expect(KeyProtocolErrorCode.badDeviceSignature.httpStatus == 401)
        #expect(KeyProtocolErrorCode(rawValue: "device_limit_reached")?.httpStatus == 403)
    }
}
