import COpenSSL

/// Streaming AES-CTR (NIST SP 800-38A section 6.5) over one OpenSSL `EVP_CIPHER_CTX`, AES-128 or AES-256 by the key's
/// length: the IV is the initial 128-bit counter block, incremented big-endian for each block.
///
/// HLS `METHOD=AES-256-CTR`, as Shaka Player accepts it, encrypts a whole segment this way; ISO/IEC 23001-7 `cenc`
/// (HLS `SAMPLE-AES-CTR`) encrypts each sample's protected bytes with AES-128-CTR from the sample's IV
/// (``reset(iv:)``). No padding, so the output has the input's length and encryption and decryption are the same
/// operation.
public final class AESCTRCipher {
    private let context: OpaquePointer

    /// - Parameters:
    ///   - key: 32 bytes (AES-256), or 16 (AES-128).
    ///   - iv: the 16-byte initial counter block.
    /// - Throws: ``CryptoError/invalidKeyLength``, ``CryptoError/invalidIVLength``, ``CryptoError/openSSLFailure``.
    public init(key: SecretBytes, iv: [UInt8]) throws {
        guard key.count == 32 || key.count == 16 else { throw CryptoError.invalidKeyLength }
        guard iv.count == 16 else { throw CryptoError.invalidIVLength }
        let cipher = try (key.count == 32 ? CipherAlgorithm.aes256CTR : CipherAlgorithm.aes128CTR).cipher()
        guard let context = EVP_CIPHER_CTX_new() else { throw LibCrypto.failure(.openSSLFailure) }
        do {
            let result = key.withUnsafeBytes { keyBytes in
                iv.withUnsafeBytes { ivBytes in
                    EVP_CipherInit_ex(
                        context,
                        cipher,
                        nil,
                        keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        ivBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        1
                    )
                }
            }
            try LibCrypto.check(result)
        } catch {
            EVP_CIPHER_CTX_free(context)
            throw error
        }
        self.context = context
    }

    deinit {
        EVP_CIPHER_CTX_free(context)
    }

    /// Starts the keystream again from the counter block `iv` (16 bytes), keeping the key.
    ///
    /// - Throws: ``CryptoError/invalidIVLength`` unless `iv` is 16 bytes.
    public func reset(iv: UnsafeRawBufferPointer) throws {
        guard iv.count == 16, let base = iv.baseAddress else { throw CryptoError.invalidIVLength }
        try LibCrypto.check(EVP_CipherInit_ex(context, nil, nil, nil, base.assumingMemoryBound(to: UInt8.self), -1))
    }

    /// Transforms the next bytes of the stream into `output` (at least `input.count` bytes); returns the count written,
    /// always `input.count`.
    public func update(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int {
        precondition(output.count >= input.count, "AESCTRCipher.update needs input.count bytes of output")
        guard let inputBase = input.baseAddress, let outputBase = output.baseAddress, !input.isEmpty else { return 0 }
        return try LibCrypto.cipherUpdate(context, input: inputBase, count: input.count, output: outputBase)
    }

    /// Transforms the next bytes of the stream.
    public func update(_ input: [UInt8]) throws -> [UInt8] {
        // Never `unsafeUninitializedCapacity: 0`: it writes the shared empty array's count (see AESGCM.seal).
        guard !input.isEmpty else { return [] }
        return try [UInt8](unsafeUninitializedCapacity: input.count) { buffer, initializedCount in
            initializedCount = 0
            initializedCount = try input.withUnsafeBytes { try update($0, into: UnsafeMutableRawBufferPointer(buffer)) }
        }
    }
}
