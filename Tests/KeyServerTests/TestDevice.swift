import Foundation
import KeyDelivery
import StowageCrypto

/// A client device as the protocol describes it: its two key pairs, its ID, and signed request bodies.
struct TestDevice: Sendable {
    /// The clock whose time the device sends as `clientTime`: the fixture's, while its server runs; else the system's,
    /// as for a server started with `stowage keyserver run`.
    @TaskLocal static var clock: ManualClock?

    /// The device's time, as its requests say.
    static var clientTime: Int64 { clock?.now ?? Int64(Date().timeIntervalSince1970) }

    let signingKey: Ed25519.PrivateKey
    let agreementKey: X25519.PrivateKey

    init() throws {
        signingKey = try Ed25519.PrivateKey.generate()
        agreementKey = try X25519.PrivateKey.generate()
    }

    var id: String { DeviceIdentifier.make(signingKey: signingKey.publicKey.rawRepresentation, agreementKey: agreementKey.publicKey) }

    var publicInfo: DevicePublicInfo {
        DevicePublicInfo(
            id: id,
            signingKey: StrictBase64.encode(signingKey.publicKey.rawRepresentation),
            agreementKey: StrictBase64.encode(agreementKey.publicKey)
        )
    }

    /// A body and its `Stowage-Device-Signature`.
    struct SignedBody: Sendable {
        var body: [UInt8]
        var signature: String
        var nonce: String
    }

    static func freshNonce() -> String { StrictBase64.encode(try! SecureRandom.bytes(count: 16)) }

    func sign(_ message: some Encodable, nonce: String) throws -> SignedBody {
        let body = Array(try JSONEncoder().encode(message))
        return SignedBody(body: body, signature: try RequestSigning.signature(for: body, with: signingKey), nonce: nonce)
    }

    func keyRequest(asset: String, keyIDs: [String], lease: LeaseType = .persistent, device: DevicePublicInfo? = nil) throws -> SignedBody {
        let nonce = Self.freshNonce()
        let request = KeyRequest(
            assetId: asset,
            keyIds: keyIDs,
            lease: lease,
            nonce: nonce,
            clientTime: Self.clientTime,
            device: device ?? publicInfo
        )
        return try sign(request, nonce: nonce)
    }

    func renewRequest(leaseID: String) throws -> SignedBody {
        let nonce = Self.freshNonce()
        return try sign(RenewRequest(leaseId: leaseID, deviceId: id, nonce: nonce, clientTime: Self.clientTime), nonce: nonce)
    }

    func releaseRequest(leaseID: String) throws -> SignedBody {
        let nonce = Self.freshNonce()
        return try sign(
            ReleaseRequest(leaseId: leaseID, deviceId: id, nonce: nonce, deletedAt: Self.clientTime, clientTime: Self.clientTime),
            nonce: nonce
        )
    }

    /// Unwraps every key of a verified payload, keyed by key ID.
    func unwrapKeys(of payload: LeasePayload) throws -> [String: SecretBytes] {
        var keys: [String: SecretBytes] = [:]
        for wrapped in payload.keys {
            keys[wrapped.keyId] = try KeyWrapping.unwrap(wrapped, leaseID: payload.lease.leaseId, deviceID: id, agreementKey: agreementKey)
        }
        return keys
    }
}
