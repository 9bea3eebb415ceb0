import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's default DRBG (`RAND_bytes`, NIST SP 800-90A).
///
/// Use it for IVs, nonces and identifiers. For keys use ``SecretBytes/random(count:)``, which writes
/// into memory that is cleansed on release.
public enum SecureRandom {
    /// Returns `count` random bytes.
    ///
    /// - Throws: ``CryptoError/randomFailure`` if the generator fails or `count` is negative.
    public static func bytes(count: Int) throws -> [UInt8] {
        guard count >= 0 else { throw CryptoError.randomFailure }
        // Never `unsafeUninitializedCapacity: 0`: it writes the shared empty array's count (see AESGCM.seal).
        guard count > 0 else { return [] }
        return try [UInt8](unsafeUninitializedCapacity: count) { buffer, initializedCount in
            initializedCount = 0
            try fill(UnsafeMutableRawBufferPointer(buffer))
            initializedCount = count
        }
    }

    /// Fills `buffer` with random bytes, in `int`-sized requests because `RAND_bytes` takes an `int`.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard let base = buffer.baseAddress else { return }
        var offset = 0
        while offset < buffer.count {
            let chunk = min(buffer.count - offset, LibCrypto.maximumUpdateLength)
            let result = RAND_bytes((base + offset).assumingMemoryBound(to: UInt8.self), Int32(chunk))
            try LibCrypto.check(result, else: .randomFailure)
            offset += chunk
        }
    }
}
