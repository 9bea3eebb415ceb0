/// Checks a signed payload from the key server and decodes it: the one thing the key store needs from the payload
/// signing code, which lives in `KeyDelivery/Crypto` (docs/key-protocol.md, `POST /v1/keys`: the client verifies
/// the signature with the key server's public signing key before it uses or stores anything).
///
/// Implementations verify the Ed25519 signature over the base64-decoded `payload` bytes with the pinned server key,
/// then decode those bytes as a ``LeasePayload``. They may check more (the request nonce echo, the device ID).
public protocol LeasePayloadVerifier: Sendable {
    /// The decoded payload if `signed` verifies; throws otherwise.
    func verifiedPayload(_ signed: SignedPayload) throws -> LeasePayload
}

/// A signed payload that passed a ``LeasePayloadVerifier``, with its decoded form. The key store accepts only these,
/// so nothing unverified is ever stored; it stores ``signed`` exactly as received.
public struct VerifiedLeasePayload: Sendable, Hashable {
    /// The pair as received from the server, byte for byte.
    public let signed: SignedPayload
    /// Its decoded payload.
    public let payload: LeasePayload

    /// Verifies `signed` with `verifier`.
    ///
    /// - Throws: whatever the verifier throws for a bad signature or an undecodable payload.
    public init(_ signed: SignedPayload, verifier: some LeasePayloadVerifier) throws {
        self.signed = signed
        self.payload = try verifier.verifiedPayload(signed)
    }

    /// The lease terms of the payload.
    public var terms: LeaseTerms { LeaseTerms(payload.lease) }
}
