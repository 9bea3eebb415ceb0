import COpenSSL

/// Streaming AES-CBC (NIST SP 800-38A section 6.2) over one OpenSSL `EVP_CIPHER_CTX`:
/// AES-128 with a 16-byte key, AES-256 with a 32-byte key.
///
/// HLS uses it twice: whole-segment `METHOD=AES-128` is AES-128-CBC with PKCS#7 padding over the
/// entire segment (RFC 8216bis section 5.2), and `SAMPLE-AES` encrypts whole 16-byte blocks of
/// samples without padding, restarting the chain with the same IV for each NAL unit or sample.
///
/// A cipher is one stream: `update` any number of times, then `finish` once; `reset(iv:)`
/// re-arms it for the next stream with the same key. It holds mutable OpenSSL state, so it is not
/// `Sendable`: create one per stream or per task.
///
/// ```swift
/// let cipher = try AESCBCCipher(key: key, iv: iv, direction: .decrypt, padding: true)
/// for chunk in segmentChunks { plaintext += try cipher.update(chunk) }
/// plaintext += try cipher.finish()
/// ```
public final class AESCBCCipher {
    /// Whether the cipher encrypts or decrypts.
    public enum Direction: Sendable {
        /// Plaintext in, ciphertext out.
        case encrypt
        /// Ciphertext in, plaintext out.
        case decrypt
    }

    /// The direction chosen at `init`.
    public let direction: Direction
    /// Whether `finish` adds (encrypt) or checks and strips (decrypt) PKCS#7 padding.
    public let padding: Bool

    private let context: OpaquePointer
    /// Bytes fed since the last (re)initialization; only its remainder modulo 16 and whether it is
    /// zero matter, to tell a truncated stream from bad padding in `finish`.
    private var streamedByteCount = 0
    /// `finish` was called; a second `EVP_CipherFinal_ex` would emit another padding block.
    private var isFinished = false

    private static let blockSize = 16

