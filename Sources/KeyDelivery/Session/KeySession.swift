public import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
import StowageCore
public import StowageCrypto

/// The client side of docs/key-protocol.md: asks the key server for keys, verifies every answer with the key pinned
/// for that server's URL, and keeps persistent leases in the ``KeyStore``. Content keys are only ever returned as
/// ``SecretBytes``.
///
/// A session talks to one key server, which the caller has decided to trust (``KeyServerTrust``): the bearer token
/// goes to that server only, and plain `http` is refused unless the server is on a loopback address.
public struct KeySession: Sendable {
    static let nonceByteCount = 16
    static let maxResponseBytes = 1 << 20

    public let clock: any Clock
    public let http: HTTPClient
    public let store: KeyStore
    public let device: DeviceIdentity
    /// The key server's base URL, e.g. `https://keys.example.com` (no trailing path needed).
    public let serverURL: URL
    /// ``serverURL`` normalized: what pins and leases are recorded under.
    public var keyServer: String { KeyServerURL.normalized(serverURL) ?? serverURL.absoluteString }
    /// The entitlement JWT sent as `Authorization: Bearer` with key and renewal requests.
    public let token: String?
    /// Seconds allowed for each HTTP request.
    public let timeoutSeconds: Int64

    public init(
        clock: any Clock,
        http: HTTPClient,
        store: KeyStore,
        device: DeviceIdentity,
        serverURL: URL,
        token: String?,
        timeoutSeconds: Int64 = 30
    ) {
        self.clock = clock
        self.http = http
        self.store = store
        self.device = device
        self.serverURL = serverURL
        self.token = token
        self.timeoutSeconds = timeoutSeconds
    }

    /// The keys of one acquisition. `keys` holds the unwrapped keys of a streaming lease (memory only); it is empty
    /// for a persistent lease, whose keys are read with ``KeySession/contentKeys(leaseId:)``.
    public struct Acquisition: Sendable, CustomStringConvertible {
        public let terms: LeaseTerms
        /// The stored record (persistent leases only).
        public let record: LeaseRecord?
        public let keys: [String: SecretBytes]
        public let serverTime: Int64

        public var description: String {
            "Acquisition(lease: \(terms.leaseId), asset: \(terms.assetId), type: \(terms.type.rawValue), keys: \(keys.count) in memory)"
        }
    }

    /// What ``KeySession/sync()`` did.
    public struct SyncReport: Codable, Sendable, Hashable {
        /// Leases whose first play the server acknowledged.
        public var reported: [String] = []
        /// Leases the server confirmed released.
        public var released: [String] = []
        /// Leases still queued (a release or a first-play report), with the reason.
        public var failed: [String: String] = [:]
        public var isComplete: Bool { failed.isEmpty }

        public init(reported: [String] = [], released: [String] = [], failed: [String: String] = [:]) {
            self.reported = reported
            self.released = released
            self.failed = failed
        }
    }

    // MARK: Operations

    /// `POST /v1/keys`: requests `keyIds` of `assetId` under a `lease` lease, verifies the answer and, for a
    /// persistent lease, stores it; for a streaming lease, returns the unwrapped keys and stores nothing but the
    /// journal entry.
    ///
    /// - Parameter superseding: store a persistent lease as one of the asset's leases, taking the asset's first play and
    ///   returning the older leases it covers in the same transaction (``KeyStore/persist(_:keyServer:at:superseding:)``):
    ///   a live recording's group lease.
    public func acquire(assetId: String, keyIds: [String], lease: LeaseType, superseding: Bool = false) async throws -> Acquisition {
        // Asking again must not restart a playback window: the server hears of earlier plays first. A server that cannot
        // be told is recorded in the report and the request goes on (the server also counts the request itself as a
        // play under a once-per-account policy); a key store that cannot be read stops it, as storing would.
        _ = try await reportFirstPlays(assetId: assetId)
        var attempt = 1
        while true {
            do {
                let (request, signed) = try await requestKeys(assetId: assetId, keyIds: keyIds, lease: lease)
                return try await accept(signed, for: request, superseding: superseding)
            } catch let error as KeySessionError where error.answerMayBeLost && attempt < Self.keyRequestAttempts {
                // The server may have saved a lease whose answer was lost. Asking again (a fresh nonce) is safe: the
                // server's new lease supersedes that one for this device (releasing it and keeping its first play),
                // so it holds no device slot and starts no second window (docs/key-protocol-extensions.md).
                try await Task.sleep(for: Self.keyRequestBackoff.delay(afterFailures: attempt))
                attempt += 1
            }
        }
    }

