import Foundation
import KeyDelivery
import KeyServer
import StowageCore
import StowageCrypto
import Testing

/// Every server-side control holds against a normal client (docs/SECURITY.md, "Server: no side door"): the raw-key
/// endpoint, stream limits, rentals asked for twice, tokens, rate limits, and the audit of refusals.
struct ServerSideDoorTests {
    // MARK: Identity keys

    @Test func theRawKeyEndpointIsOffByDefault() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token(assets: ["movie-1"])
        try await fixture.withLiveServer { client in
            let reply = try await client.get("/v1/identity/movie-1/\(KeyServerFixture.movieKeyIDs[0])", token: token)
            #expect(reply.status == 403)
            #expect(reply.errorCode == "not_entitled")
            #expect(String(decoding: reply.body, as: UTF8.self).contains("identityAllowed"))
            #expect(!reply.body.isEmpty && reply.body != Hex.decode(KeyServerFixture.movieKeys[0]))
        }
    }

    @Test func rawKeysAndStreamingLeasesCountAgainstMaxStreams() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.policies["default"]?.identityAllowed = true
            configuration.policies["default"]?.maxStreams = 1
            configuration.policies["default"]?.streamingDuration = 3_600
        }
        defer { fixture.remove() }
        // Two players of one account: two tokens (different lifetimes make different tokens).
        let first = try await fixture.token(assets: ["movie-1"], ttl: 86_400)
        let second = try await fixture.token(assets: ["movie-1"], ttl: 86_401)
        #expect(first != second)
        let path = "/v1/identity/movie-1/\(KeyServerFixture.movieKeyIDs[0])"
        try await fixture.withLiveServer { client in
            // One player fetching keys again and again is one stream.
            for _ in 0..<3 { #expect(try await client.get(path, token: first).status == 200) }
            let refused = try await client.get(path, token: second)
            #expect(refused.status == 403)
            #expect(refused.errorCode == "stream_limit_reached")
            // A streaming lease of a device of the same account is a stream too.
            let device = try TestDevice()
            let streaming = try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]], lease: .streaming)
            #expect(try await client.requestKeys(streaming, token: first).errorCode == "stream_limit_reached")
            // Another account is not affected.
            let bob = try await fixture.token("bob", assets: ["movie-1"])
            #expect(try await client.get(path, token: bob).status == 200)
            // Once the first stream's lease ends, the second player may stream.
            fixture.clock.advance(by: 3_601)
            #expect(try await client.get(path, token: second).status == 200)
        }
    }

    // MARK: Rentals

    @Test func aSecondRequestForARentalDoesNotRestartItsPlaybackWindow() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.policies["once"] = AssetPolicy(
                storageDuration: 7 * 86_400,
                playbackDuration: 86_400,
                renewable: false,
                renewalExtension: 86_400,
                renewableFor: 0,
                maxDevices: nil,
                oncePerAccount: true
            )
        }
        defer { fixture.remove() }
        try await fixture.directory.addAsset(
            id: "film",
            keyID: KeyServerFixture.rentalKeyID,
            key: SecretBytes(Hex.decode(KeyServerFixture.rentalKey)!),
            policy: "once",
            clock: fixture.clock.keyServerClock
        )
        let token = try await fixture.token(assets: ["film"])
        let start = fixture.clock.now
        let phone = try TestDevice()
        let laptop = try TestDevice()
        try await fixture.withLiveServer { client in
            let serverKey = try await client.serverKey()
            func acquire(_ device: TestDevice) async throws -> LeasePayload {
                let reply = try await client.requestKeys(try device.keyRequest(asset: "film", keyIDs: [KeyServerFixture.rentalKeyID]), token: token)
                #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
                return try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: serverKey)
            }
            let first = try await acquire(phone)
            #expect(first.lease.firstPlayedAt == nil)
            // The phone plays and says so (a sync).
            fixture.clock.advance(by: 100)
            let nonce = TestDevice.freshNonce()
            let report = try phone.sign(
                FirstPlayReport(leaseId: first.lease.leaseId, deviceId: phone.id, nonce: nonce, firstPlayedAt: start + 100),
                nonce: nonce
            )
            let recorded = try await client.post("/v1/leases/\(first.lease.leaseId)/first-play", report, token: nil)
            #expect(recorded.status == 200)
            #expect(try recorded.decode(FirstPlayResponse.self).firstPlayedAt == start + 100)

            // Asking again from another device of the account: the same windows, signed into the new payload.
            fixture.clock.advance(by: 3_600)
            let second = try await acquire(laptop)
            #expect(second.lease.leaseId != first.lease.leaseId)
            #expect(second.lease.firstPlayedAt == start + 100)
            #expect(second.lease.storageExpiresAt == first.lease.storageExpiresAt)
            // The client plays the window from that first play: it ends a day after the phone started.
            let record = LeaseRecord(terms: LeaseTerms(second.lease), state: .persisted)
            #expect(record.playbackEndsAt == start + 100 + 86_400)
            let rules = LeaseRules.standard(highWaterMark: TimeHighWaterMark())
            #expect(rules.authorize(record, at: start + 100 + 86_400).error?.reason == .playbackWindowExpired)

            // After the window, asking again is refused.
            fixture.clock.advance(by: 86_400)
            let late = try await client.requestKeys(try laptop.keyRequest(asset: "film", keyIDs: [KeyServerFixture.rentalKeyID]), token: token)
            #expect(late.status == 403)
            #expect(late.errorCode == "not_entitled")
            #expect(String(decoding: late.body, as: UTF8.self).contains("rental"))
        }
    }

    @Test func aRentalAskedForAgainWithoutAReportStartsItsWindowAtTheSecondRequest() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.policies["default"]?.oncePerAccount = true
        }
        defer { fixture.remove() }
        let token = try await fixture.token(assets: ["movie-1"])
        let device = try TestDevice()
        try await fixture.withLiveServer { client in
            let serverKey = try await client.serverKey()
            func acquire() async throws -> LeasePayload {
                let reply = try await client.requestKeys(
                    try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]]),
                    token: token
                )
                return try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: serverKey)
            }
            #expect(try await acquire().lease.firstPlayedAt == nil)
            fixture.clock.advance(by: 500)
            let asked = fixture.clock.now
            #expect(try await acquire().lease.firstPlayedAt == asked)
            fixture.clock.advance(by: 400)
            #expect(try await acquire().lease.firstPlayedAt == asked)
        }
    }

    @Test func aRenewalRecordsTheFirstPlayItReports() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token(assets: ["movie-1"])
        let device = try TestDevice()
        try await fixture.withLiveServer { client in
            let serverKey = try await client.serverKey()
            let reply = try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]]), token: token)
            let lease = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: serverKey).lease
            fixture.clock.advance(by: 600)
            let nonce = TestDevice.freshNonce()
            let renewal = try device.sign(
                RenewRequest(
                    leaseId: lease.leaseId,
                    deviceId: device.id,
                    nonce: nonce,
                    clientTime: fixture.clock.now,
                    firstPlayedAt: lease.issuedAt + 60
                ),
                nonce: nonce
            )
            let renewed = try await client.renew(lease.leaseId, renewal, token: token)
            let payload = try PayloadSigning.verify(try renewed.decode(SignedPayload.self), serverKey: serverKey)
            #expect(payload.lease.firstPlayedAt == lease.issuedAt + 60)
        }
        #expect(try await fixture.directory.openStore().auditRecords(limit: 10).contains { $0.event == .renewed })
    }

    // MARK: Tokens

    /// An HS256 JWT over `claims`, signed with the server's `token-secret` by hand (RFC 7519, RFC 7515), so the test
    /// does not lean on the minting code it checks.
    private static func token(_ claims: [String: Any], fixture: KeyServerFixture) throws -> String {
        func base64URL(_ bytes: [UInt8]) -> String {
            StrictBase64.encode(bytes).replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let header = base64URL(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let body = base64URL(Array(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])))
        let secret = try Data(contentsOf: URL(fileURLWithPath: fixture.directory.path(of: KeyServerDataDirectory.tokenSecretFile)))
        let signature = try HMACSHA256.authenticationCode(for: Array("\(header).\(body)".utf8), key: SecretBytes(secret))
        return "\(header).\(body).\(base64URL(signature))"
    }

    @Test func tokensNeedAnAudienceAnIssueTimeAndABoundedLifetime() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.maxTokenLifetime = 86_400
            configuration.allowWildcardAssets = false
        }
        defer { fixture.remove() }
        let audience = try fixture.directory.loadConfiguration().tokenAudience
        let now = fixture.clock.now
        let good: [String: Any] = ["sub": "alice", "assets": ["movie-1"], "iat": now, "exp": now + 3_600, "aud": audience]
        func without(_ key: String) -> [String: Any] { good.filter { $0.key != key } }
        func with(_ key: String, _ value: Any) -> [String: Any] { good.merging([key: value]) { _, new in new } }
        let cases: [(String, [String: Any], String?)] = [
            ("well formed", good, nil),
            ("no aud", without("aud"), "aud"),
            ("another server's aud", with("aud", "stowage:someone-else"), "aud"),
            ("no iat", without("iat"), "iat"),
            ("issued in the future", with("iat", now + 3_600), "future"),
            ("lives too long", with("exp", now + 2 * 86_400), "longer"),
            ("every asset", with("assets", ["*"]), "every asset"),
        ]
        try await fixture.withLiveServer { client in
            for (name, claims, complaint) in cases {
                let device = try TestDevice()
                let reply = try await client.requestKeys(
                    try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]]),
                    token: try Self.token(claims, fixture: fixture)
                )
                if let complaint {
                    #expect(reply.errorCode == "invalid_token", "\(name)")
                    #expect(
                        String(decoding: reply.body, as: UTF8.self).contains(complaint),
                        "\(name): \(String(decoding: reply.body, as: UTF8.self))"
                    )
                } else {
                    #expect(reply.status == 200, "\(name): \(String(decoding: reply.body, as: UTF8.self))")
                }
            }
        }
        // The minting side refuses what the server would refuse.
        await #expect(throws: KeyServerSetupError.self) {
            try await fixture.directory.makeToken(subject: "alice", assets: ["*"], ttl: 3_600, clock: fixture.clock.keyServerClock)
        }
        await #expect(throws: KeyServerSetupError.self) {
            try await fixture.directory.makeToken(subject: "alice", assets: ["movie-1"], ttl: 2 * 86_400, clock: fixture.clock.keyServerClock)
        }
    }

    // MARK: Rate limits and the audit of refusals

    @Test func aFloodIsCutPerSourceBeforeAnythingIsVerified() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.sourceRateLimit = .init(requestsPerSecond: 0.1, burst: 5)
        }
        defer { fixture.remove() }
        let device = try TestDevice()
        try await fixture.withLiveServer { client in
            var codes: [String?] = []
            for _ in 0..<7 {
                // No token at all: before the limit, each is read and refused as invalid_token.
                codes.append(
                    try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]]), token: nil)
                        .errorCode
                )
            }
            #expect(codes == Array(repeating: "invalid_token", count: 5) + ["rate_limited", "rate_limited"])
        }
    }

    @Test func spammingSomeoneElsesDeviceIDDoesNotLockThemOut() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.rateLimit = .init(requestsPerSecond: 0.01, burst: 2)
            configuration.sourceRateLimit = .init(requestsPerSecond: 100, burst: 1_000)
        }
        defer { fixture.remove() }
        let victim = try TestDevice()
        let attacker = try TestDevice()
        let attackerToken = try await fixture.token("mallory", assets: ["movie-1"])
        let victimToken = try await fixture.token("alice", assets: ["movie-1"])
        try await fixture.withLiveServer { client in
            // The attacker names the victim's device but cannot sign as it.
            for _ in 0..<10 {
                let nonce = TestDevice.freshNonce()
                let request = KeyRequest(
                    assetId: "movie-1",
                    keyIds: [KeyServerFixture.movieKeyIDs[0]],
                    lease: .persistent,
                    nonce: nonce,
                    clientTime: fixture.clock.now,
                    device: victim.publicInfo
                )
                let forged = try attacker.sign(request, nonce: nonce)
                #expect(try await client.requestKeys(forged, token: attackerToken).errorCode == "bad_device_signature")
            }
            let genuine = try await client.requestKeys(
                try victim.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]]),
                token: victimToken
            )
            #expect(genuine.status == 200)
        }
    }

    @Test func refusalsAreWrittenAggregatedNotOnePerRequest() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let device = try TestDevice()
        try await fixture.withLiveServer { client in
            for _ in 0..<20 {
                let reply = try await client.requestKeys(
                    try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]]),
                    token: "not-a-token"
                )
                #expect(reply.errorCode == "invalid_token")
            }
            // While the server runs, nothing of the flood is written yet.
            #expect(try await fixture.directory.openStore().auditRecords(limit: 100).filter { $0.event == .refused }.isEmpty)
            await fixture.server.flushAudit()
            let refused = try await fixture.directory.openStore().auditRecords(limit: 100).filter { $0.event == .refused }
            #expect(refused.reduce(0) { $0 + $1.count } == 20)
            #expect((1...2).contains(refused.count))
            #expect(refused.allSatisfy { $0.code == "invalid_token" && $0.operation == "keys" })
        }
    }
}
