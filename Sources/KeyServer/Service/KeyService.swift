import Foundation
import KeyDelivery
import Logging
import StowageCore
import StowageCrypto

/// The protocol's operations, free of HTTP: each takes the request as received (body bytes, signature header, bearer
/// token, source address) and returns the answer or throws a ``KeyServerError`` (docs/key-protocol.md and
/// docs/key-protocol-extensions.md).
///
/// Every success writes its audit record in the same transaction as the lease it changes; refusals are counted in the
/// ``RefusalLog`` and written aggregated per minute. Rate limits: a coarse bucket per source address before anything
/// is verified, then buckets per account and per device once the token and the device signature are verified, so
/// neither rotating device IDs nor spamming someone else's device ID gets around them or locks anyone out.
struct KeyService: Sendable {
    /// The key protocol ("Authentication"): a nonce seen in the last 24 hours is a replay. That is at least twice the
    /// largest `maxClockSkew` (12 hours), so a request is refused by its nonce for as long as its time passes.
    static let replayWindow: Int64 = 86_400
    /// Bounds the work one request can ask for.
    static let maxKeysPerRequest = 64

    let store: any KeyServerStore
    let configuration: KeyServerConfiguration
    let signingKey: Ed25519.PrivateKey
    let masterKeys: MasterKeyRing
    let entitlement: EntitlementVerifier
    /// Per account and per device, after verification.
    let rateLimiter: RequestRateLimiter
    /// Per source address, before anything is verified.
    let sourceLimiter: RequestRateLimiter
    let refusals: RefusalLog
    let clock: KeyServerClock
    let logger: Logger

    /// `GET /v1/server-key`.
    var serverKey: ServerKeyResponse { ServerKeyResponse(signingKey: StrictBase64.encode(signingKey.publicKey.rawRepresentation)) }

    // MARK: POST /v1/keys

    /// Issues a lease on the requested keys, wrapped to the requesting device and signed.
    func requestKeys(body: [UInt8], signature: String?, authorization: String?, source: String) async throws -> SignedPayload {
        let now = clock.now
        return try await audited("keys", at: now) { record in
            try admit(source)
            let request = try decode(KeyRequest.self, from: body)
            record.deviceID = String(request.device.id.prefix(64))
            record.assetID = String(request.assetId.prefix(128))
            try checkVersion(request.version)
            guard KeyProtocol.isValidAssetID(request.assetId) else { throw malformed("assetId must match [A-Za-z0-9._-]{1,128}") }
            guard !request.keyIds.isEmpty, request.keyIds.count <= Self.maxKeysPerRequest else {
                throw malformed("keyIds must list 1 to \(Self.maxKeysPerRequest) key IDs")
            }
            guard request.keyIds.allSatisfy(KeyProtocol.isValidKeyID) else { throw malformed("every key ID must be 32 lowercase hex digits") }
            guard Set(request.keyIds).count == request.keyIds.count else { throw malformed("keyIds lists a key ID twice") }
            let nonce = try decodeNonce(request.nonce)
            guard KeyProtocol.isValidDeviceID(request.device.id) else { throw malformed("device.id must be 32 lowercase hex digits") }
            guard let signingKey = StrictBase64.decode(request.device.signingKey, byteCount: 32),
                let agreementKey = StrictBase64.decode(request.device.agreementKey, byteCount: 32),
                let devicePublicKey = try? Ed25519.PublicKey(rawRepresentation: signingKey)
            else { throw malformed("device.signingKey and device.agreementKey must be base64 of 32-byte public keys") }

            let claims = try await entitlement.claims(authorization: authorization, now: now)
            record.account = claims.account
            try verifyDeviceSignature(signature, body: body, key: devicePublicKey)
            try admit("account:" + claims.account)
            try admit("device:" + request.device.id)
            let device = try await bindDevice(id: request.device.id, signingKey: signingKey, agreementKey: agreementKey, now: now)

            try checkClientTime(request.clientTime, now: now)
            guard claims.allows(request.assetId) else {
                throw KeyServerError(.notEntitled, "the entitlement token does not list asset \(request.assetId)")
            }
            let (asset, policy) = try await assetAndPolicy(request.assetId)
            let keys = try await openKeys(of: asset, keyIDs: request.keyIds)

            let leaseID = UUID().uuidString.lowercased()
            record.leaseID = leaseID
            let persistent = request.lease == .persistent
            let lease = IssuedLease(
                id: leaseID,
                account: claims.account,
                assetID: asset.id,
                deviceID: device.id,
                keyIDs: request.keyIds,
                type: request.lease,
                createdAt: now,
                issuedAt: now,
                storageExpiresAt: now + (persistent ? policy.storageDuration : policy.streamingDuration),
                playbackDuration: policy.playbackDuration,
                renewableUntil: persistent && policy.renewable ? now + policy.renewableFor : nil
            )
            record.event = .issued
            let issuance = IssuanceRequest(
                kind: persistent ? .persistent : .streaming,
                lease: lease,
                policy: policy,
                entitlement: claims.entitlement,
                nonce: RequestNonce(nonce, window: Self.replayWindow),
                now: now
            )
            return try await save(issuance, audit: record) { settled in
                // Wrapped and signed inside the transaction, over the terms it settled, so a lease is never stored
                // without its payload nor signed with terms it was not stored with.
                try makePayload(
                    for: settled,
                    keys: keys,
                    agreementKey: device.agreementKey,
                    requestNonce: request.nonce,
                    exportAllowed: policy.exportAllowed,
                    now: now
                )
            }
        }
    }

