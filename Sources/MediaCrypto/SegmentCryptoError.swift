public import StowageCore

/// A segment that cannot be decrypted or encrypted: what went wrong and to which segment.
public struct SegmentCryptoError: Error, Hashable, Sendable, CustomStringConvertible {
    private typealias Code = ErrorCode

    private let _code: Code
    /// The segment concerned (its URI or file name).
    public let segment: String
    /// What exactly is wrong, for container errors (`PES header at byte 376 claims 90000 bytes`); empty otherwise.
    public let detail: String

    private init(_ code: Code, segment: String, detail: String = "") {
        self._code = code
        self.segment = segment
        self.detail = detail
    }

    /// The stable error code, e.g. `bad_padding`.
    public var code: ErrorCode { _code }

    public var description: String {
        switch _code {
        case .badPadding:
            "segment \(segment): the PKCS#7 padding is wrong after decryption; the key or IV is wrong, or the file is damaged"
        case .truncatedSegment:
            "segment \(segment): the encrypted data is not a whole number of 16-byte blocks; the file is truncated"
        case .invalidKey: "segment \(segment): the key has the wrong length for this method"
        case .invalidIV: "segment \(segment): the IV must be 16 bytes"
        case .cryptoFailure: "segment \(segment): OpenSSL refused the operation"
        case .malformedContainer: "segment \(segment) is damaged or not what it claims to be: \(detail)"
        case .unsupportedStream: "segment \(segment) uses something Stowage does not support: \(detail)"
        case .limitExceeded: "segment \(segment) exceeds a safety limit: \(detail)"
        case .neighbourSegmentPending:
            "segment \(segment) cannot be decrypted yet: \(detail); ask again once it has arrived"
        default: "segment \(segment): \(code) \(detail)"
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
    /// The container (MPEG-TS packets, PES headers, NAL units, ADTS frames, MP4 boxes) is damaged or lies about sizes.
    public static func malformedContainer(segment: String, detail: String) -> Self {
        .init(.malformedContainer, segment: segment, detail: detail)
    }
    /// A well-formed stream using a codec, scheme or layout Stowage does not handle.
    public static func unsupportedStream(segment: String, detail: String) -> Self {
        .init(.unsupportedStream, segment: segment, detail: detail)
    }
    /// A size beyond a safety bound (a PES packet or `moof` larger than any real one), refused rather than buffered.
    public static func limitExceeded(segment: String, detail: String) -> Self {
        .init(.limitExceeded, segment: segment, detail: detail)
    }
    /// A PES packet of a SAMPLE-AES MPEG-TS segment begins in the previous segment or may go on in the next, which is
    /// not stored yet: the segment is decrypted once it is (``TransportStreamNeighbours/previousPending``,
    /// ``TransportStreamNeighbours/nextPending``).
    public static func neighbourSegmentPending(segment: String, detail: String) -> Self {
        .init(.neighbourSegmentPending, segment: segment, detail: detail)
    }
    /// Any other failure reported by the cipher.
    public static func cryptoFailure(segment: String) -> Self { .init(.cryptoFailure, segment: segment) }
}

extension SegmentCryptoError: StowageError {
    public var message: String { description }
    public var subject: ErrorSubject { ErrorSubject(path: segment) }
}
