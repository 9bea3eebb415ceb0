import StowageCrypto

/// Seals keys kept on this device with AES-256-GCM under a key-encryption key bound to the data directory and the
/// machine (docs/design.md, "State on disk").
///
/// `kek = HKDF-SHA256(ikm: the 32-byte secret in key-store.secret, salt: UTF-8 machine ID, info: "stowage-key-store-v1
/// kek", length: 32)`. Both inputs are needed: the secret file alone (a copied directory) or the machine alone
/// (another user's directory) gives a different key, and AES-GCM then refuses to open.
struct LocalKeySealer: Sendable {
    /// A sealed value: a fresh 12-byte nonce, the ciphertext and the 16-byte tag.
    struct Sealed: Sendable, Hashable {
        var nonce: [UInt8]
        var ciphertext: [UInt8]
        var tag: [UInt8]

        init(nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) {
            self.nonce = nonce
            self.ciphertext = ciphertext
            self.tag = tag
        }

        /// The one-piece form a file or a column keeps: the 12-byte nonce, the ciphertext, the 16-byte tag; nil when
        /// `combined` is too short to hold a nonce and a tag.
        init?(combined: [UInt8]) {
            guard combined.count >= 28 else { return nil }
            self.init(nonce: Array(combined.prefix(12)), ciphertext: Array(combined.dropFirst(12).dropLast(16)), tag: Array(combined.suffix(16)))
        }

        /// ``init(combined:)``'s form.
        var combined: [UInt8] { nonce + ciphertext + tag }
    }

    static let secretByteCount = 32
    private static let info = Array("stowage-key-store-v1 kek".utf8)
    private static let checkAAD = Array("stowage-key-store-v1 check".utf8)

    private let keyEncryptionKey: SecretBytes

    init(secret: SecretBytes, machineID: MachineID) throws {
        keyEncryptionKey = try HKDF.deriveKey(
            inputKeyMaterial: secret,
            salt: Array(machineID.value.utf8),
            info: Self.info,
            outputByteCount: 32
        )
    }

    func seal(_ plaintext: SecretBytes, authenticating aad: [UInt8]) throws -> Sealed {
        let nonce = try SecureRandom.bytes(count: 12)
        let (ciphertext, tag) = try AESGCM.seal(plaintext, key: keyEncryptionKey, nonce: nonce, authenticating: aad)
        return Sealed(nonce: nonce, ciphertext: ciphertext, tag: tag)
    }

    /// - Throws: `CryptoError.authenticationFailed` when the key, the AAD or the bytes are not the sealing ones.
    func open(_ sealed: Sealed, authenticating aad: [UInt8]) throws -> SecretBytes {
        try AESGCM.open(sealed.ciphertext, tag: sealed.tag, key: keyEncryptionKey, nonce: sealed.nonce, authenticating: aad)
    }

    /// A check value sealing nothing: it tells, before any key is opened, whether this is the key the store was set up
    /// with.
    func makeCheckValue() throws -> Sealed {
        try seal(SecretBytes([]), authenticating: Self.checkAAD)
    }

    func matches(_ check: Sealed) -> Bool {
        (try? open(check, authenticating: Self.checkAAD)) != nil
    }
}
