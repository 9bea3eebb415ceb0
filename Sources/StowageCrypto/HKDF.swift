import COpenSSL

/// HKDF with SHA-256 (RFC 5869), through OpenSSL's `EVP_KDF` "HKDF" in extract-then-expand mode.
///
/// Derives wrapping keys from X25519 shared secrets and the local key-encryption key from the
/// data-directory secret and the machine ID.
///
/// ```swift
/// let kek = try HKDF.deriveKey(inputKeyMaterial: secret, salt: machineID, info: Array("stowage kek v1".utf8), outputByteCount: 32)
/// ```
public enum HKDF {
    /// SHA-256's output length, HashLen in RFC 5869.
    private static let hashCount = 32

    /// OpenSSL's HKDF, fetched once per process rather than at every derivation (a locked lookup in the provider store).
    private struct Fetched: @unchecked Sendable {
        // @unchecked Sendable: a fetched EVP_KDF is immutable and shared between threads by design (crypto(7),
        // "Fetching algorithms"); it lives as long as the process.
        let pointer: OpaquePointer?
    }
    private static let fetched: Fetched = {
        let pointer = EVP_KDF_fetch(nil, "HKDF", nil)
        ERR_clear_error()
        return Fetched(pointer: pointer)
    }()

    /// Derives `outputByteCount` bytes of key material.
    ///
    /// - Parameters:
    ///   - inputKeyMaterial: IKM, the secret to derive from (not empty).
    ///   - salt: Optional non-secret salt; empty means HashLen zero bytes (RFC 5869 section 2.2).
    ///   - info: Context that binds the output to its purpose (RFC 5869 section 3.2); may be empty.
    ///   - outputByteCount: L, 1...8160 (255 * HashLen, RFC 5869 section 2.3).
    /// - Returns: The output keying material, written straight into a zeroizing buffer.
    /// - Throws: ``CryptoError/invalidKeyLength`` if the IKM is empty or L is out of range,
    ///   ``CryptoError/openSSLFailure`` otherwise.
    public static func deriveKey(
        inputKeyMaterial: SecretBytes,
        salt: [UInt8],
        info: [UInt8],
        outputByteCount: Int
    ) throws -> SecretBytes {
        guard inputKeyMaterial.count > 0, (1...(255 * hashCount)).contains(outputByteCount) else {
            throw CryptoError.invalidKeyLength
        }
        guard let kdf = fetched.pointer else { throw LibCrypto.failure(.openSSLFailure) }
        guard let context = EVP_KDF_CTX_new(kdf) else { throw LibCrypto.failure(.openSSLFailure) }
        // EVP_KDF_CTX_free cleanses the copies of key, salt and info the provider keeps.
        defer { EVP_KDF_CTX_free(context) }

        return try SecretBytes(count: outputByteCount) { output in
            try inputKeyMaterial.withUnsafeBytes { key in
                try salt.withUnsafeBytes { salt in
                    try info.withUnsafeBytes { info in
                        try withParameters(key: key, salt: salt, info: info) { parameters in
                            let result = EVP_KDF_derive(
                                context,
                                output.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                output.count,
                                parameters
                            )
                            try LibCrypto.check(result)
                        }
                    }
                }
            }
        }
    }

    /// Builds the `OSSL_PARAM` array for HKDF-SHA256 over the given buffers, valid during `body`.
    private static func withParameters<R>(
        key: UnsafeRawBufferPointer,
        salt: UnsafeRawBufferPointer,
        info: UnsafeRawBufferPointer,
        _ body: (UnsafePointer<OSSL_PARAM>) throws -> R
    ) rethrows -> R {
        // Names from <openssl/core_names.h>: OSSL_KDF_PARAM_DIGEST, _KEY, _SALT, _INFO; then the value "SHA256".
        try LibCrypto.withCStrings(["digest", "key", "salt", "info", "SHA256"]) { strings in
            // OSSL_PARAM takes `void *` and `char *`, but derivation only reads these buffers.
            var parameters = [
                OSSL_PARAM_construct_utf8_string(strings[0], UnsafeMutablePointer(mutating: strings[4]), 0),
                OSSL_PARAM_construct_octet_string(strings[1], UnsafeMutableRawPointer(mutating: key.baseAddress), key.count),
            ]
            // An absent salt is HashLen zeros (RFC 5869 section 2.2), and HMAC pads an empty key with
            // zeros, so leaving it out is the same as passing it empty.
            if !salt.isEmpty {
                parameters.append(
                    OSSL_PARAM_construct_octet_string(strings[2], UnsafeMutableRawPointer(mutating: salt.baseAddress), salt.count)
                )
            }
            if !info.isEmpty {
                parameters.append(
                    OSSL_PARAM_construct_octet_string(strings[3], UnsafeMutableRawPointer(mutating: info.baseAddress), info.count)
                )
            }
            parameters.append(OSSL_PARAM_construct_end())
            return try parameters.withUnsafeBufferPointer { try body($0.baseAddress!) }
        }
    }
}
