public import StowageCrypto

/// The device proof on every POST: `Stowage-Device-Signature: BASE64`, the Ed25519 signature of the exact request
/// body bytes with the device's signing key (docs/key-protocol.md, "Authentication").
///
/// Sign the bytes that are sent, and verify the bytes that arrived, never a re-encoding of them.
///
/// ```swift
/// // Client
/// let body = try JSONEncoder().encode(request)
/// headers.add(name: RequestSigning.headerName, value: try RequestSigning.signature(for: Array(body), with: signingKey))
/// // Server
/// try RequestSigning.verify(headerValue, body: bytes, signingKey: devicePublicKey)
/// ```
public enum RequestSigning {
    /// The header that carries the signature.
    public static let headerName = KeyProtocol.deviceSignatureHeader
    /// Ed25519 signatures are 64 bytes (RFC 8032 section 5.1.6).
    public static let signatureByteCount = 64

    /// The header value for `body`: base64 of its Ed25519 signature.
    ///
    /// - Throws: `CryptoError`.
    public static func signature(for body: [UInt8], with key: Ed25519.PrivateKey) throws -> String {
        StrictBase64.encode(try key.signature(for: body))
    }

    /// Checks the header value against the body bytes and the device's signing key.
    ///
    /// - Parameters:
    ///   - headerValue: The `Stowage-Device-Signature` value, `nil` when the header is absent.
    ///   - body: The request body exactly as received.
    ///   - signingKey: The device's Ed25519 public key.
    /// - Throws: ``SignatureVerificationError``: `.missingSignature`, `.malformedSignature` (not canonical base64 of 64
    ///   bytes) or `.badSignature`.
    public static func verify(_ headerValue: String?, body: [UInt8], signingKey: Ed25519.PublicKey) throws {
        guard let headerValue else { throw SignatureVerificationError.missingSignature }
        guard let signature = StrictBase64.decode(headerValue, byteCount: signatureByteCount) else {
            throw SignatureVerificationError.malformedSignature
        }
        guard signingKey.isValidSignature(signature, for: body) else { throw SignatureVerificationError.badSignature }
    }
}
