import StowageCrypto

/// The protocol's device ID: the first 16 bytes of SHA-256(signingPublicKey || agreementPublicKey), as 32
/// lowercase hex digits (docs/key-protocol.md, "Device identity").
public enum DeviceIdentifier {
    /// - Parameters:
    ///   - signingKey: the 32-byte Ed25519 public key.
    ///   - agreementKey: the 32-byte X25519 public key.
    public static func make(signingKey: [UInt8], agreementKey: [UInt8]) -> String {
        Hex.encode(SHA256Hasher.hash(signingKey + agreementKey).prefix(16))
    }
}
