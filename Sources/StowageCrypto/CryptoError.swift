public import StowageCore

/// A failure in a cryptographic operation, identified by a stable code.
///
/// Modelled on async-http-client's `HTTPClientError`: a private code enum behind public static
/// constants, so callers compare against `CryptoError.badPadding` and metrics or JSON use
/// ``code`` (stable snake_case). The text never carries key bytes or other secret input; two
/// errors are equal when their codes are equal.
///
/// ```swift
/// do {
///     _ = try AESCBCCipher.decrypt(segment, key: key, iv: iv)
/// } catch let error as CryptoError where error == .badPadding {
///     // wrong key, or a corrupt segment
/// }
/// ```
public struct CryptoError: Error, Hashable, Sendable, CustomStringConvertible {

    private let underlying: ErrorCode

    private init(_ code: ErrorCode) {
        self.underlying = code
    }

    /// The stable code of this error, for logs, metrics and JSON (for example `bad_padding`).
    public var code: ErrorCode { underlying }

    /// What went wrong and what usually causes it. Never contains key bytes or other input data.
    public var description: String {
        switch underlying {
        case .invalidKeyLength:
            "The key has the wrong length for this algorithm (AES-CBC takes 16 or 32 bytes, AES-256-GCM 32 bytes)."
        case .invalidIVLength:
            "The initialization vector must be 16 bytes."
        case .invalidNonceLength:
            "The AES-GCM nonce must be 12 bytes."
        case .badPadding:
            "The decrypted data does not end in valid PKCS#7 padding; the key or IV is wrong or the data is corrupt."
        case .truncatedInput:
            "The input ends inside a 16-byte AES block; the data is truncated or was not encrypted with this mode."
        case .authenticationFailed:
            "The AES-GCM tag does not match; the data, associated data, key or nonce is wrong or was tampered with."
        case .invalidPublicKey:
            "The public key is malformed or unusable (wrong length, or a low-order point)."
        case .invalidPrivateKey:
            "The private key is malformed (it must be 32 bytes)."
        case .signatureInvalid:
            "The signature does not verify for this message and public key."
        case .randomFailure:
            "The system random number generator failed to produce bytes."
        default:
            "An OpenSSL operation failed unexpectedly."
        }
    }

    /// A symmetric key is not a length the algorithm accepts.
    public static let invalidKeyLength = CryptoError(.invalidKeyLength)
    /// An AES-CBC initialization vector is not 16 bytes.
    public static let invalidIVLength = CryptoError(.invalidIVLength)
    /// An AES-GCM nonce is not 12 bytes.
    public static let invalidNonceLength = CryptoError(.invalidNonceLength)
    /// AES-CBC decryption ended in bytes that are not PKCS#7 padding (RFC 5652 section 6.3).
    public static let badPadding = CryptoError(.badPadding)
    /// AES-CBC input did not end on a 16-byte block boundary where it had to.
    public static let truncatedInput = CryptoError(.truncatedInput)
    /// An AES-GCM tag did not verify (NIST SP 800-38D section 7.2 returns FAIL).
    public static let authenticationFailed = CryptoError(.authenticationFailed)
    /// A public key has the wrong length, or an X25519 exchange with it gave the all-zero secret.
    public static let invalidPublicKey = CryptoError(.invalidPublicKey)
    /// A private key has the wrong length or OpenSSL refused it.
    public static let invalidPrivateKey = CryptoError(.invalidPrivateKey)
    /// A signature failed to verify, for callers that turn a `false` verification into an error.
    public static let signatureInvalid = CryptoError(.signatureInvalid)
    /// The random number generator failed.
    public static let randomFailure = CryptoError(.randomFailure)
    /// OpenSSL reported a failure that is not one of the cases above (usually out of memory).
    public static let openSSLFailure = CryptoError(.openSSLFailure)
}

extension CryptoError: StowageError {
    public var message: String { description }
}
