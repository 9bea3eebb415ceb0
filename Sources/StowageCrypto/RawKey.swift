import COpenSSL

/// An `EVP_PKEY` made from raw key bytes, freed when this wrapper is released.
final class RawKey {
    let pointer: OpaquePointer

    /// Builds a private key; `type` is an OpenSSL key type name such as `"X25519"` or `"ED25519"`.
    init(privateKey: SecretBytes, type: String) throws {
        let created = privateKey.withUnsafeBytes { bytes in
            EVP_PKEY_new_raw_private_key_ex(nil, type, nil, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        guard let created else { throw LibCrypto.failure(.invalidPrivateKey) }
        pointer = created
    }

    /// Builds a public key; `type` is an OpenSSL key type name such as `"X25519"` or `"ED25519"`.
    init(publicKey: [UInt8], type: String) throws {
        let created = publicKey.withUnsafeBytes { bytes in
            EVP_PKEY_new_raw_public_key_ex(nil, type, nil, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        guard let created else { throw LibCrypto.failure(.invalidPublicKey) }
        pointer = created
    }

    deinit {
        // For private keys this cleanses the key material held by the provider.
        EVP_PKEY_free(pointer)
    }

    /// The raw public key bytes (`EVP_PKEY_get_raw_public_key`).
    func publicKey(count: Int) throws -> [UInt8] {
        var key = [UInt8](repeating: 0, count: count)
        var length = count
        try key.withUnsafeMutableBytes { bytes in
            try LibCrypto.check(EVP_PKEY_get_raw_public_key(pointer, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), &length))
        }
        guard length == count else { throw LibCrypto.failure(.openSSLFailure) }
        return key
    }
}
