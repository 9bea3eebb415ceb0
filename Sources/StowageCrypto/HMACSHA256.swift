import COpenSSL

/// HMAC with SHA-256 (RFC 2104, FIPS 198-1), for authenticating protocol messages and tokens.
public enum HMACSHA256 {
    /// The length of a full HMAC-SHA-256 code.
    public static let byteCount = 32

    /// The 32-byte HMAC-SHA-256 of `message` under `key`.
    ///
    /// - Parameters:
    ///   - message: The bytes to authenticate.
    ///   - key: Any length; keys longer than 64 bytes are hashed first (RFC 2104 section 2).
    /// - Throws: ``CryptoError/openSSLFailure``.
    public static func authenticationCode(for message: [UInt8], key: SecretBytes) throws -> [UInt8] {
        guard key.count <= Int(Int32.max) else { throw CryptoError.invalidKeyLength }
        var code = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        let result = key.withUnsafeBytes { keyBytes in
            keyBytes.withNonNullBytes { keyPointer in
                message.withNonNullBytes { messagePointer in
                    code.withUnsafeMutableBytes { codeBytes in
                        HMAC(
                            EVP_sha256(),
                            keyPointer,
                            Int32(keyBytes.count),
                            messagePointer,
                            message.count,
                            codeBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                            &length
                        )
                    }
                }
            }
        }
        guard result != nil, length == byteCount else { throw LibCrypto.failure(.openSSLFailure) }
        return code
    }

    /// Whether `code` is the full 32-byte HMAC-SHA-256 of `message` under `key`.
    ///
    /// Compares in constant time (`CRYPTO_memcmp`), so a forger learns nothing from how long the
    /// check takes. Truncated codes are rejected: accepting a prefix would let a short guess pass.
    ///
    /// - Throws: ``CryptoError/openSSLFailure``.
    public static func isValid(_ code: [UInt8], for message: [UInt8], key: SecretBytes) throws -> Bool {
        let expected = try authenticationCode(for: message, key: key)
        guard code.count == expected.count else { return false }
        return code.withUnsafeBytes { given in
            expected.withUnsafeBytes { computed in
                CRYPTO_memcmp(given.baseAddress, computed.baseAddress, computed.count) == 0
            }
        }
    }
}