    // MARK: POST /v1/leases/LEASE_ID/renew

    /// Renews a persistent lease: same lease ID, keys wrapped afresh, a later `storageExpiresAt`; a first play the
    /// request reports is recorded (the earliest known wins) and signed into the payload.
    func renew(leaseID: String, body: [UInt8], signature: String?, authorization: String?, source: String) async throws -> SignedPayload {
        let now = clock.now
        return try await audited("renew", at: now) { record in
            try admit(source)
            record.leaseID = String(leaseID.prefix(64))
            let request = try decode(RenewRequest.self, from: body)
            record.deviceID = String(request.deviceId.prefix(64))
            try checkVersion(request.version)
            guard request.leaseId == leaseID else { throw malformed("the body's leaseId is not the lease in the URL") }
            guard KeyProtocol.isValidDeviceID(request.deviceId) else { throw malformed("deviceId must be 32 lowercase hex digits") }
            let nonce = try decodeNonce(request.nonce)

            let device = try await registeredDevice(request.deviceId, signature: signature, body: body)
            let claims = try await entitlement.claims(authorization: authorization, now: now)
            record.account = claims.account
            try admit("account:" + claims.account)
            try admit("device:" + request.deviceId)

            try checkClientTime(request.clientTime, now: now)
            // The stored lease names the asset whose policy and keys the renewal needs; LeaseIssuance judges it again
            // inside the transaction.
            guard let stored = try await store.lease(id: leaseID), stored.deviceID == device.id else {
                throw KeyServerError(.unknownLease, "device \(device.id) holds no lease \(leaseID)")
            }
            record.assetID = stored.assetID
            let (asset, policy) = try await assetAndPolicy(stored.assetID)
            let keys = try await openKeys(of: asset, keyIDs: stored.keyIDs)
            record.event = .renewed
            let issuance = IssuanceRequest(
                kind: .renewal,
                lease: stored,
                policy: policy,
                entitlement: claims.entitlement,
                nonce: RequestNonce(nonce, window: Self.replayWindow),
                now: now,
                reportedFirstPlay: request.firstPlayedAt
            )
            return try await save(issuance, audit: record) { settled in
                try makePayload(
                    for: settled,
                    keys: keys,
                    agreementKey: device.agreementKey,
                    requestNonce: request.nonce,
                    exportAllowed: policy.exportAllowed,
                    now: now
                )
            }
        }
    }

    // MARK: POST /v1/leases/LEASE_ID/first-play

