import StowageCrypto

/// The two keys the key store derives from its secret (`key-store.secret`, 32 random bytes, mode 0600) and the
/// machine ID, each with HKDF-SHA256 under its own label, so that neither a copied data directory nor another user's
/// directory on the same machine opens:
///
/// - the sealer (``LocalKeySealer``, AES-256-GCM): identity keys and the anchor file;
/// - the state key (HMAC-SHA256): the client's own lease state in the database (first play, lease state, the time
///   high-water mark, the release queue, the pinned server keys), so that editing a row is caught.
struct KeyStoreSecrets: Sendable {
    static let stateKeyInfo = Array("stowage-key-store-v1 state-mac".utf8)

    let sealer: LocalKeySealer
    private let stateKey: SecretBytes

    init(secret: SecretBytes, machineID: MachineID) throws {
        sealer = try LocalKeySealer(secret: secret, machineID: machineID)
        stateKey = try HKDF.deriveKey(
            inputKeyMaterial: secret,
            salt: Array(machineID.value.utf8),
            info: Self.stateKeyInfo,
            outputByteCount: 32
        )
    }

    /// The HMAC-SHA256 of `fields`' canonical encoding.
    func authenticationCode(for fields: CanonicalFields) throws -> [UInt8] {
        try HMACSHA256.authenticationCode(for: fields.bytes, key: stateKey)
    }

    /// Whether `code` is the authentication code of `fields` (compared in constant time); false for a missing code.
    func isAuthentic(_ code: [UInt8]?, for fields: CanonicalFields) -> Bool {
        guard let code else { return false }
        return (try? HMACSHA256.isValid(code, for: fields.bytes, key: stateKey)) ?? false
    }
}

/// An unambiguous byte encoding of a list of fields, for authentication codes: a domain label, then every field as
/// its UTF-8 length (4 bytes, big-endian) followed by its UTF-8 bytes. An absent value is the empty string and an
/// integer is written in decimal, so `nil`, `0` and `""` never collide with each other or shift other fields.
struct CanonicalFields: Sendable, Hashable {
    private(set) var bytes: [UInt8] = []

    /// - Parameter domain: what the fields describe, e.g. `stowage-lease-state-v1`; codes for one kind of record
    ///   never verify another kind.
    init(domain: String) {
        append(domain)
    }

    mutating func append(_ text: String) {
        let utf8 = Array(text.utf8)
        let count = UInt32(utf8.count)
        bytes += [UInt8(count >> 24), UInt8(count >> 16 & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff)]
        bytes += utf8
    }

    mutating func append(_ value: Int64?) {
        append(value.map(String.init) ?? "")
    }

    mutating func append(_ value: [UInt8]?) {
        append(value.map(Hex.encode) ?? "")
    }
}
