import COpenSSL

/// AES-256-GCM authenticated encryption (NIST SP 800-38D) with a 12-byte nonce and a 16-byte tag.
///
/// Stowage seals content keys at rest with it, under a key-encryption key from ``HKDF``. A nonce must
/// never repeat under one key (SP 800-38D section 8): draw it from ``SecureRandom``.
///
/// ```swift
/// let nonce = try SecureRandom.bytes(count: 12)
/// let (ciphertext, tag) = try AESGCM.seal(keyBytes, key: kek, nonce: nonce, authenticating: keyID)
/// let key = try AESGCM.open(ciphertext, tag: tag, key: kek, nonce: nonce, authenticating: keyID)
/// ```
public enum AESGCM {
    private static let keyCount = 32
    /// 96 bits: the IV length SP 800-38D section 5.2.1.1 recommends, used directly as J0's prefix
    /// (section 7.1), and OpenSSL's default, so no `SET_IVLEN` is needed.
    private static let nonceCount = 12
    /// The full 128-bit tag; SP 800-38D section 5.2.1.2 allows shorter ones, we do not.
    private static let tagCount = 16

    /// Encrypts and authenticates `plaintext`, and authenticates `aad` without encrypting it.
    ///
    /// - Parameters:
    ///   - plaintext: The bytes to encrypt.
    ///   - key: 32 bytes.
    ///   - nonce: 12 bytes, unique per key.
    ///   - aad: Associated data bound to the ciphertext (for example a key ID), may be empty.
    /// - Returns: The ciphertext (same length as `plaintext`) and the 16-byte tag.
    /// - Throws: ``CryptoError/invalidKeyLength``, ``CryptoError/invalidNonceLength``, ``CryptoError/openSSLFailure``.
    public static func seal(
        _ plaintext: [UInt8],
        key: SecretBytes,
        nonce: [UInt8],
        authenticating aad: [UInt8] = []
    ) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        try plaintext.withUnsafeBytes { try seal($0, key: key, nonce: nonce, authenticating: aad) }
    }

    /// Encrypts and authenticates secret `plaintext` (such as a content key) without copying it out
    /// of its zeroizing buffer. See `seal(_:key:nonce:authenticating:)`.
    public static func seal(
        _ plaintext: SecretBytes,
        key: SecretBytes,
        nonce: [UInt8],
        authenticating aad: [UInt8] = []
    ) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        try plaintext.withUnsafeBytes { try seal($0, key: key, nonce: nonce, authenticating: aad) }
    }

    /// Checks the tag and decrypts.
    ///
    /// The plaintext is written straight into the returned ``SecretBytes``; when the tag is wrong that
    /// buffer is cleansed and nothing is returned (SP 800-38D section 7.2: output FAIL, no plaintext).
    ///
    /// - Parameters:
    ///   - ciphertext: The bytes from `seal(_:key:nonce:authenticating:)`.
    ///   - tag: The 16-byte tag.
    ///   - key: 32 bytes.
    ///   - nonce: The 12-byte nonce used to seal.
    ///   - aad: The same associated data as at sealing.
    /// - Throws: ``CryptoError/authenticationFailed`` if the tag does not verify or is not 16 bytes;
    ///   ``CryptoError/invalidKeyLength``, ``CryptoError/invalidNonceLength``, ``CryptoError/openSSLFailure``.
    public static func open(
        _ ciphertext: [UInt8],
        tag: [UInt8],
        key: SecretBytes,
        nonce: [UInt8],
        authenticating aad: [UInt8] = []
    ) throws -> SecretBytes {
        guard tag.count == tagCount else { throw CryptoError.authenticationFailed }
        let context = try makeContext(key: key, nonce: nonce, encrypting: false)
        defer { EVP_CIPHER_CTX_free(context) }
        try authenticate(aad, context: context)
        return try SecretBytes(count: ciphertext.count) { plaintext in
            let written = try ciphertext.withUnsafeBytes { input in
                guard let inputBase = input.baseAddress, let output = plaintext.baseAddress, !input.isEmpty else { return 0 }
                return try LibCrypto.cipherUpdate(context, input: inputBase, count: input.count, output: output)
            }
            guard written == ciphertext.count else { throw LibCrypto.failure(.openSSLFailure) }
            // OpenSSL copies the expected tag; the pointer is only read despite the `void *` parameter.
            try tag.withUnsafeBytes { tagBytes in
                let pointer = UnsafeMutableRawPointer(mutating: tagBytes.baseAddress)
                try LibCrypto.check(EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(tagCount), pointer))
            }
            try finalize(context, else: .authenticationFailed)
        }
    }

    private static func seal(
        _ plaintext: UnsafeRawBufferPointer,
        key: SecretBytes,
        nonce: [UInt8],
        authenticating aad: [UInt8]
    ) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        let context = try makeContext(key: key, nonce: nonce, encrypting: true)
        defer { EVP_CIPHER_CTX_free(context) }
        try authenticate(aad, context: context)
        // Nothing to encrypt (a check value seals an empty plaintext): no array made with `unsafeUninitializedCapacity: 0`,
        // which writes the count of the standard library's shared empty array, a data race ThreadSanitizer reported
        // between two threads sealing at once (`scripts/sanitize.sh thread`, 2026-11-27).
        let ciphertext: [UInt8] =
            plaintext.isEmpty
            ? []
            : try [UInt8](unsafeUninitializedCapacity: plaintext.count) { buffer, initializedCount in
                initializedCount = 0
                if let input = plaintext.baseAddress, let output = buffer.baseAddress {
                    initializedCount = try LibCrypto.cipherUpdate(context, input: input, count: plaintext.count, output: output)
                }
            }
        guard ciphertext.count == plaintext.count else { throw LibCrypto.failure(.openSSLFailure) }
        try finalize(context, else: .openSSLFailure)
        var tag = [UInt8](repeating: 0, count: tagCount)
        try tag.withUnsafeMutableBytes { tagBytes in
            try LibCrypto.check(EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(tagCount), tagBytes.baseAddress))
        }
        return (ciphertext, tag)
    }

    private static func makeContext(key: SecretBytes, nonce: [UInt8], encrypting: Bool) throws -> OpaquePointer {
        guard key.count == keyCount else { throw CryptoError.invalidKeyLength }
        guard nonce.count == nonceCount else { throw CryptoError.invalidNonceLength }
        let cipher = try CipherAlgorithm.aes256GCM.cipher()
        guard let context = EVP_CIPHER_CTX_new() else { throw LibCrypto.failure(.openSSLFailure) }
        let result = key.withUnsafeBytes { keyBytes in
            nonce.withUnsafeBytes { nonceBytes in
                EVP_CipherInit_ex(
                    context,
                    cipher,
                    nil,
                    keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    nonceBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    encrypting ? 1 : 0
                )
            }
        }
        guard result == 1 else {
            EVP_CIPHER_CTX_free(context)
            throw LibCrypto.failure(.openSSLFailure)
        }
        return context
    }

    /// Feeds the associated data: an update with a null output buffer is GHASH-only input.
    private static func authenticate(_ aad: [UInt8], context: OpaquePointer) throws {
        guard !aad.isEmpty else { return }
        guard aad.count <= Int(Int32.max) else { throw CryptoError.openSSLFailure }
        var written: Int32 = 0
        let result = aad.withUnsafeBytes { bytes in
            EVP_CipherUpdate(context, nil, &written, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(bytes.count))
        }
        try LibCrypto.check(result)
    }

    /// GCM's final step writes no bytes (it is a stream mode) but computes or checks the tag.
    private static func finalize(_ context: OpaquePointer, else error: CryptoError) throws {
        var written: Int32 = 0
        var scratch: (UInt64, UInt64) = (0, 0)
        let result = withUnsafeMutableBytes(of: &scratch) { bytes in
            EVP_CipherFinal_ex(context, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), &written)
        }
        try LibCrypto.check(result, else: error)
    }
}