    /// Records when playback of a lease started on its device (docs/key-protocol-extensions.md).
    func recordFirstPlay(leaseID: String, body: [UInt8], signature: String?, source: String) async throws -> FirstPlayResponse {
        let now = clock.now
        return try await audited("first-play", at: now) { record in
            try admit(source)
            record.leaseID = String(leaseID.prefix(64))
            let request = try decode(FirstPlayReport.self, from: body)
            record.deviceID = String(request.deviceId.prefix(64))
            try checkVersion(request.version)
            guard request.leaseId == leaseID else { throw malformed("the body's leaseId is not the lease in the URL") }
            guard KeyProtocol.isValidDeviceID(request.deviceId) else { throw malformed("deviceId must be 32 lowercase hex digits") }
            guard request.firstPlayedAt <= now + KeyProtocol.clockLeeway else { throw malformed("firstPlayedAt is in the future") }
            let nonce = try decodeNonce(request.nonce)
            let device = try await registeredDevice(request.deviceId, signature: signature, body: body)
            try admit("device:" + device.id)
            try checkClientTime(request.clientTime, now: now)
            record.event = .firstPlayReported
            record.detail = "firstPlayedAt \(request.firstPlayedAt)"
            switch try await store.recordFirstPlay(
                leaseID: leaseID,
                deviceID: device.id,
                at: request.firstPlayedAt,
                nonce: RequestNonce(nonce, window: Self.replayWindow),
                now: now,
                audit: record
            ) {
            case .recorded(let first): return FirstPlayResponse(firstPlayedAt: first)
            case .replayed: throw replayed
            case .unknownLease: throw KeyServerError(.unknownLease, "device \(device.id) holds no lease \(leaseID)")
            }
        }
    }

    // MARK: POST /v1/leases/LEASE_ID/release

    /// Marks a lease released (idempotent): the client has erased its keys, and the device slot is freed.
    func release(leaseID: String, body: [UInt8], signature: String?, source: String) async throws {
        let now = clock.now
        try await audited("release", at: now) { record in
            try admit(source)
            record.leaseID = String(leaseID.prefix(64))
            let request = try decode(ReleaseRequest.self, from: body)
            record.deviceID = String(request.deviceId.prefix(64))
            try checkVersion(request.version)
            guard request.leaseId == leaseID else { throw malformed("the body's leaseId is not the lease in the URL") }
            guard KeyProtocol.isValidDeviceID(request.deviceId) else { throw malformed("deviceId must be 32 lowercase hex digits") }
            let nonce = try decodeNonce(request.nonce)

            let device = try await registeredDevice(request.deviceId, signature: signature, body: body)
            try admit("device:" + device.id)
            try checkClientTime(request.clientTime, now: now)
            guard let lease = try await store.lease(id: leaseID), lease.deviceID == device.id else {
                throw KeyServerError(.unknownLease, "device \(device.id) holds no lease \(leaseID)")
            }
            record.account = lease.account
            record.assetID = lease.assetID
            record.event = .released
            record.detail = "deletedAt \(request.deletedAt)"
            if let releasedAt = lease.releasedAt { record.detail = "already released at \(releasedAt)" }
            if let first = request.firstPlayedAt, first <= now + KeyProtocol.clockLeeway {
                // Learned late is better than never: a rental's window is anchored for the account's next request.
                _ = try await store.recordFirstPlay(
                    leaseID: leaseID,
                    deviceID: device.id,
                    at: first,
                    nonce: nil,
                    now: now,
                    audit: AuditRecord(
                        time: now,
                        event: .firstPlayReported,
                        operation: "release",
                        account: lease.account,
                        deviceID: device.id,
                        assetID: lease.assetID,
                        leaseID: leaseID,
                        detail: "firstPlayedAt \(first)"
                    )
                )
            }
            // Releasing a released lease changes nothing but is answered the same (idempotent).
            let recorded = try await store.releaseLease(
                id: leaseID,
                at: now,
                deletedAt: request.deletedAt,
                nonce: RequestNonce(nonce, window: Self.replayWindow),
                audit: record
            )
            guard recorded else { throw replayed }
        }
    }

    // MARK: GET /v1/identity/ASSET_ID/KEY_ID