    /// The waits between those requests: 0.5 s, then 1 s.
    static let keyRequestBackoff = Backoff(initial: .milliseconds(500), maximum: .seconds(2))

    /// How many times ``acquire(assetId:keyIds:lease:superseding:)`` sends a key request whose answer may have been
    /// lost (0.5 s, then 1 s apart). A server that cannot be reached at all is not asked again here: a download waits
    /// such outages out with its own back-off.
    static let keyRequestAttempts = 3

    /// The network half of ``acquire(assetId:keyIds:lease:)``: sends the signed request and returns the signed payload
    /// as received, verifying nothing.
    public func requestKeys(assetId: String, keyIds: [String], lease: LeaseType) async throws -> (KeyRequest, SignedPayload) {
        guard KeyProtocol.isValidAssetID(assetId) else { throw KeySessionError.invalidRequest("invalid asset ID \(assetId)") }
        guard !keyIds.isEmpty, keyIds.allSatisfy(KeyProtocol.isValidKeyID) else {
            throw KeySessionError.invalidRequest("key IDs must be 32 lowercase hex digits")
        }
        let request = KeyRequest(
            assetId: assetId,
            keyIds: keyIds,
            lease: lease,
            nonce: try Self.freshNonce(),
            clientTime: clock.now,
            device: device.publicInfo
        )
        let body = try await post("/v1/keys", request, bearer: true)
        return (request, try decode(SignedPayload.self, body, answering: "POST /v1/keys"))
    }

    /// The checking half of ``acquire(assetId:keyIds:lease:)``: verifies `signed` with the pinned server key (pinning
    /// it first if needed), checks it answers `request`, records the acquisition and stores a persistent lease.
    /// Nothing is stored when a check fails.
    public func accept(_ signed: SignedPayload, for request: KeyRequest, superseding: Bool = false) async throws -> Acquisition {
        let verified = try await verify(signed)
        let lease = verified.payload.lease
        try Self.check("requestNonce", expected: request.nonce, got: lease.requestNonce)
        try Self.check("assetId", expected: request.assetId, got: lease.assetId)
        try Self.check("deviceId", expected: device.deviceId, got: lease.deviceId)
        try Self.check("lease type", expected: request.lease.rawValue, got: lease.type.rawValue)
        try Self.check("keyIds", expected: request.keyIds.sorted().joined(separator: ","), got: lease.keyIds.sorted().joined(separator: ","))
        try Self.check(
            "wrapped keys",
            expected: lease.keyIds.sorted().joined(separator: ","),
            got: verified.payload.keys.map(\.keyId).sorted().joined(separator: ",")
        )
        let now = clock.now
        try Self.checkClock(now: now, serverTime: verified.payload.serverTime)
        try store.recordAcquisition(verified, at: now)
        switch lease.type {
        case .persistent:
            let record = try store.persist(verified, keyServer: keyServer, at: now, superseding: superseding)
            return Acquisition(terms: verified.terms, record: record, keys: [:], serverTime: verified.payload.serverTime)
        case .streaming:
            let keys = try verified.payload.unwrappedKeys(for: device)
            return Acquisition(terms: verified.terms, record: nil, keys: keys, serverTime: verified.payload.serverTime)
        }
    }

    /// The content keys of a stored lease, keyed by key ID, unwrapped with the device's X25519 key, after the lease
    /// was authenticated (its payload verified again with the pinned key). Works offline; does not authorize playback
    /// (see ``KeyStore/authorizePlayback(assetId:keyIds:at:)``).
    public func contentKeys(leaseId: String) throws -> [String: SecretBytes] {
        try store.contentKeys(leaseId: leaseId, device: device)
    }

