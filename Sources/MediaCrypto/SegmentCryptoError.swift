/// A segment that cannot be decrypted or encrypted: what went wrong and to which segment.
public struct SegmentCryptoError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Sendable {
        case badPadding = "bad_padding"
        case truncatedSegment = "truncated_segment"
        case invalidKey = "invalid_key"
        case invalidIV = "invalid_iv"
        case cryptoFailure = "crypto_failure"
    }

    private let _code: Code
    /// The segment concerned (its URI or file name).
    public let segment: String

    private init(_ code: Code, segment: String) {
        self._code = code
        self.segment = segment
    }

    /// The stable error code, e.g. `bad_padding`.
    public var code: String { _code.rawValue }

    public var description: String {
        switch _code {
        case .badPadding:
            "segment \(segment): the PKCS#7 padding is wrong after decryption; the key or IV is wrong, or the file is damaged"
        case .truncatedSegment:
            "segment \(segment): the encrypted data is not a whole number of 16-byte blocks; the file is truncated"
        case .invalidKey: "segment \(segment): the key has the wrong length for this method"
        case .invalidIV: "segment \(segment): the IV must be 16 bytes"
        case .cryptoFailure: "segment \(segment): OpenSSL refused the operation"
        }
    }

    /// Wrong padding at the end of a whole-segment decryption: wrong key, wrong IV or damaged data.
    public static func badPadding(segment: String) -> Self { .init(.badPadding, segment: segment) }
    /// The ciphertext ends inside a block.
    public static func truncatedSegment(segment: String) -> Self { .init(.truncatedSegment, segment: segment) }
    /// A key of the wrong length for the method.
    public static func invalidKey(segment: String) -> Self { .init(.invalidKey, segment: segment) }
    /// An IV that is not 16 bytes.
    public static func invalidIV(segment: String) -> Self { .init(.invalidIV, segment: segment) }
    /// Any other failure reported by the cipher.
    public static func cryptoFailure(segment: String) -> Self { .init(.cryptoFailure, segment: segment) }
}
