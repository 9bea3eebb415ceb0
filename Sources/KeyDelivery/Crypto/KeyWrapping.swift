public import StowageCrypto

/// Wraps a content key to one device for one lease, and unwraps it on that device (docs/key-protocol.md,
/// "POST /v1/keys", key wrapping).
///
/// For each key the server makes a fresh X25519 key pair and computes
/// - `shared = X25519(ephemeralPrivate, deviceAgreementKey)`,
/// - `kek = HKDF-SHA256(ikm: shared, salt: UTF-8(leaseId), info: "stowage-skdp-v1" || keyId (16 raw bytes) || UTF-8(deviceId), L: 32)`,
/// - `wrappedKey = AES-256-GCM(kek, nonce (12 bytes), plaintext: the 16-byte content key, aad: keyId raw)`, written as
///   the 16 ciphertext bytes followed by the 16 tag bytes.
///
/// Binding the lease ID, key ID and device ID into the derivation means a wrapped key opens only for the device and
/// lease it was issued to, and only under its own key ID.
///
/// ```swift
/// // Server
/// let wrapped = try KeyWrapping.wrap(contentKey: key, keyID: keyID, leaseID: leaseID, deviceID: deviceID,
///                                    deviceAgreementKey: agreementPublicKey)
/// // Device
/// let key = try KeyWrapping.unwrap(wrapped, leaseID: leaseID, deviceID: deviceID, agreementKey: agreementPrivateKey)
/// ```
public enum KeyWrapping {
    /// The HKDF info prefix, before the key ID and the device ID.
    public static let infoPrefix = Array("stowage-skdp-v1".utf8)
    /// Content keys are AES-128 keys.
    public static let contentKeyByteCount = 16
    static let agreementKeyByteCount = 32
    static let nonceByteCount = 12
    static let wrappedKeyByteCount = 32
    static let kekByteCount = 32

    /// Wraps `contentKey` to a device, with a fresh ephemeral X25519 key and a random nonce (server side).
    ///
    /// - Parameters:
    ///   - contentKey: The 16-byte content key.
    ///   - keyID: The key ID, 32 lowercase hex digits.
    ///   - leaseID: The lease the key is issued under.
    ///   - deviceID: The device ID (32 lowercase hex digits).
    ///   - deviceAgreementKey: The device's 32-byte X25519 public key.
    /// - Returns: The `keys` entry of the lease payload.
    /// - Throws: ``KeyWrappingError`` for a bad key ID, content key or agreement key; `CryptoError` if OpenSSL fails.
    public static func wrap(
        contentKey: SecretBytes,
        keyID: String,
        leaseID: String,
        deviceID: String,
        deviceAgreementKey: [UInt8]
    ) throws -> LeasePayload.WrappedKey {
        try wrap(
            contentKey: contentKey,
            keyID: keyID,
            leaseID: leaseID,
            deviceID: deviceID,
            deviceAgreementKey: deviceAgreementKey,
            ephemeralKey: X25519.PrivateKey.generate(),
            nonce: SecureRandom.bytes(count: nonceByteCount)
        )
    }

    /// Wraps with a given ephemeral key and nonce. Only known-answer tests use it: in production both must be fresh for
    /// every key, which the public ``wrap(contentKey:keyID:leaseID:deviceID:deviceAgreementKey:)`` guarantees.
    static func wrap(
        contentKey: SecretBytes,
        keyID: String,
        leaseID: String,
        deviceID: String,
        deviceAgreementKey: [UInt8],
        ephemeralKey: X25519.PrivateKey,
        nonce: [UInt8]
    ) throws -> LeasePayload.WrappedKey {
        guard KeyProtocol.isValidKeyID(keyID), let rawKeyID = Hex.decode(keyID) else { throw KeyWrappingError.invalidKeyID.concerning(keyID) }
        guard contentKey.count == contentKeyByteCount else { throw KeyWrappingError.invalidContentKey.concerning(keyID) }
        guard deviceAgreementKey.count == agreementKeyByteCount else { throw KeyWrappingError.invalidAgreementKey.concerning(keyID) }
        let shared: SecretBytes
        do {
            shared = try ephemeralKey.sharedSecret(with: deviceAgreementKey)
        } catch let error as CryptoError where error == .invalidPublicKey {
            throw KeyWrappingError.invalidAgreementKey.concerning(keyID)
        }
        let kek = try keyEncryptionKey(sharedSecret: shared, leaseID: leaseID, rawKeyID: rawKeyID, deviceID: deviceID)
        let (ciphertext, tag) = try AESGCM.seal(contentKey, key: kek, nonce: nonce, authenticating: rawKeyID)
        return LeasePayload.WrappedKey(
            keyId: keyID,
            ephemeralKey: StrictBase64.encode(ephemeralKey.publicKey),
            nonce: StrictBase64.encode(nonce),
            wrappedKey: StrictBase64.encode(ciphertext + tag)
        )
    }