    /// `POST /v1/leases/ID/renew`: verifies the new payload with the key pinned for the lease's key server and stores
    /// it in place of the old one, which clears that lease's latches (and no other's). The first play, if any, travels with the
    /// request so the server learns when the playback window started.
    ///
    /// Never pins on first use: a lease was stored under a pinned key, and a pin that is gone must not be replaced by
    /// whatever the server presents now.
    @discardableResult
    /// - Parameter initiatedBy: who asked, recorded in the audit journal's renewal entry (`service` for the download
    ///   service's lease upkeep); nil for the user.
    public func renew(leaseId: String, initiatedBy: String? = nil) async throws -> LeaseRecord {
        guard let stored = try store.lease(id: leaseId) else { throw KeySessionError.leaseNotStored(leaseId) }
        try requireLeaseServer(stored)
        guard try store.pinnedServerKey(for: keyServer) != nil else { throw KeyStoreError.serverKeyNotPinned(url: keyServer) }
        let firstPlayedAt = stored.record.firstPlayedAt
        let request = RenewRequest(
            leaseId: leaseId,
            deviceId: device.deviceId,
            nonce: try Self.freshNonce(),
            clientTime: clock.now,
            firstPlayedAt: firstPlayedAt
        )
        let body = try await post("/v1/leases/\(leaseId)/renew", request, bearer: true)
        let verified = try await verify(try decode(SignedPayload.self, body, answering: "POST /v1/leases/\(leaseId)/renew"))
        let lease = verified.payload.lease
        try Self.check("requestNonce", expected: request.nonce, got: lease.requestNonce)
        try Self.check("leaseId", expected: leaseId, got: lease.leaseId)
        try Self.check("assetId", expected: stored.assetId, got: lease.assetId)
        try Self.check("deviceId", expected: device.deviceId, got: lease.deviceId)
        try Self.checkClock(now: clock.now, serverTime: verified.payload.serverTime)
        let record = try store.renew(verified, at: clock.now, initiatedBy: initiatedBy)
        if firstPlayedAt != nil { try store.markFirstPlayReported(leaseId: leaseId, at: clock.now) }
        return record
    }

    /// Refuses an answer whose `serverTime` is further ahead of this device's clock than the protocol's leeway: the lease
    /// is judged against its payload's `serverTime`, so it would be refused at once as if the clock had been set back
    /// (`clock_rollback_detected`). A clock that is ahead is no such trap: leases end early by the device's clock, and
    /// setting it right later is a rollback each lease's renewal clears.
    static func checkClock(now: Int64, serverTime: Int64) throws {
        guard serverTime - now > KeyProtocol.clockLeeway else { return }
        throw KeySessionError(
            code: .clockBehind,
            message: "this device's clock (\(HumanTime.date(now))) is \(HumanTime.duration(serverTime - now)) behind the key server's "
                + "(\(HumanTime.date(serverTime))); a lease stored now would be refused as if the clock had been set back, so none "
                + "was stored. Set the clock right (`timedatectl set-ntp true`), then try again"
        )
    }

    /// `POST /v1/leases/ID/first-play` for every lease from this key server whose playback started and was not
    /// reported yet (docs/key-protocol-extensions.md). Failures are kept for the next sync.
    @discardableResult
    public func reportFirstPlays(assetId: String? = nil) async throws -> SyncReport {
        var report = SyncReport()
        for lease in try store.pendingFirstPlayReports() where lease.keyServer == keyServer && (assetId == nil || lease.assetId == assetId) {
            guard let firstPlayedAt = lease.record.firstPlayedAt else { continue }
            do {
                let message = FirstPlayReport(
                    leaseId: lease.leaseId,
                    deviceId: device.deviceId,
                    nonce: try Self.freshNonce(),
                    firstPlayedAt: firstPlayedAt,
                    clientTime: clock.now
                )
                let path = "/v1/leases/\(lease.leaseId)/first-play"
                _ = try decode(FirstPlayResponse.self, try await post(path, message, bearer: false), answering: "POST \(path)")
                try store.markFirstPlayReported(leaseId: lease.leaseId, at: clock.now)
                report.reported.append(lease.leaseId)
            } catch let error as KeySessionError {
                report.failed[lease.leaseId] = error.description
                if error.code == KeySessionError.unreachable("").code { break }
            }
        }
        return report
    }

