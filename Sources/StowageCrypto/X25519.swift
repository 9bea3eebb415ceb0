import COpenSSL

/// X25519 Diffie-Hellman key agreement (RFC 7748 section 5 and 6.1).
///
/// Devices hold an X25519 key pair; the key server wraps content keys to a device by agreeing a
/// shared secret with its public key and deriving a wrapping key from it with ``HKDF``. Use the raw
/// shared secret only as HKDF input, never directly as a key (RFC 7748 section 6.1).
public enum X25519 {
    static let keyCount = 32

    /// An X25519 private key: 32 random bytes, clamped by the scalar multiplication itself
    /// (RFC 7748 section 5, `decodeScalar25519`).
    public struct PrivateKey: Sendable {
        /// The 32 private bytes, in a zeroizing buffer.
        public let rawRepresentation: SecretBytes
        /// The 32-byte public key, `X25519(k, 9)` (RFC 7748 section 6.1).
        public let publicKey: [UInt8]
        /// The key as OpenSSL holds it, made once.
        private let key: RawKey

        /// Generates a new key from the CSPRNG.
        ///
        /// - Throws: ``CryptoError/randomFailure`` or ``CryptoError/openSSLFailure``.
        public static func generate() throws -> PrivateKey {
            try PrivateKey(rawRepresentation: SecretBytes.random(count: keyCount))
        }

        /// Restores a key from its 32 raw bytes.
        ///
        /// - Throws: ``CryptoError/invalidPrivateKey`` unless the key is 32 bytes OpenSSL accepts.
        public init(rawRepresentation: SecretBytes) throws {
            guard rawRepresentation.count == keyCount else { throw CryptoError.invalidPrivateKey }
            let key = try RawKey(privateKey: rawRepresentation, type: "X25519")
            self.publicKey = try key.publicKey(count: keyCount)
            self.rawRepresentation = rawRepresentation
            self.key = key
        }

        /// Computes the shared secret with a peer's public key.
        ///
        /// - Parameter peerPublicKey: The peer's 32-byte public key.
        /// - Returns: The 32-byte shared secret `X25519(k, peer)`.
        /// - Throws: ``CryptoError/invalidPublicKey`` if the key is not 32 bytes or the result is all
        ///   zeros, which happens for small-order points and which RFC 7748 section 6.1 says to reject.
        public func sharedSecret(with peerPublicKey: [UInt8]) throws -> SecretBytes {
            guard peerPublicKey.count == keyCount else { throw CryptoError.invalidPublicKey }
            let peerKey = try RawKey(publicKey: peerPublicKey, type: "X25519")
            guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else {
                throw LibCrypto.failure(.openSSLFailure)
            }
            defer { EVP_PKEY_CTX_free(context) }
            try LibCrypto.check(EVP_PKEY_derive_init(context))
            try LibCrypto.check(EVP_PKEY_derive_set_peer(context, peerKey.pointer), else: .invalidPublicKey)
            return try SecretBytes(count: keyCount) { secret in
                var length = secret.count
                // OpenSSL's X25519 derive already fails on an all-zero result; the check below keeps
                // that guarantee independent of the OpenSSL version.
                try LibCrypto.check(
                    EVP_PKEY_derive(context, secret.baseAddress?.assumingMemoryBound(to: UInt8.self), &length),
                    else: .invalidPublicKey
                )
                guard length == keyCount else { throw LibCrypto.failure(.openSSLFailure) }
                // Constant time: OR every byte together rather than stopping at the first non-zero one.
                var accumulated: UInt8 = 0
                for byte in secret { accumulated |= byte }
                guard accumulated != 0 else { throw CryptoError.invalidPublicKey }
            }
        }
    }
}
