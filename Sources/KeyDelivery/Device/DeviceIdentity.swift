public import Foundation
public import StowageCrypto

/// This device's two key pairs and the ID derived from them (docs/key-protocol.md, "Device identity").
///
/// Created on first use in the data directory, as raw 32-byte private keys in two files of mode 0600 inside a
/// directory of mode 0700: `device-signing.key` (Ed25519 seed) and `device-agreement.key` (X25519). Later loads
/// return the same identity. A key file open to group or others is refused with ``PrivateFileError``, since someone
/// else may hold a copy.
///
/// ```swift
/// let identity = try DeviceIdentity.loadOrCreate(in: dataDirectory)
/// let request = KeyRequest(assetId: "movie-1", keyIds: ids, lease: .persistent, nonce: nonce,
///                          clientTime: clock.now, device: identity.publicInfo)
/// let body = try JSONEncoder().encode(request)
/// let signature = try identity.signature(for: Array(body))
/// ```
public struct DeviceIdentity: Sendable {
    /// File name of the Ed25519 seed.
    public static let signingKeyFileName = "device-signing.key"
    /// File name of the X25519 private key.
    public static let agreementKeyFileName = "device-agreement.key"

    /// Signs request bodies (`Stowage-Device-Signature`).
    public let signingKey: Ed25519.PrivateKey
    /// Unwraps content keys wrapped to this device.
    public let agreementKey: X25519.PrivateKey

    /// Builds an identity from its two private keys.
    public init(signingKey: Ed25519.PrivateKey, agreementKey: X25519.PrivateKey) {
        self.signingKey = signingKey
        self.agreementKey = agreementKey
    }

    /// The 32-byte Ed25519 public key.
    public var signingPublicKey: [UInt8] { signingKey.publicKey.rawRepresentation }

    /// The 32-byte X25519 public key.
    public var agreementPublicKey: [UInt8] { agreementKey.publicKey }

    /// 32 lowercase hex digits: the first 16 bytes of SHA-256(signingPublicKey || agreementPublicKey).
    public var deviceId: String {
        DeviceIdentifier.make(signingKey: signingPublicKey, agreementKey: agreementPublicKey)
    }

    /// The public keys as requests carry them (base64 with padding).
    public var publicInfo: DevicePublicInfo {
        DevicePublicInfo(
            id: deviceId,
            signingKey: Data(signingPublicKey).base64EncodedString(),
            agreementKey: Data(agreementPublicKey).base64EncodedString()
        )
    }

    /// The Ed25519 signature of `message` (a request body, byte for byte as sent).
    public func signature(for message: [UInt8]) throws -> [UInt8] {
        try signingKey.signature(for: message)
    }

    /// Loads the identity from `directory`, creating the directory (mode 0700) and the missing key files (mode 0600)
    /// on first use.
    ///
    /// - Throws: ``PrivateFileError`` if the directory or a key file is open to group or others, belongs to another
    ///   user, or is damaged; `CryptoError` if key generation fails.
    public static func loadOrCreate(in directory: URL) throws -> DeviceIdentity {
        let path = directory.path
        try PrivateFile.prepareDirectory(path)
        let signingSeed = try loadOrCreateKey(at: directory.appendingPathComponent(signingKeyFileName).path) {
            try Ed25519.PrivateKey.generate().rawRepresentation
        }
        let agreementSecret = try loadOrCreateKey(at: directory.appendingPathComponent(agreementKeyFileName).path) {
            try X25519.PrivateKey.generate().rawRepresentation
        }
        return DeviceIdentity(
            signingKey: try Ed25519.PrivateKey(rawRepresentation: signingSeed),
            agreementKey: try X25519.PrivateKey(rawRepresentation: agreementSecret)
        )
    }

    /// Loads an existing identity without creating anything; nil if `directory` holds none.
    public static func load(from directory: URL) throws -> DeviceIdentity? {
        let signingPath = directory.appendingPathComponent(signingKeyFileName).path
        let agreementPath = directory.appendingPathComponent(agreementKeyFileName).path
        guard let seed = try PrivateFile.readSecret(signingPath, count: 32),
            let secret = try PrivateFile.readSecret(agreementPath, count: 32)
        else { return nil }
        return DeviceIdentity(
            signingKey: try Ed25519.PrivateKey(rawRepresentation: seed),
            agreementKey: try X25519.PrivateKey(rawRepresentation: secret)
        )
    }

    private static func loadOrCreateKey(at path: String, generate: () throws -> SecretBytes) throws -> SecretBytes {
        if let existing = try PrivateFile.readSecret(path, count: 32) { return existing }
        let fresh = try generate()
        if try PrivateFile.createExclusively(path, contents: fresh) { return fresh }
        // Another process created it first: use theirs so both agree on the identity.
        guard let existing = try PrivateFile.readSecret(path, count: 32) else {
            throw PrivateFileError.malformedFile(path: path, reason: "it vanished while being created")
        }
        return existing
    }
}
