import StowageCore
import StowageCrypto
import Testing

@testable import KeyDelivery

/// Known answers for the protocol's key wrapping, cross-checked with Python's `cryptography` package:
///
/// ```python
/// from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
/// from cryptography.hazmat.primitives.kdf.hkdf import HKDF
/// from cryptography.hazmat.primitives import hashes
/// from cryptography.hazmat.primitives.ciphers.aead import AESGCM
/// eph = X25519PrivateKey.from_private_bytes(bytes.fromhex(EPHEMERAL_PRIVATE))
/// shared = eph.exchange(X25519PublicKey.from_public_bytes(bytes.fromhex(DEVICE_PUBLIC)))
/// kek = HKDF(hashes.SHA256(), 32, LEASE_ID.encode(), b"stowage-skdp-v1" + bytes.fromhex(KEY_ID) + DEVICE_ID.encode()).derive(shared)
/// wrapped = AESGCM(kek).encrypt(bytes.fromhex(NONCE), bytes.fromhex(CONTENT_KEY), bytes.fromhex(KEY_ID))
/// ```
///
/// The X25519 keys are Alice's (device) and Bob's (ephemeral) from RFC 7748 section 6.1, so the shared secret is the
/// RFC's too.
struct KeyWrappingTests {
    static let devicePrivate = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
    static let devicePublic = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
    static let ephemeralPrivate = "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"
    static let sharedSecret = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
    static let keyID = "000102030405060708090a0b0c0d0e0f"
    static let contentKey = "00112233445566778899aabbccddeeff"
    static let leaseID = "123e4567-e89b-12d3-a456-426614174000"
    static let deviceID = "fdeab9acf3710362bd2658cdc9a29e8f"
    static let nonce = "000102030405060708090a0b"
    static let kek = "29c1fc87ca87f3a10c1360bccc35b180cdc0e12fd929f5142f97a1552284457e"
    static let wrapped = LeasePayload.WrappedKey(
        keyId: keyID,
        ephemeralKey: "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=",
        nonce: "AAECAwQFBgcICQoL",
        wrappedKey: "euQuaecA6jFnTcY3Fhnea1vICqZM6FfZn6uH+KkAA7c="
    )

    static func key(_ hex: String) -> SecretBytes { SecretBytes(Hex.decode(hex)!) }
    static func deviceKey() throws -> X25519.PrivateKey { try X25519.PrivateKey(rawRepresentation: key(devicePrivate)) }

    @Test func derivesTheKnownKeyEncryptionKey() throws {
        let kek = try KeyWrapping.keyEncryptionKey(
            sharedSecret: Self.key(Self.sharedSecret),
            leaseID: Self.leaseID,
            rawKeyID: Hex.decode(Self.keyID)!,
            deviceID: Self.deviceID
        )
        #expect(kek == Self.key(Self.kek))
    }

    @Test func wrapsToTheKnownBytes() throws {
        let wrapped = try KeyWrapping.wrap(
            contentKey: Self.key(Self.contentKey),
            keyID: Self.keyID,
            leaseID: Self.leaseID,
            deviceID: Self.deviceID,
            deviceAgreementKey: Hex.decode(Self.devicePublic)!,
            ephemeralKey: X25519.PrivateKey(rawRepresentation: Self.key(Self.ephemeralPrivate)),
            nonce: Hex.decode(Self.nonce)!
        )
        #expect(wrapped == Self.wrapped)
    }

    @Test func unwrapsTheKnownBytes() throws {
        let key = try KeyWrapping.unwrap(Self.wrapped, leaseID: Self.leaseID, deviceID: Self.deviceID, agreementKey: Self.deviceKey())
        #expect(key == Self.key(Self.contentKey))
    }

    @Test func roundTripsWithFreshEphemeralKeysAndNonces() throws {
        let device = try X25519.PrivateKey.generate()
        let contentKey = try SecretBytes.random(count: 16)
        let first = try KeyWrapping.wrap(
            contentKey: contentKey,
            keyID: Self.keyID,
            leaseID: "lease",
            deviceID: Self.deviceID,
            deviceAgreementKey: device.publicKey
        )
        let second = try KeyWrapping.wrap(
            contentKey: contentKey,
            keyID: Self.keyID,
            leaseID: "lease",
            deviceID: Self.deviceID,
            deviceAgreementKey: device.publicKey
        )
        #expect(first.ephemeralKey != second.ephemeralKey)
        #expect(first.nonce != second.nonce)
        #expect(first.wrappedKey != second.wrappedKey)
        for wrapped in [first, second] {
            #expect(try KeyWrapping.unwrap(wrapped, leaseID: "lease", deviceID: Self.deviceID, agreementKey: device) == contentKey)
        }
    }

