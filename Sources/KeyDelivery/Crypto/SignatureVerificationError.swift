public import StowageCore

/// Why a signed message was refused: a lease payload from the key server, or a request body from a device.
///
/// Shaped like `CryptoError`: a private code enum behind public static constants with a stable snake_case ``code``.
///
/// ```swift
/// do {
///     let payload = try PayloadSigning.verify(response, serverKey: pinnedKey)
/// } catch let error as SignatureVerificationError where error == .badSignature {
///     // not signed by this key server, or altered: store nothing
/// }
/// ```
public struct SignatureVerificationError: Error, Hashable, Sendable, CustomStringConvertible {
    private typealias Code = ErrorCode

    private let underlying: Code

    private init(_ code: Code) {
        self.underlying = code
    }

    /// The stable snake_case code, for logs, metrics and JSON (for example `"bad_signature"`).
    public var code: ErrorCode { underlying }

    /// What went wrong and what to do.
    public var description: String {
        switch underlying {
        case .missingSignature:
            "The message carries no signature (a request needs the \(KeyProtocol.deviceSignatureHeader) header)."
        case .malformedSignature:
            "The signature is not canonical base64 of a 64-byte Ed25519 signature."
        case .badSignature:
            "The Ed25519 signature does not verify for these exact bytes and this public key; the message was altered "
                + "or signed by another key."
        case .malformedPayload:
            "The signed payload is not canonical base64 of a JSON lease payload with every required member."
        case .unsupportedVersion:
            "The signed payload is of a protocol version this client does not know (it speaks version \(KeyProtocol.version))."
        default:
            "The signature cannot be checked (\(underlying))."
        }
    }

    /// No signature was sent.
    public static let missingSignature = SignatureVerificationError(.missingSignature)
    /// The signature is not base64 of 64 bytes.
    public static let malformedSignature = SignatureVerificationError(.malformedSignature)
    /// The signature does not verify.
    public static let badSignature = SignatureVerificationError(.badSignature)
    /// The payload verified but is not base64 or not a lease payload.
    public static let malformedPayload = SignatureVerificationError(.malformedPayload)
    /// The payload's `version` is not ``KeyProtocol/version``.
    public static let unsupportedVersion = SignatureVerificationError(.unsupportedVersion)
}

extension SignatureVerificationError: StowageError {
    public var message: String { description }
}