    /// Tells this key server what it must know: first plays (``reportFirstPlays(assetId:)``), then every queued release
    /// of its leases (`POST /v1/leases/ID/release`); a lease the server confirms is marked released, any other outcome is
    /// recorded and the release stays queued. Safe to call again; loses nothing when the server is down.
    @discardableResult
    public func sync() async throws -> SyncReport {
        var report = try await reportFirstPlays()
        var unreachable: KeySessionError?
        for pending in try store.pendingReleases() where pending.keyServer == keyServer {
            do {
                // Once the server cannot be reached, the rest are recorded as failed without waiting on each.
                if let unreachable { throw unreachable }
                let request = pending.request(nonce: try Self.freshNonce(), clientTime: clock.now)
                let path = "/v1/leases/\(pending.leaseId)/release"
                let response = try decode(ReleaseResponse.self, try await post(path, request, bearer: false), answering: "POST \(path)")
                guard response.released else {
                    throw KeySessionError.unexpectedResponse(
                        server: keyServer,
                        request: "POST \(path)",
                        status: 200,
                        detail: "a release answer that says it was not released"
                    )
                }
                try store.markReleased(leaseId: pending.leaseId, at: clock.now)
                report.released.append(pending.leaseId)
            } catch let error as KeySessionError {
                if error.code == KeySessionError.unreachable("").code { unreachable = error }
                try store.recordReleaseFailure(leaseId: pending.leaseId, error: error.description, at: clock.now)
                report.failed[pending.leaseId] = error.description
            }
        }
        return report
    }

    /// Returns every lease of `assetId` (erasing its key material, queueing releases), then tries to send the
    /// releases. The return itself never needs the server.
    public func returnAsset(assetId: String) async throws -> (returned: [LeaseRecord], sync: SyncReport) {
        let returned = try store.returnAsset(assetId: assetId, at: clock.now)
        return (returned, try await sync())
    }

    // MARK: Server key pinning

    /// The key pinned for this key server, fetching `GET /v1/server-key` and pinning it on first use. When a key is
    /// already pinned, nothing is fetched.
    public func pinnedServerKey() async throws -> Ed25519.PublicKey {
        if let pinned = try store.pinnedServerKey(for: keyServer) { return pinned }
        let presented = try await fetchServerKey()
        try store.pin(presented, for: keyServer, at: clock.now)
        return presented
    }

    /// Fetches `GET /v1/server-key` and throws `server_key_mismatch` if a different key is pinned for this server.
    public func checkServerKey() async throws {
        let presented = try await fetchServerKey()
        let pinned = try await pinnedServerKey()
        guard pinned.rawRepresentation == presented.rawRepresentation else {
            throw KeyStoreError.serverKeyMismatch(
                url: keyServer,
                pinned: StrictBase64.encode(pinned.rawRepresentation),
                presented: StrictBase64.encode(presented.rawRepresentation)
            )
        }
    }

    private func requireLeaseServer(_ lease: StoredLease) throws {
        guard lease.keyServer == keyServer else {
            throw KeySessionError.invalidRequest(
                "lease \(lease.leaseId) of asset \(lease.assetId) came from the key server \(lease.keyServer), not \(keyServer); "
                    + "its renewals and releases go there"
            )
        }
    }

    private func fetchServerKey() async throws -> Ed25519.PublicKey {
        let body = try await send(method: .GET, path: "/v1/server-key", body: nil, headers: [:])
        let response = try decode(ServerKeyResponse.self, body, answering: "GET /v1/server-key")
        guard let raw = StrictBase64.decode(response.signingKey, byteCount: 32), let key = try? Ed25519.PublicKey(rawRepresentation: raw)
        else {
            throw KeySessionError.unexpectedResponse(
                server: keyServer,
                request: "GET /v1/server-key",
                status: 200,
                detail: "a signing key that is not a 32-byte Ed25519 public key in Base64"
            )
        }
        return key
    }

    /// Verifies with the pinned key; when that fails, asks the server which key it presents now, so a changed key is
    /// reported as such rather than as a bad signature.
    private func verify(_ signed: SignedPayload) async throws -> VerifiedLeasePayload {
        let pinned = try await pinnedServerKey()
        do {
            return try VerifiedLeasePayload(signed, verifier: PinnedKeyVerifier(key: pinned))
        } catch let error as KeySessionError {
            if let presented = try? await fetchServerKey(), presented.rawRepresentation != pinned.rawRepresentation {
                throw KeyStoreError.serverKeyMismatch(
                    url: keyServer,
                    pinned: StrictBase64.encode(pinned.rawRepresentation),
                    presented: StrictBase64.encode(presented.rawRepresentation)
                )
            }
            throw error
        }
    }