    /// Unwraps a content key with the device's X25519 private key (client side).
    ///
    /// - Parameters:
    ///   - wrappedKey: One entry of a verified payload's `keys`.
    ///   - leaseID: The payload's `lease.leaseId`.
    ///   - deviceID: This device's ID (the payload's `lease.deviceId` must be it).
    ///   - agreementKey: This device's X25519 private key.
    /// - Returns: The 16-byte content key, in a zeroizing buffer.
    /// - Throws: ``KeyWrappingError/unwrapFailed`` when the key was wrapped to another device or lease or was altered;
    ///   ``KeyWrappingError/malformedWrappedKey``, ``KeyWrappingError/invalidKeyID`` or
    ///   ``KeyWrappingError/invalidAgreementKey`` for malformed fields; `CryptoError` if OpenSSL fails.
    public static func unwrap(
        _ wrappedKey: LeasePayload.WrappedKey,
        leaseID: String,
        deviceID: String,
        agreementKey: X25519.PrivateKey
    ) throws -> SecretBytes {
        let keyID = wrappedKey.keyId
        guard KeyProtocol.isValidKeyID(keyID), let rawKeyID = Hex.decode(keyID) else { throw KeyWrappingError.invalidKeyID.concerning(keyID) }
        guard let ephemeralKey = StrictBase64.decode(wrappedKey.ephemeralKey, byteCount: agreementKeyByteCount),
            let nonce = StrictBase64.decode(wrappedKey.nonce, byteCount: nonceByteCount),
            let sealed = StrictBase64.decode(wrappedKey.wrappedKey, byteCount: wrappedKeyByteCount)
        else { throw KeyWrappingError.malformedWrappedKey.concerning(keyID) }
        let shared: SecretBytes
        do {
            shared = try agreementKey.sharedSecret(with: ephemeralKey)
        } catch let error as CryptoError where error == .invalidPublicKey {
            throw KeyWrappingError.invalidAgreementKey.concerning(keyID)
        }
        let kek = try keyEncryptionKey(sharedSecret: shared, leaseID: leaseID, rawKeyID: rawKeyID, deviceID: deviceID)
        do {
            return try AESGCM.open(
                Array(sealed[..<contentKeyByteCount]),
                tag: Array(sealed[contentKeyByteCount...]),
                key: kek,
                nonce: nonce,
                authenticating: rawKeyID
            )
        } catch let error as CryptoError where error == .authenticationFailed {
            throw KeyWrappingError.unwrapFailed.concerning(keyID)
        }
    }

    /// The key-encryption key: HKDF-SHA256 with the lease ID as salt and `"stowage-skdp-v1" || keyId || deviceId` as info.
    static func keyEncryptionKey(sharedSecret: SecretBytes, leaseID: String, rawKeyID: [UInt8], deviceID: String) throws -> SecretBytes {
        try HKDF.deriveKey(
            inputKeyMaterial: sharedSecret,
            salt: Array(leaseID.utf8),
            info: infoPrefix + rawKeyID + Array(deviceID.utf8),
            outputByteCount: kekByteCount
        )
    }
}

extension LeasePayload {
    /// Every content key of the payload, keyed by key ID, unwrapped with `device`'s X25519 key (docs/key-protocol.md,
    /// "Key wrapping"). Verify the payload's signature before calling this.
    ///
    /// - Throws: ``KeyWrappingError`` for a key that is malformed or not wrapped to this device.
    public func unwrappedKeys(for device: DeviceIdentity) throws -> [String: SecretBytes] {
        var keys: [String: SecretBytes] = [:]
        for wrapped in self.keys {
            keys[wrapped.keyId] = try KeyWrapping.unwrap(
                wrapped,
                leaseID: lease.leaseId,
                deviceID: device.deviceId,
                agreementKey: device.agreementKey
            )
        }
        return keys
    }
}