    /// Creates a cipher for one stream.
    ///
    /// - Parameters:
    ///   - key: 16 bytes for AES-128 or 32 bytes for AES-256. OpenSSL copies it into its key schedule,
    ///     which it cleanses when the cipher is released.
    ///   - iv: The 16-byte initialization vector.
    ///   - direction: Encrypt or decrypt.
    ///   - padding: PKCS#7 padding (RFC 5652 section 6.3) at ``finish()``; `false` for SAMPLE-AES.
    /// - Throws: ``CryptoError/invalidKeyLength``, ``CryptoError/invalidIVLength``, or
    ///   ``CryptoError/openSSLFailure``.
    public init(key: SecretBytes, iv: [UInt8], direction: Direction, padding: Bool) throws {
        let algorithm: CipherAlgorithm
        switch key.count {
        case 16: algorithm = .aes128CBC
        case 32: algorithm = .aes256CBC
        default: throw CryptoError.invalidKeyLength
        }
        guard iv.count == Self.blockSize else { throw CryptoError.invalidIVLength }
        let cipher = try algorithm.cipher()
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
                        direction == .encrypt ? 1 : 0
                    )
                }
            }
            try LibCrypto.check(result)
            try LibCrypto.check(EVP_CIPHER_CTX_set_padding(context, padding ? 1 : 0))
        } catch {
            EVP_CIPHER_CTX_free(context)
            throw error
        }
        self.context = context
        self.direction = direction
        self.padding = padding
    }

    deinit {
        // Frees the provider context, which cleanses the expanded key schedule.
        EVP_CIPHER_CTX_free(context)
    }

    /// Re-arms the cipher for a new stream with a new IV, keeping key, direction and padding.
    ///
    /// Cheap: `EVP_CipherInit_ex` with no cipher and no key reuses the context and its key schedule.
    /// SAMPLE-AES calls this for every NAL unit or audio frame, which restart the CBC chain with the
    /// segment's IV (Apple, "MPEG-2 Stream Encryption Format for HTTP Live Streaming", 2.2.2 and 2.3).
    ///
    /// - Throws: ``CryptoError/invalidIVLength`` unless `iv` is 16 bytes.
    public func reset(iv: [UInt8]) throws {
        try iv.withUnsafeBytes { try reset(iv: $0) }
    }

    /// Re-arms the cipher for a new stream with a new IV read from `iv`, keeping key, direction and
    /// padding. See `reset(iv:)`.
    ///
    /// - Throws: ``CryptoError/invalidIVLength`` unless `iv` is 16 bytes.
    public func reset(iv: UnsafeRawBufferPointer) throws {
        guard iv.count == Self.blockSize, let base = iv.baseAddress else { throw CryptoError.invalidIVLength }
        // enc = -1 keeps the direction; OpenSSL re-applies the no-padding flag to the provider context.
        try LibCrypto.check(EVP_CipherInit_ex(context, nil, nil, nil, base.assumingMemoryBound(to: UInt8.self), -1))
        streamedByteCount = 0
        isFinished = false
    }

    /// Feeds `input` and writes whatever whole blocks are ready into `output`.
    ///
    /// Allocates nothing. With padding on decrypt, OpenSSL holds back the last full block until
    /// ``finish(into:)``, since it may be the padding block. `input` and `output` may be the same
    /// memory but must not partially overlap.
    ///
    /// - Parameters:
    ///   - input: The next bytes of the stream, any length.
    ///   - output: Room for at least `input.count + 16` bytes.
    /// - Returns: The number of bytes written to the start of `output`.
    /// - Throws: ``CryptoError/openSSLFailure``.
    public func update(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int {
        precondition(!isFinished, "AESCBCCipher.update after finish(); call reset(iv:) to start a new stream")
        precondition(output.count >= input.count + Self.blockSize, "AESCBCCipher.update needs input.count + 16 bytes of output")
        guard let inputBase = input.baseAddress, let outputBase = output.baseAddress, !input.isEmpty else { return 0 }
        let written = try LibCrypto.cipherUpdate(context, input: inputBase, count: input.count, output: outputBase)
        streamedByteCount &+= input.count
        return written
    }

    /// Feeds `input` and returns the output that is ready (see ``update(_:into:)``).
    public func update(_ input: [UInt8]) throws -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: input.count + Self.blockSize) { buffer, initializedCount in
            initializedCount = 0
            initializedCount = try input.withUnsafeBytes { try update($0, into: UnsafeMutableRawBufferPointer(buffer)) }
        }
    }

    /// Ends the stream and writes the last bytes into `output`.
    ///
    /// With padding, encryption appends PKCS#7 padding and decryption checks and strips it. Without
    /// padding, the stream must have been whole blocks. Call `reset(iv:)` before reusing the
    /// cipher, even after a throw.
    ///
    /// - Parameter output: Room for at least 16 bytes.
    /// - Returns: The number of bytes written (0...16).
    /// - Throws: ``CryptoError/truncatedInput`` if the input did not end on a block boundary where it
    ///   must (or a padded decryption got no block at all), ``CryptoError/badPadding`` if the last
    ///   decrypted block is not valid PKCS#7 padding.
    public func finish(into output: UnsafeMutableRawBufferPointer) throws -> Int {
        precondition(!isFinished, "AESCBCCipher.finish called twice; call reset(iv:) to start a new stream")
        precondition(output.count >= Self.blockSize, "AESCBCCipher.finish needs 16 bytes of output")
        isFinished = true
        let endsInsideBlock = streamedByteCount % Self.blockSize != 0
        switch (direction, padding) {
        case (.encrypt, true):
            break
        case (.decrypt, true):
            // PKCS#7 ciphertext is one or more whole blocks (RFC 5652 section 6.3 always adds padding).
            guard !endsInsideBlock, streamedByteCount > 0 else { throw CryptoError.truncatedInput }
        case (_, false):
            guard !endsInsideBlock else { throw CryptoError.truncatedInput }
        }
        var written: Int32 = 0
        let result = EVP_CipherFinal_ex(context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &written)
        try LibCrypto.check(result, else: direction == .decrypt && padding ? .badPadding : .openSSLFailure)
        return Int(written)
    }

    /// Ends the stream and returns the last bytes (see ``finish(into:)``).
    public func finish() throws -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: Self.blockSize) { buffer, initializedCount in
            initializedCount = 0
            initializedCount = try finish(into: UnsafeMutableRawBufferPointer(buffer))
        }
    }

    /// Encrypts or decrypts whole blocks in place, continuing the current CBC chain, in one
    /// `EVP_CipherUpdate` call.
    ///
    /// For ciphers without padding (SAMPLE-AES, `cbcs`): the encrypted part of a NAL unit or sample is
    /// whole blocks, transformed where it lies. Calling this again continues the same chain, which is
    /// what `cbcs` needs across the encrypted blocks of one subsample (ISO/IEC 23001-7 section 10.4.2);
    /// call `reset(iv:)` to restart it.
    ///
    /// - Parameter buffer: The blocks; its count must be a multiple of 16.
    /// - Throws: ``CryptoError/truncatedInput`` if `buffer.count` is not a multiple of 16.
    public func transformBlocksInPlace(_ buffer: UnsafeMutableRawBufferPointer) throws {
        precondition(!padding, "AESCBCCipher.transformBlocksInPlace needs a cipher created with padding: false")
        precondition(!isFinished, "AESCBCCipher.transformBlocksInPlace after finish(); call reset(iv:) first")
        precondition(streamedByteCount % Self.blockSize == 0, "AESCBCCipher.transformBlocksInPlace after a partial-block update")
        guard buffer.count % Self.blockSize == 0 else { throw CryptoError.truncatedInput }
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        let written = try LibCrypto.cipherUpdate(context, input: UnsafeRawPointer(base), count: buffer.count, output: base)
        guard written == buffer.count else { throw LibCrypto.failure(.openSSLFailure) }
        streamedByteCount &+= buffer.count
    }

    /// Decrypts a whole message in one call.
    ///
    /// - Parameters:
    ///   - data: The ciphertext.
    ///   - key: 16 or 32 bytes.
    ///   - iv: 16 bytes.
    ///   - padding: Whether to check and strip PKCS#7 padding (HLS `METHOD=AES-128` segments: yes).
    /// - Throws: As ``init(key:iv:direction:padding:)`` and ``finish(into:)``.
    public static func decrypt(_ data: [UInt8], key: SecretBytes, iv: [UInt8], padding: Bool = true) throws -> [UInt8] {
        try oneShot(data, cipher: AESCBCCipher(key: key, iv: iv, direction: .decrypt, padding: padding))
    }

    /// Encrypts a whole message in one call.
    ///
    /// - Parameters:
    ///   - data: The plaintext.
    ///   - key: 16 or 32 bytes.
    ///   - iv: 16 bytes.
    ///   - padding: Whether to append PKCS#7 padding; without it `data.count` must be a multiple of 16.
    /// - Throws: As ``init(key:iv:direction:padding:)`` and ``finish(into:)``.
    public static func encrypt(_ data: [UInt8], key: SecretBytes, iv: [UInt8], padding: Bool = true) throws -> [UInt8] {
        try oneShot(data, cipher: AESCBCCipher(key: key, iv: iv, direction: .encrypt, padding: padding))
    }

    private static func oneShot(_ data: [UInt8], cipher: AESCBCCipher) throws -> [UInt8] {
        // update may write up to count + 15 bytes and finish up to 16; one buffer holds both.
        try [UInt8](unsafeUninitializedCapacity: data.count + 2 * blockSize) { buffer, initializedCount in
            initializedCount = 0
            let output = UnsafeMutableRawBufferPointer(buffer)
            let updated = try data.withUnsafeBytes { try cipher.update($0, into: output) }
            let finished = try cipher.finish(into: UnsafeMutableRawBufferPointer(rebasing: output[updated...]))
            initializedCount = updated + finished
        }
    }
}

@available(*, unavailable, message: "AESCBCCipher holds mutable OpenSSL state; create one per stream or task")
extension AESCBCCipher: Sendable {}
