public import StowageCore

/// Why a content key could not be wrapped to a device or unwrapped by it, identified by a stable code.
///
/// Shaped like `CryptoError`: a private code enum behind public static constants, compared by code (`error == .unwrapFailed` whatever the key). The key ID,
/// when known, says which key of a payload failed; the text never carries key bytes.
///
/// ```swift
/// do {
///     let key = try KeyWrapping.unwrap(wrapped, leaseID: lease.leaseId, deviceID: device.id, agreementKey: agreementKey)
/// } catch let error as KeyWrappingError where error == .unwrapFailed {
///     // not wrapped to this device or lease, or tampered with
/// }
/// ```
public struct KeyWrappingError: Error, Sendable, CustomStringConvertible {
    private typealias Code = ErrorCode

    private let underlying: Code
    /// The key ID (32 hex digits) the failure concerns, when it is known.
    public let keyID: String?

    private init(_ code: Code, keyID: String? = nil) {
        self.underlying = code
        self.keyID = keyID
    }

    /// The stable snake_case code, for logs, metrics and JSON (for example `"unwrap_failed"`).
    public var code: ErrorCode { underlying }

    /// What went wrong, for which key, and what usually causes it.
    public var description: String {
        let key = keyID.map { " (key \($0))" } ?? ""
        return switch underlying {
        case .invalidKeyID:
            "The key ID\(key) is not 32 lowercase hex digits."
        case .invalidContentKey:
            "The content key\(key) must be 16 bytes."
        case .invalidAgreementKey:
            "An X25519 public key\(key) is unusable (wrong length or a low-order point): the device's agreement key "
                + "when wrapping, the payload's ephemeral key when unwrapping."
        case .malformedWrappedKey:
            "The wrapped key\(key) is malformed: ephemeralKey must be base64 of 32 bytes, nonce of 12, wrappedKey of 32."
        case .unwrapFailed:
            "The wrapped key\(key) does not open with this device's key for this lease; it was wrapped to another device "
                + "or lease, or it was altered. Request the key again."
        default:
            "The key\(key) cannot be used (\(underlying))."
        }
    }

    /// A key ID is not 32 lowercase hex digits.
    public static let invalidKeyID = KeyWrappingError(.invalidKeyID)
    /// A content key is not 16 bytes.
    public static let invalidContentKey = KeyWrappingError(.invalidContentKey)
    /// The device agreement key (or a payload's ephemeral key) is not a usable X25519 public key.
    public static let invalidAgreementKey = KeyWrappingError(.invalidAgreementKey)
    /// A wrapped key's fields are not canonical base64 of the protocol's lengths.
    public static let malformedWrappedKey = KeyWrappingError(.malformedWrappedKey)
    /// The AES-GCM tag did not verify: another device, another lease, or altered bytes.
    public static let unwrapFailed = KeyWrappingError(.unwrapFailed)

    /// The same error, saying which key it concerns.
    func concerning(_ keyID: String) -> KeyWrappingError { KeyWrappingError(underlying, keyID: keyID) }
}

extension KeyWrappingError: Hashable {
    /// Two errors are equal when their codes are equal, whatever key they concern.
    public static func == (lhs: KeyWrappingError, rhs: KeyWrappingError) -> Bool { lhs.underlying == rhs.underlying }

    public func hash(into hasher: inout Hasher) { hasher.combine(underlying) }
}

extension KeyWrappingError: StowageError {
    public var message: String { description }
    public var subject: ErrorSubject { ErrorSubject(keyId: keyID) }
}