    @Test func anotherDeviceCannotUnwrap() throws {
        let other = try X25519.PrivateKey.generate()
        #expect(throws: KeyWrappingError.unwrapFailed) {
            try KeyWrapping.unwrap(Self.wrapped, leaseID: Self.leaseID, deviceID: Self.deviceID, agreementKey: other)
        }
        // The right private key under another device ID fails too: the ID is bound into the derivation.
        #expect(throws: KeyWrappingError.unwrapFailed) {
            try KeyWrapping.unwrap(Self.wrapped, leaseID: Self.leaseID, deviceID: "00000000000000000000000000000000", agreementKey: Self.deviceKey())
        }
    }

    @Test func anotherLeaseCannotUnwrap() throws {
        #expect(throws: KeyWrappingError.unwrapFailed) {
            try KeyWrapping.unwrap(
                Self.wrapped,
                leaseID: "123e4567-e89b-12d3-a456-426614174001",
                deviceID: Self.deviceID,
                agreementKey: Self.deviceKey()
            )
        }
    }

    @Test func aKeyMovedToAnotherKeyIDFails() throws {
        var moved = Self.wrapped
        moved.keyId = "101112131415161718191a1b1c1d1e1f"
        #expect(throws: KeyWrappingError.unwrapFailed) {
            try KeyWrapping.unwrap(moved, leaseID: Self.leaseID, deviceID: Self.deviceID, agreementKey: Self.deviceKey())
        }
    }

    @Test(arguments: 0..<(32 * 8))
    func everyFlippedBitOfTheWrappedKeyFails(bit: Int) throws {
        var bytes = StrictBase64.decode(Self.wrapped.wrappedKey)!
        bytes[bit / 8] ^= 1 << (bit % 8)
        var tampered = Self.wrapped
        tampered.wrappedKey = StrictBase64.encode(bytes)
        let error = #expect(throws: KeyWrappingError.self) {
            try KeyWrapping.unwrap(tampered, leaseID: Self.leaseID, deviceID: Self.deviceID, agreementKey: Self.deviceKey())
        }
        #expect(error == .unwrapFailed)
        #expect(error?.keyID == Self.keyID)
    }

    @Test func flippedBitsOfTheNonceAndEphemeralKeyFail() throws {
        var nonce = StrictBase64.decode(Self.wrapped.nonce)!
        nonce[5] ^= 0x10
        var tampered = Self.wrapped
        tampered.nonce = StrictBase64.encode(nonce)
        #expect(throws: KeyWrappingError.unwrapFailed) {
            try KeyWrapping.unwrap(tampered, leaseID: Self.leaseID, deviceID: Self.deviceID, agreementKey: Self.deviceKey())
        }
        var ephemeral = StrictBase64.decode(Self.wrapped.ephemeralKey)!
        ephemeral[0] ^= 0x01
        tampered = Self.wrapped
        tampered.ephemeralKey = StrictBase64.encode(ephemeral)
        #expect(throws: KeyWrappingError.unwrapFailed) {
            try KeyWrapping.unwrap(tampered, leaseID: Self.leaseID, deviceID: Self.deviceID, agreementKey: Self.deviceKey())
        }
    }

    @Test func malformedFieldsAreTypedErrors() throws {
        let device = try Self.deviceKey()
        var short = Self.wrapped
        short.wrappedKey = StrictBase64.encode([UInt8](repeating: 0, count: 31))
        var badNonce = Self.wrapped
        badNonce.nonce = "AAECAwQFBgcICQo="
        var notBase64 = Self.wrapped
        notBase64.ephemeralKey = "3p7bfXt9wbTTW2HC7OQ1Nz-DQ8hbeGdNrfx_FG-IK08="
        for wrapped in [short, badNonce, notBase64] {
            #expect(throws: KeyWrappingError.malformedWrappedKey) {
                try KeyWrapping.unwrap(wrapped, leaseID: Self.leaseID, deviceID: Self.deviceID, agreementKey: device)
            }
        }
        var upper = Self.wrapped
        upper.keyId = Self.keyID.uppercased()
        #expect(throws: KeyWrappingError.invalidKeyID) {
            try KeyWrapping.unwrap(upper, leaseID: Self.leaseID, deviceID: Self.deviceID, agreementKey: device)
        }
        // A low-order point (here 0) gives the all-zero shared secret, which RFC 7748 section 6.1 says to reject.
        var lowOrder = Self.wrapped
        lowOrder.ephemeralKey = StrictBase64.encode([UInt8](repeating: 0, count: 32))
        #expect(throws: KeyWrappingError.invalidAgreementKey) {
            try KeyWrapping.unwrap(lowOrder, leaseID: Self.leaseID, deviceID: Self.deviceID, agreementKey: device)
        }
    }

    @Test func wrapRefusesBadInputs() throws {
        let device = try X25519.PrivateKey.generate().publicKey
        #expect(throws: KeyWrappingError.invalidContentKey) {
            try KeyWrapping.wrap(
                contentKey: SecretBytes([1, 2, 3]),
                keyID: Self.keyID,
                leaseID: "l",
                deviceID: Self.deviceID,
                deviceAgreementKey: device
            )
        }
        #expect(throws: KeyWrappingError.invalidKeyID) {
            try KeyWrapping.wrap(
                contentKey: Self.key(Self.contentKey),
                keyID: "0001",
                leaseID: "l",
                deviceID: Self.deviceID,
                deviceAgreementKey: device
            )
        }
        #expect(throws: KeyWrappingError.invalidAgreementKey) {
            try KeyWrapping.wrap(
                contentKey: Self.key(Self.contentKey),
                keyID: Self.keyID,
                leaseID: "l",
                deviceID: Self.deviceID,
                deviceAgreementKey: [UInt8](repeating: 0, count: 32)
            )
        }
        #expect(throws: KeyWrappingError.invalidAgreementKey) {
            try KeyWrapping.wrap(
                contentKey: Self.key(Self.contentKey),
                keyID: Self.keyID,
                leaseID: "l",
                deviceID: Self.deviceID,
                deviceAgreementKey: [1]
            )
        }
    }

    @Test func errorsSayWhichKey() {
        let error = KeyWrappingError.unwrapFailed.concerning(Self.keyID)
        #expect(error.code == "unwrap_failed")
        #expect(error.description.contains(Self.keyID))
        #expect(error == .unwrapFailed)
    }
}