    /// The 16 raw bytes of a content key, for ordinary HLS players streaming online with a bearer token; only where the
    /// asset's policy says `identityAllowed`, and counted as a stream of the token's account (one per token and asset,
    /// for the policy's streaming duration) against `maxStreams`.
    func identityKey(assetID: String, keyID: String, authorization: String?, source: String) async throws -> SecretBytes {
        let now = clock.now
        return try await audited("identity", at: now) { record in
            try admit(source)
            record.assetID = String(assetID.prefix(128))
            guard KeyProtocol.isValidAssetID(assetID), KeyProtocol.isValidKeyID(keyID) else {
                throw malformed("the URL must be /v1/identity/ASSET_ID/KEY_ID with KEY_ID as 32 lowercase hex digits")
            }
            let claims = try await entitlement.claims(authorization: authorization, now: now)
            record.account = claims.account
            try admit("account:" + claims.account)
            guard claims.allows(assetID) else { throw KeyServerError(.notEntitled, "the entitlement token does not list asset \(assetID)") }
            let (asset, policy) = try await assetAndPolicy(assetID)
            // The stream is named by the token itself (as verified: without the scheme's spelling or spacing), so one
            // player re-fetching keys stays one stream, and one token is one stream however its header is written.
            let bearer = EntitlementVerifier.bearerToken(authorization) ?? ""
            let token = Hex.encode(SHA256Hasher.hash(Array(bearer.utf8)).prefix(16))
            let stream = IssuedLease(
                id: UUID().uuidString.lowercased(),
                account: claims.account,
                assetID: asset.id,
                deviceID: "token:" + token,
                keyIDs: [keyID],
                type: .streaming,
                createdAt: now,
                issuedAt: now,
                storageExpiresAt: now + policy.streamingDuration,
                playbackDuration: nil,
                renewableUntil: nil
            )
            record.event = .identityKeyServed
            record.detail = "key \(keyID), stream of \(stream.deviceID)"
            let issuance = IssuanceRequest(kind: .identity, lease: stream, policy: policy, entitlement: claims.entitlement, nonce: nil, now: now)
            _ = try await save(issuance, audit: record) { _ in nil }
            // Opened only once the stream is granted: a refusal never touches the key.
            return try await openKeys(of: asset, keyIDs: [keyID])[0].key
        }
    }

    /// Records a request refused before the service read it (a body over the size limit).
    func recordRefusal(_ operation: String, _ error: KeyServerError) {
        refusals.record(AuditRecord(time: clock.now, event: .refused, operation: operation, code: error.code.rawValue, detail: error.message))
    }

    /// Deletes the nonces that left the replay window, a thousand at a time, at most a hundred thousand per call (the
    /// next call goes on). Returns how many were deleted.
    @discardableResult
    func forgetExpiredNonces() async -> Int {
        let horizon = clock.now - Self.replayWindow
        var deleted = 0
        for _ in 0..<100 {
            do {
                let batch = try await store.forgetNonces(seenAtOrBefore: horizon, limit: 1_000)
                deleted += batch
                if batch < 1_000 { break }
            } catch {
                logger.warning("cannot forget expired nonces", metadata: ["error": "\(error)"])
                break
            }
        }
        return deleted
    }

    /// Writes the aggregated refusals of the minutes that ended (all of them with `everything`, at shutdown).
    func flushRefusals(everything: Bool = false) async {
        for record in refusals.drain(before: everything ? nil : clock.now) {
            do {
                try await store.appendAudit(record)
            } catch {
                logger.error("cannot write the audit log", metadata: ["error": "\(error)"])
            }
        }
    }

    // MARK: Steps

    /// Runs one operation and counts its refusal; any error that is not a protocol error becomes `500 internal`.
    private func audited<Result>(
        _ operation: String,
        at now: Int64,
        _ body: (inout AuditRecord) async throws -> Result
    ) async throws -> Result {
        var record = AuditRecord(time: now, event: .refused, operation: operation)
        do {
            return try await body(&record)
        } catch let error as KeyServerError {
            record.event = .refused
            record.code = error.code.rawValue
            record.detail = error.message
            refusals.record(record)
            throw error
        } catch {
            logger.error("key server failure", metadata: ["operation": "\(operation)", "error": "\(error)"])
            record.event = .refused
            record.code = ErrorCode.internal.rawValue
            record.detail = "\(error)"
            refusals.record(record)
            throw KeyServerError(.internal, "the key server failed to answer; try again later")
        }
    }

    private func malformed(_ message: String) -> KeyServerError { KeyServerError(.malformedRequest, message) }

