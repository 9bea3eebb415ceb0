import COpenSSL

/// Ed25519 signatures (RFC 8032 section 5.1), pure mode without context or prehash.
///
/// The key server signs lease payloads with it and clients verify them with the server's public key.
public enum Ed25519 {
    static let keyCount = 32
    static let signatureCount = 64

    /// An Ed25519 private key, held as its 32-byte seed (RFC 8032 section 5.1.5).
    public struct PrivateKey: Sendable {
        /// The 32-byte seed, in a zeroizing buffer.
        public let rawRepresentation: SecretBytes
        /// The matching public key.
        public let publicKey: PublicKey
        /// The key as OpenSSL holds it, made once.
        private let key: RawKey

        /// Generates a new key from a random 32-byte seed (RFC 8032 section 5.1.5 step 1).
        ///
        /// - Throws: ``CryptoError/randomFailure`` or ``CryptoError/openSSLFailure``.
        public static func generate() throws -> PrivateKey {
            try PrivateKey(rawRepresentation: SecretBytes.random(count: keyCount))
        }

        /// Restores a key from its 32-byte seed.
        ///
        /// - Throws: ``CryptoError/invalidPrivateKey`` unless the seed is 32 bytes.
        public init(rawRepresentation: SecretBytes) throws {
            guard rawRepresentation.count == keyCount else { throw CryptoError.invalidPrivateKey }
            let key = try RawKey(privateKey: rawRepresentation, type: "ED25519")
            self.publicKey = try PublicKey(verifiedRawRepresentation: key.publicKey(count: keyCount))
            self.rawRepresentation = rawRepresentation
            self.key = key
        }

        /// Signs `message` (RFC 8032 section 5.1.6). Ed25519 is deterministic: the same key and
        /// message always give the same 64 bytes.
        ///
        /// - Throws: ``CryptoError/openSSLFailure``.
        public func signature(for message: [UInt8]) throws -> [UInt8] {
            guard let context = EVP_MD_CTX_new() else { throw LibCrypto.failure(.openSSLFailure) }
            defer { EVP_MD_CTX_free(context) }
            // No digest name: Ed25519 hashes internally with SHA-512 and takes the message whole.
            try LibCrypto.check(EVP_DigestSignInit(context, nil, nil, nil, key.pointer))
            var signature = [UInt8](repeating: 0, count: signatureCount)
            var length = signatureCount
            try signature.withUnsafeMutableBytes { signatureBytes in
                try message.withNonNullBytes { messageBytes in
                    try LibCrypto.check(
                        EVP_DigestSign(
                            context,
                            signatureBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                            &length,
                            messageBytes,
                            message.count
                        )
                    )
                }
            }
            guard length == signatureCount else { throw LibCrypto.failure(.openSSLFailure) }
            return signature
        }
    }

    /// An Ed25519 public key: the 32-byte encoding of the point A (RFC 8032 section 5.1.2).
    public struct PublicKey: Sendable, Hashable {
        /// The 32-byte encoded public key.
        public let rawRepresentation: [UInt8]
        /// The key as OpenSSL holds it, made once (nil only if OpenSSL refused a key it made itself).
        private let key: RawKey?

        /// Wraps a 32-byte encoded public key.
        ///
        /// - Throws: ``CryptoError/invalidPublicKey`` unless it is 32 bytes OpenSSL accepts.
        public init(rawRepresentation: [UInt8]) throws {
            guard rawRepresentation.count == keyCount else { throw CryptoError.invalidPublicKey }
            key = try RawKey(publicKey: rawRepresentation, type: "ED25519")
            self.rawRepresentation = rawRepresentation
        }

        fileprivate init(verifiedRawRepresentation: [UInt8]) {
            rawRepresentation = verifiedRawRepresentation
            key = try? RawKey(publicKey: verifiedRawRepresentation, type: "ED25519")
            ERR_clear_error()
        }

        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
        public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }

        /// Whether `signature` is a valid signature of `message` by this key (RFC 8032 section 5.1.7).
        ///
        /// Returns `false` for any malformed input (wrong signature length, a point that does not
        /// decode, S out of range) instead of throwing, so callers have one outcome to check.
        public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
            guard signature.count == signatureCount else { return false }
            guard let key, let context = EVP_MD_CTX_new() else {
                ERR_clear_error()
                return false
            }
            defer { EVP_MD_CTX_free(context) }
            guard EVP_DigestVerifyInit(context, nil, nil, nil, key.pointer) == 1 else {
                ERR_clear_error()
                return false
            }
            let result = signature.withNonNullBytes { signatureBytes in
                message.withNonNullBytes { messageBytes in
                    EVP_DigestVerify(context, signatureBytes, signature.count, messageBytes, message.count)
                }
            }
            // A failed verification leaves a reason on the error queue; drop it.
            ERR_clear_error()
            return result == 1
        }
    }
}
