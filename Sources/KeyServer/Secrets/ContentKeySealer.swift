import StowageCrypto

/// Seals content keys at rest under the server's master key, and opens them to wrap them to a device.
///
/// The sealing key is derived from the master key with HKDF, so the master key itself never keys a cipher; each content
/// key gets a random 12-byte nonce, and the asset ID and key ID are the associated data, so a sealed key moved to another
/// row of the table no longer opens.
struct ContentKeySealer: Sendable, Equatable {
    private static let info = Array("stowage-keyserver content-key sealing v1".utf8)
    private let key: SecretBytes

    /// - Parameter masterKey: The 32-byte master key from the data directory.
    init(masterKey: SecretBytes) throws {
        guard masterKey.count == 32 else { throw CryptoError.invalidKeyLength }
        key = try HKDF.deriveKey(inputKeyMaterial: masterKey, salt: [], info: Self.info, outputByteCount: 32)
    }

    /// Whether `record` opens under this key.
    func opens(_ record: ContentKeyRecord) -> Bool {
        (try? open(record)) != nil
    }

    func seal(_ contentKey: SecretBytes, assetID: String, keyID: String) throws -> ContentKeyRecord {
        let nonce = try SecureRandom.bytes(count: 12)
        let (ciphertext, tag) = try AESGCM.seal(contentKey, key: key, nonce: nonce, authenticating: Self.associatedData(assetID, keyID))
        return ContentKeyRecord(assetID: assetID, keyID: keyID, nonce: nonce, sealedKey: ciphertext + tag)
    }

    /// - Throws: `CryptoError.authenticationFailed` when the record was altered, moved, or sealed under another master key.
    func open(_ record: ContentKeyRecord) throws -> SecretBytes {
        guard record.sealedKey.count == 32 else { throw CryptoError.authenticationFailed }
        return try AESGCM.open(
            Array(record.sealedKey[..<16]),
            tag: Array(record.sealedKey[16...]),
            key: key,
            nonce: record.nonce,
            authenticating: Self.associatedData(record.assetID, record.keyID)
        )
    }

    private static func associatedData(_ assetID: String, _ keyID: String) -> [UInt8] {
        // Asset IDs cannot contain NUL, so the separator makes the concatenation unambiguous.
        Array(assetID.utf8) + [0] + Array(keyID.utf8)
    }
}