    struct PinnedKeyVerifier: LeasePayloadVerifier {
        let key: Ed25519.PublicKey
        func verifiedPayload(_ signed: SignedPayload) throws -> LeasePayload {
            try KeyStore.verifiedPayload(signed, key: key)
        }
    }

    // MARK: Helpers

    private static func check(_ field: String, expected: String, got: String) throws {
        guard expected == got else { throw KeySessionError.payloadMismatch(field, expected: expected, got: got) }
    }

    static func freshNonce() throws -> String {
        StrictBase64.encode(try SecureRandom.bytes(count: nonceByteCount))
    }

    /// `body`, the 200 answer to `request` (`POST /v1/keys`), as a `Message`.
    private func decode<Message: Decodable>(_ type: Message.Type, _ body: [UInt8], answering request: String) throws -> Message {
        do {
            return try JSONDecoder().decode(type, from: Data(body))
        } catch {
            throw KeySessionError.unexpectedResponse(
                server: keyServer,
                request: request,
                status: 200,
                detail: "a body of \(body.count) bytes that is not the protocol's \(Message.self) JSON"
            )
        }
    }

    private func post(_ path: String, _ message: some Encodable, bearer: Bool) async throws -> [UInt8] {
        let body = Array(try JSONEncoder().encode(message))
        var headers = [
            "Content-Type": "application/json",
            RequestSigning.headerName: try RequestSigning.signature(for: body, with: device.signingKey),
        ]
        if bearer, let token { headers["Authorization"] = "Bearer \(token)" }
        return try await send(method: .POST, path: path, body: body, headers: headers)
    }

    /// Sends one request; a 200 answer's body is returned, any other is thrown as a ``KeySessionError``.
    private func send(method: HTTPMethod, path: String, body: [UInt8]?, headers: [String: String]) async throws -> [UInt8] {
        try KeyServerTrust.requireSecureTransport(serverURL)
        var base = serverURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let status: Int
        let bytes: [UInt8]
        let timeout = timeoutSeconds
        // The status of the head, once it came: an answer too large to read still reports the status it had.
        var headStatus: Int?
        do {
            // The head within the timeout (a key server that cannot be reached fails here, as itself), then the body
            // within what is left of it: a server trickling its answer a byte at a time does not hold the command (the
            // client's own read timeout restarts with every byte).
            let deadline = ContinuousClock.now + .seconds(timeout)
            let response = try await http.execute(request, timeout: .seconds(timeout))
            status = Int(response.status.code)
            headStatus = status
            bytes = try await withThrowingTaskGroup(of: [UInt8].self) { group in
                group.addTask { Array(try await response.body.collect(upTo: Self.maxResponseBytes).readableBytesView) }
                group.addTask {
                    try await Task.sleep(until: deadline, clock: .continuous)
                    throw KeySessionError.unreachable("no complete answer within \(timeout) s", answerMayBeLost: true)
                }
                defer { group.cancelAll() }
                guard let first = try await group.next() else { throw CancellationError() }
                return first
            }
        } catch let error as KeySessionError {
            throw error
        } catch is NIOTooManyBytesError {
            throw KeySessionError.unexpectedResponse(
                server: keyServer,
                request: "\(method.rawValue) \(path)",
                status: headStatus ?? 0,
                detail: "an answer larger than \(Self.maxResponseBytes / 1_024) KiB, more than any key server sends"
            )
        } catch {
            if NetworkErrorText.isUntrustedCertificate(error) {
                throw KeySessionError.untrustedCertificate(base, detail: NetworkErrorText.describe(error))
            }
            throw KeySessionError.unreachable(NetworkErrorText.describe(error), answerMayBeLost: !NetworkErrorText.isNetworkDown(error))
        }
        guard status == 200 else {
            if let error = try? JSONDecoder().decode(KeyProtocolErrorBody.self, from: Data(bytes)) {
                throw KeySessionError.server(code: error.error.code, message: error.error.message, httpStatus: status)
            }
            throw KeySessionError.unexpectedResponse(
                server: keyServer,
                request: "\(method.rawValue) \(path)",
                status: status,
                detail: "no Stowage error in its body (\(bytes.count) bytes)"
            )
        }
        return bytes
    }
}
