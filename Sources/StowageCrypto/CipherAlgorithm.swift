import COpenSSL

/// An OpenSSL cipher implementation fetched once per process (`EVP_CIPHER_fetch`).
///
/// Passing a fetched `EVP_CIPHER` to `EVP_CipherInit_ex` skips the implicit fetch (a locked lookup
/// in the provider store) that the legacy `EVP_aes_*()` getters trigger on every initialization.
struct CipherAlgorithm: @unchecked Sendable {
    // @unchecked Sendable: a fetched EVP_CIPHER is immutable and reference counted with atomics;
    // OpenSSL 3 documents fetched algorithms as safe to share between threads
    // (crypto(7), "Fetching algorithms"). It is never freed: it lives as long as the process.
    private let pointer: OpaquePointer?

    private init(name: String) {
        pointer = EVP_CIPHER_fetch(nil, name, nil)
        ERR_clear_error()
    }

    /// The fetched cipher, or ``CryptoError/openSSLFailure`` if the default provider lacks it.
    func cipher() throws -> OpaquePointer {
        guard let pointer else { throw LibCrypto.failure(.openSSLFailure) }
        return pointer
    }

    static let aes128CBC = CipherAlgorithm(name: "AES-128-CBC")
    static let aes256CBC = CipherAlgorithm(name: "AES-256-CBC")
    static let aes256GCM = CipherAlgorithm(name: "AES-256-GCM")
    static let aes256CTR = CipherAlgorithm(name: "AES-256-CTR")
    static let aes128CTR = CipherAlgorithm(name: "AES-128-CTR")
}