    private func decode<Message: Decodable>(_ type: Message.Type, from body: [UInt8]) throws -> Message {
        do {
            return try JSONDecoder().decode(Message.self, from: Data(body))
        } catch DecodingError.keyNotFound(let key, let context) {
            throw malformed("missing member \((context.codingPath + [key]).map(\.stringValue).joined(separator: "."))")
        } catch DecodingError.valueNotFound(_, let context), DecodingError.typeMismatch(_, let context) {
            throw malformed("member \(context.codingPath.map(\.stringValue).joined(separator: ".")) has the wrong type or is null")
        } catch DecodingError.dataCorrupted(let context) where !context.codingPath.isEmpty {
            throw malformed("member \(context.codingPath.map(\.stringValue).joined(separator: ".")) has an invalid value")
        } catch {
            throw malformed("the body is not a JSON object of this request")
        }
    }

    private func checkVersion(_ version: Int) throws {
        guard version == KeyProtocol.version else {
            throw malformed("protocol version \(version) is not supported; this server speaks version \(KeyProtocol.version)")
        }
    }

    private func decodeNonce(_ text: String) throws -> [UInt8] {
        guard let nonce = StrictBase64.decode(text, byteCount: 16) else { throw malformed("nonce must be base64 of 16 random bytes") }
        return nonce
    }

    /// Takes a token from the caller's bucket: `source:` keys from the per-address limiter, the others (`account:`,
    /// `device:`) from the per-identity one.
    private func admit(_ caller: String) throws {
        let limiter = caller.hasPrefix("source:") ? sourceLimiter : rateLimiter
        guard limiter.admit(caller, at: clock.preciseNow) else {
            throw KeyServerError(.rateLimited, "too many requests; retry in a few seconds")
        }
    }

    private func verifyDeviceSignature(_ signature: String?, body: [UInt8], key: Ed25519.PublicKey) throws {
        do {
            try RequestSigning.verify(signature, body: body, signingKey: key)
        } catch let error as SignatureVerificationError {
            throw KeyServerError(.badDeviceSignature, "\(KeyProtocol.deviceSignatureHeader): \(error.description)")
        }
    }

    /// The device of a renewal or release, with the body's signature checked against its registered key.
    private func registeredDevice(_ id: String, signature: String?, body: [UInt8]) async throws -> DeviceRecord {
        guard let device = try await store.device(id: id), let key = try? Ed25519.PublicKey(rawRepresentation: device.signingKey) else {
            throw KeyServerError(.badDeviceSignature, "device \(id) is not registered; its first request must be POST /v1/keys")
        }
        try verifyDeviceSignature(signature, body: body, key: key)
        return device
    }

    /// Binds a device ID to the public keys it first presents; later requests must present the same keys.
    private func bindDevice(id: String, signingKey: [UInt8], agreementKey: [UInt8], now: Int64) async throws -> DeviceRecord {
        func matches(_ device: DeviceRecord) -> Bool { device.signingKey == signingKey && device.agreementKey == agreementKey }
        let mismatch = KeyServerError(.deviceKeyMismatch, "device \(id) is registered with other public keys")
        if let known = try await store.device(id: id) {
            guard matches(known) else { throw mismatch }
            return known
        }
        // docs/key-protocol.md, "Device identity": the ID is the first 16 bytes of SHA-256(signingKey || agreementKey).
        guard DeviceIdentifier.make(signingKey: signingKey, agreementKey: agreementKey) == id else {
            throw KeyServerError(.deviceKeyMismatch, "device ID \(id) is not derived from these public keys")
        }
        let registered = try await store.registerDevice(
            DeviceRecord(id: id, signingKey: signingKey, agreementKey: agreementKey, firstSeenAt: now)
        )
        guard matches(registered) else { throw mismatch }
        return registered
    }

    private var replayed: KeyServerError {
        KeyServerError(.replayedRequest, "this request's nonce was already used; send a fresh random nonce")
    }

    private func assetAndPolicy(_ assetID: String) async throws -> (AssetRecord, AssetPolicy) {
        guard let asset = try await store.asset(id: assetID) else {
            throw KeyServerError(.unknownAsset, "this key server has no asset \(assetID)")
        }
        guard let policy = configuration.policy(named: asset.policy) else { throw KeyServiceFailure.unknownPolicy(asset.policy, asset: asset.id) }
        return (asset, policy)
    }

