import Foundation
import KeyDelivery
import StowageCrypto

#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under the system temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        var template = Array((NSTemporaryDirectory() + "stowage-keys-XXXXXX").utf8CString)
        guard let path = mkdtemp(&template) else { throw POSIXError(.EIO) }
        url = URL(fileURLWithPath: String(cString: path), isDirectory: true)
    }

    /// The data directory inside it (not created: the code under test creates it).
    var dataDirectory: URL { url.appendingPathComponent("data", isDirectory: true) }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Plays the key server's part: signs payloads with a test Ed25519 key and wraps content keys to a device exactly as
/// docs/key-protocol.md says.
struct TestKeyServer: Sendable {
    let signingKey: Ed25519.PrivateKey
    let device: DeviceIdentity

    init() throws {
        signingKey = try Ed25519.PrivateKey.generate()
        device = DeviceIdentity(signingKey: try .generate(), agreementKey: try .generate())
    }

    /// A server with a signing key of its own that wraps keys to `device` (a forger, in the tests that need one).
    init(device: DeviceIdentity) throws {
        signingKey = try Ed25519.PrivateKey.generate()
        self.device = device
    }

    var verifier: TestPayloadVerifier { TestPayloadVerifier(serverKey: signingKey.publicKey) }

    /// A lease payload for `assetId`, wrapping `contentKeys` (keyed by key ID hex) to the device.
    func payload(
        leaseId: String = "lease-1",
        assetId: String = "movie-1",
        issuedAt: Int64 = 1_000_000,
        storageExpiresAt: Int64 = 2_000_000,
        playbackDuration: Int64? = 172_800,
        renewableUntil: Int64? = 3_000_000,
        serverTime: Int64? = nil,
        type: LeaseType = .persistent,
        contentKeys: [(keyId: String, key: SecretBytes)] = []
    ) throws -> VerifiedLeasePayload {
        let keys = try contentKeys.map { try wrap($0.key, keyId: $0.keyId, leaseId: leaseId) }
        let payload = LeasePayload(
            lease: .init(
                leaseId: leaseId,
                assetId: assetId,
                deviceId: device.deviceId,
                keyIds: contentKeys.isEmpty ? ["000102030405060708090a0b0c0d0e0f"] : contentKeys.map(\.keyId),
                type: type,
                issuedAt: issuedAt,
                storageExpiresAt: storageExpiresAt,
                playbackDuration: playbackDuration,
                renewableUntil: renewableUntil,
                requestNonce: Data(repeating: 7, count: 16).base64EncodedString()
            ),
            keys: keys,
            serverTime: serverTime ?? issuedAt
        )
        let bytes = try JSONEncoder().encode(payload)
        let signed = SignedPayload(
            payload: bytes.base64EncodedString(),
            signature: Data(try signingKey.signature(for: Array(bytes))).base64EncodedString()
        )
        return try VerifiedLeasePayload(signed, verifier: verifier)
    }

    /// docs/key-protocol.md, "Key wrapping".
    private func wrap(_ key: SecretBytes, keyId: String, leaseId: String) throws -> LeasePayload.WrappedKey {
        let ephemeral = try X25519.PrivateKey.generate()
        let shared = try ephemeral.sharedSecret(with: device.agreementPublicKey)
        let keyIdBytes = Hex.decode(keyId)!
        let kek = try HKDF.deriveKey(
            inputKeyMaterial: shared,
            salt: Array(leaseId.utf8),
            info: Array("stowage-skdp-v1".utf8) + keyIdBytes + Array(device.deviceId.utf8),
            outputByteCount: 32
        )
        let nonce = try SecureRandom.bytes(count: 12)
        let (ciphertext, tag) = try AESGCM.seal(key, key: kek, nonce: nonce, authenticating: keyIdBytes)
        return .init(
            keyId: keyId,
            ephemeralKey: Data(ephemeral.publicKey).base64EncodedString(),
            nonce: Data(nonce).base64EncodedString(),
            wrappedKey: Data(ciphertext + tag).base64EncodedString()
        )
    }
}

/// Verifies the Ed25519 signature over the payload bytes and decodes them (what `KeyDelivery/Crypto` will provide).
struct TestPayloadVerifier: LeasePayloadVerifier {
    struct BadSignature: Error {}
    let serverKey: Ed25519.PublicKey

    func verifiedPayload(_ signed: SignedPayload) throws -> LeasePayload {
        guard let bytes = Data(base64Encoded: signed.payload), let signature = Data(base64Encoded: signed.signature),
            serverKey.isValidSignature(Array(signature), for: Array(bytes))
        else { throw BadSignature() }
        return try JSONDecoder().decode(LeasePayload.self, from: bytes)
    }
}

/// The machine ID the tests pretend to run on.
let testMachineID = MachineID("0123456789abcdef0123456789abcdef")

/// A lease record for pure rule tests.
func makeRecord(
    issuedAt: Int64 = 1_000_000,
    storageExpiresAt: Int64 = 2_000_000,
    playbackDuration: Int64? = 172_800,
    renewableUntil: Int64? = nil,
    firstPlayedAt: Int64? = nil,
    state: LeaseState? = nil
) -> LeaseRecord {
    LeaseRecord(
        terms: LeaseTerms(
            leaseId: "lease-1",
            assetId: "movie-1",
            deviceId: "00112233445566778899aabbccddeeff",
            keyIds: ["000102030405060708090a0b0c0d0e0f"],
            type: .persistent,
            issuedAt: issuedAt,
            storageExpiresAt: storageExpiresAt,
            playbackDuration: playbackDuration,
            renewableUntil: renewableUntil
        ),
        state: state ?? (firstPlayedAt == nil ? .persisted : .playing),
        firstPlayedAt: firstPlayedAt
    )
}

/// File permission bits of `url`.
func mode(of url: URL) throws -> UInt32 {
    // FileManager rather than stat(2): with KeyServer linked into this target, `stat` resolves through CDispatch.
    guard let permissions = try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? NSNumber else {
        throw POSIXError(.ENOENT)
    }
    return permissions.uint32Value & 0o777
}

extension TestKeyServer {
    /// The URL the test key server's leases are recorded under.
    static let url = "https://keys.stowage.test"
}

extension KeyStore {
    /// Pins `server`'s signing key for ``TestKeyServer/url`` (as a key session does on first use) and stores `payload`
    /// under it.
    @discardableResult
    func persist(
        _ payload: VerifiedLeasePayload,
        from server: TestKeyServer,
        at now: Int64,
        superseding: Bool = false
    ) throws -> LeaseRecord {
        try pin(server.signingKey.publicKey, for: TestKeyServer.url, at: now)
        return try persist(payload, keyServer: TestKeyServer.url, at: now, superseding: superseding)
    }
}

/// Every file under `directory`, the database, its WAL and shared-memory file included.
func filesUnder(_ directory: URL) throws -> [URL] {
    let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
    return (enumerator?.allObjects as? [URL] ?? []).filter { !$0.hasDirectoryPath }
}

/// The names of the files under `directory` holding any of `needles`, once per needle found.
func filesContaining(_ needles: [[UInt8]], under directory: URL) throws -> [String] {
    var found: [String] = []
    for file in try filesUnder(directory) {
        let bytes = try Data(contentsOf: file)
        for needle in needles where bytes.range(of: Data(needle)) != nil { found.append(file.lastPathComponent) }
    }
    return found
}
