import COpenSSL

/// An `EVP_PKEY` made from raw key bytes, freed when this wrapper is released.
///
/// Keys keep theirs for their whole life rather than making one per operation: making an X25519 or Ed25519 private
/// `EVP_PKEY` computes its public key (a scalar multiplication, as costly as the operation itself) and looks the key
/// type up by name in the provider store.
///
/// `@unchecked Sendable`: the wrapped `EVP_PKEY` is never modified after it is made, and OpenSSL 3 allows a key that
/// is not modified to be used by several threads at once (openssl-threads(7)); each operation makes its own context.
final class RawKey: @unchecked Sendable {
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