    /// The content keys, opened from their sealed records, in the order asked.
    private func openKeys(of asset: AssetRecord, keyIDs: [String]) async throws -> [(keyID: String, key: SecretBytes)] {
        let records = try await store.contentKeys(assetID: asset.id, keyIDs: keyIDs)
        let byID = Dictionary(records.map { ($0.keyID, $0) }, uniquingKeysWith: { first, _ in first })
        return try keyIDs.map { keyID in
            guard let record = byID[keyID] else { throw KeyServerError(.unknownKey, "asset \(asset.id) has no key \(keyID)") }
            return (keyID, try masterKeys.open(record))
        }
    }

    private func makePayload(
        for lease: IssuedLease,
        keys: [(keyID: String, key: SecretBytes)],
        agreementKey: [UInt8],
        requestNonce: String,
        exportAllowed: Bool,
        now: Int64
    ) throws -> SignedPayload {
        let wrapped: [LeasePayload.WrappedKey]
        do {
            wrapped = try keys.map { keyID, key in
                try KeyWrapping.wrap(contentKey: key, keyID: keyID, leaseID: lease.id, deviceID: lease.deviceID, deviceAgreementKey: agreementKey)
            }
        } catch let error as KeyWrappingError where error == .invalidAgreementKey {
            throw malformed("the device's agreementKey is not a usable X25519 public key")
        }
        let payload = LeasePayload(
            lease: .init(
                leaseId: lease.id,
                assetId: lease.assetID,
                deviceId: lease.deviceID,
                keyIds: lease.keyIDs,
                type: lease.type,
                issuedAt: lease.issuedAt,
                storageExpiresAt: lease.storageExpiresAt,
                playbackDuration: lease.playbackDuration,
                renewableUntil: lease.renewableUntil,
                requestNonce: requestNonce,
                firstPlayedAt: lease.firstPlayedAt,
                exportAllowed: exportAllowed ? true : nil
            ),
            keys: wrapped,
            serverTime: now
        )
        return try PayloadSigning.sign(payload, with: signingKey)
    }

    /// Settles, signs and stores the lease with its audit record through ``LeaseIssuance``, recording the nonce in the
    /// same transaction.
    private func save(
        _ request: IssuanceRequest,
        audit: AuditRecord,
        sign: @escaping @Sendable (IssuedLease) throws -> SignedPayload?
    ) async throws -> SignedPayload {
        switch try await store.saveLease(request, audit: audit, sign: sign) {
        case .saved(_, let payload):
            return payload ?? SignedPayload(payload: "", signature: "")
        case .replayed:
            throw replayed
        case .refused(let refusal):
            throw KeyServerError(refusal.code, refusal.message)
        }
    }

    /// Refuses a request whose `clientTime` is further from the server's clock than `maxClockSkew`: a request captured
    /// and sent again later is refused by its time even after its nonce has left the replay window, which is always at
    /// least twice as long.
    private func checkClientTime(_ clientTime: Int64?, now: Int64) throws {
        guard let clientTime else { return }
        let skew = configuration.maxClockSkew
        guard clientTime >= now - skew, clientTime <= now + skew else {
            let gap = clientTime < now ? "\(HumanTime.duration(now - clientTime)) behind" : "\(HumanTime.duration(clientTime - now)) ahead of"
            throw KeyServerError(
                .clockSkew,
                "the request's clientTime (\(HumanTime.date(clientTime))) is \(gap) the key server's clock "
                    + "(\(HumanTime.date(now))), more than the \(HumanTime.duration(skew)) allowed; set the device's clock "
                    + "right (or send a fresh request) and try again"
            )
        }
    }
}

/// Server-side faults that are not the client's: they answer `500 internal` and are logged.
enum KeyServiceFailure: Error, CustomStringConvertible {
    case unknownPolicy(String, asset: String)

    var description: String {
        switch self {
        case .unknownPolicy(let policy, let asset): "asset \(asset) refers to policy \"\(policy)\", which config.json does not define"
        }
    }
}
