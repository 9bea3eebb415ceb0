import Foundation
public import StowageCrypto

/// Signs lease payloads (key server) and verifies them (client): the `{"payload", "signature"}` pair of
/// docs/key-protocol.md, "POST /v1/keys".
///
/// The signature covers the exact payload bytes, so the client verifies the bytes it received, before decoding them,
/// and stores the pair exactly as received; it never re-encodes a payload.
///
/// ```swift
/// // Server
/// let signed = try PayloadSigning.sign(payload, with: serverSigningKey)
/// // Client
/// let payload = try PayloadSigning.verify(signed, serverKey: pinnedServerKey)
/// ```
public enum PayloadSigning {
    /// Encodes a payload as the JSON bytes the server signs: compact, members in lexicographic order, `/` not escaped
    /// (what `JSONEncoder` with `.sortedKeys` and `.withoutEscapingSlashes` writes, and Python's
    /// `json.dumps(payload, sort_keys=True, separators=(",", ":"))` for these values).
    ///
    /// Written by hand because it runs for every key request and a generic encoder costs several times more.
    public static func encode(_ payload: LeasePayload) -> [UInt8] {
        var json = JSONWriter()
        json.bytes.reserveCapacity(512 + 256 * payload.keys.count)
        json.raw(#"{"keys":["#)
        for (index, key) in payload.keys.enumerated() {
            if index > 0 { json.raw(",") }
            json.raw(#"{"ephemeralKey":"#)
            json.string(key.ephemeralKey)
            json.raw(#","keyId":"#)
            json.string(key.keyId)
            json.raw(#","nonce":"#)
            json.string(key.nonce)
            json.raw(#","wrappedKey":"#)
            json.string(key.wrappedKey)
            json.raw("}")
        }
        let lease = payload.lease
        json.raw(#"],"lease":{"assetId":"#)
        json.string(lease.assetId)
        json.raw(#","deviceId":"#)
        json.string(lease.deviceId)
        if lease.exportAllowed == true { json.raw(#","exportAllowed":true"#) }
        if let firstPlayedAt = lease.firstPlayedAt {
            json.raw(#","firstPlayedAt":"#)
            json.integer(firstPlayedAt)
        }
        json.raw(#","issuedAt":"#)
        json.integer(lease.issuedAt)
        json.raw(#","keyIds":["#)
        for (index, keyID) in lease.keyIds.enumerated() {
            if index > 0 { json.raw(",") }
            json.string(keyID)
        }
        json.raw(#"],"leaseId":"#)
        json.string(lease.leaseId)
        json.raw(#","playbackDuration":"#)
        json.integer(lease.playbackDuration)
        json.raw(#","renewableUntil":"#)
        json.integer(lease.renewableUntil)
        json.raw(#","requestNonce":"#)
        json.string(lease.requestNonce)
        json.raw(#","storageExpiresAt":"#)
        json.integer(lease.storageExpiresAt)
        json.raw(#","type":"#)
        json.string(lease.type.rawValue)
        json.raw(#"},"serverTime":"#)
        json.integer(payload.serverTime)
        json.raw(#","version":"#)
        json.integer(Int64(payload.version))
        json.raw("}")
        return json.bytes
    }

    /// Encodes and signs a payload (server side).
    ///
    /// - Parameters:
    ///   - payload: The lease and its wrapped keys.
    ///   - key: The key server's Ed25519 signing key.
    /// - Returns: Base64 of the payload bytes and base64 of their Ed25519 signature.
    /// - Throws: `CryptoError`.
    public static func sign(_ payload: LeasePayload, with key: Ed25519.PrivateKey) throws -> SignedPayload {
        try sign(payloadBytes: encode(payload), with: key)
    }

    /// The response body of `/v1/keys` and `/renew`: `{"payload":"...","signature":"..."}`.
    public static func responseBody(_ signed: SignedPayload) -> [UInt8] {
        var json = JSONWriter()
        json.raw(#"{"payload":"#)
        json.string(signed.payload)
        json.raw(#","signature":"#)
        json.string(signed.signature)
        json.raw("}")
        return json.bytes
    }

    /// Signs payload bytes that are already encoded (server side).
    ///
    /// - Throws: `CryptoError`.
    public static func sign(payloadBytes: [UInt8], with key: Ed25519.PrivateKey) throws -> SignedPayload {
        SignedPayload(
            payload: StrictBase64.encode(payloadBytes),
            signature: StrictBase64.encode(try key.signature(for: payloadBytes))
        )
    }

    /// Verifies the signature over the payload bytes with the server's public key, then decodes the payload (client
    /// side). Nothing is decoded from bytes that do not verify.
    ///
    /// - Parameters:
    ///   - signed: The response exactly as received.
    ///   - serverKey: The key server's Ed25519 public key (configured, or fetched once and pinned).
    /// - Returns: The decoded payload.
    /// - Throws: ``SignatureVerificationError``: `.malformedSignature`, `.badSignature`, `.malformedPayload` (not base64,
    ///   or verified bytes that are not a lease payload), `.unsupportedVersion`.
    public static func verify(_ signed: SignedPayload, serverKey: Ed25519.PublicKey) throws -> LeasePayload {
        let bytes = try verifiedPayloadBytes(signed, serverKey: serverKey)
        let payload: LeasePayload
        do {
            payload = try JSONDecoder().decode(LeasePayload.self, from: Data(bytes))
        } catch {
            throw SignatureVerificationError.malformedPayload
        }
        guard payload.version == KeyProtocol.version else { throw SignatureVerificationError.unsupportedVersion }
        return payload
    }

    /// Verifies the signature and returns the payload bytes without decoding them.
    ///
    /// - Throws: ``SignatureVerificationError``: `.malformedSignature`, `.malformedPayload`, `.badSignature`.
    public static func verifiedPayloadBytes(_ signed: SignedPayload, serverKey: Ed25519.PublicKey) throws -> [UInt8] {
        guard let signature = StrictBase64.decode(signed.signature, byteCount: RequestSigning.signatureByteCount) else {
            throw SignatureVerificationError.malformedSignature
        }
        guard let bytes = StrictBase64.decode(signed.payload) else { throw SignatureVerificationError.malformedPayload }
        guard serverKey.isValidSignature(signature, for: bytes) else { throw SignatureVerificationError.badSignature }
        return bytes
    }
}
