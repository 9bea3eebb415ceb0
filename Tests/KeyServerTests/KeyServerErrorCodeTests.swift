import Foundation
import KeyDelivery
import KeyServer
import StowageCrypto
import Testing

/// Every error code of docs/key-protocol.md, "Errors", triggered for real against the live server, with the status
/// the protocol pairs with it and the protocol's error body.
struct KeyServerErrorCodeTests {
    @Test func everyErrorCodeIsReachable() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.policies["doomed"] = .standard
            // Many requests from one device here; the rate limit has its own test.
            configuration.rateLimit = .init(requestsPerSecond: 1_000, burst: 1_000)
        }
        defer { fixture.remove() }
        // An asset whose policy is then removed from config.json: a server-side fault, 500 internal.
        try await fixture.directory.addAsset(
            id: "orphan",
            keyID: KeyServerFixture.liveKeyID,
            key: SecretBytes(Hex.decode(KeyServerFixture.liveKey)!),
            policy: "doomed"
        )
        var configuration = try fixture.directory.loadConfiguration()
        configuration.policies["doomed"] = nil
        try KeyServerFixture.write(configuration, to: fixture.directory)
        let server = try await KeyServerApplication(dataDirectory: fixture.directory, clock: fixture.clock.keyServerClock)
        let fixtureWithoutDoomed = KeyServerFixture(directory: fixture.directory, clock: fixture.clock, server: server)

        let token = try await fixture.token()
        let movieKey = [KeyServerFixture.movieKeyIDs[0]]
        let device = try TestDevice()
        var seen: [String: Int] = [:]

        try await fixtureWithoutDoomed.withLiveServer { client in
            func record(_ reply: LiveClient.Reply, _ expected: KeyProtocolErrorCode, sourceLocation: SourceLocation = #_sourceLocation) {
                #expect(reply.errorCode == expected.rawValue, sourceLocation: sourceLocation)
                #expect(reply.status == expected.httpStatus, sourceLocation: sourceLocation)
                #expect(reply.contentType == "application/json", sourceLocation: sourceLocation)
                let body = try? JSONDecoder().decode(KeyProtocolErrorBody.self, from: Data(reply.body))
                #expect(body?.error.message.isEmpty == false, sourceLocation: sourceLocation)
                if let code = reply.errorCode { seen[code] = reply.status }
            }

            // 400 malformed_request: not JSON, a missing member, a bad nonce, an unknown version.
            record(try await client.post("/v1/keys", nil, token: token, rawBody: Array("{not json".utf8)), .malformedRequest)
            record(
                try await client.post("/v1/keys", nil, token: token, rawBody: Array(#"{"version":1,"assetId":"movie-1"}"#.utf8)),
                .malformedRequest
            )
            var badNonce = KeyRequest(
                assetId: "movie-1",
                keyIds: movieKey,
                lease: .persistent,
                nonce: "AAAA",
                clientTime: 0,
                device: device.publicInfo
            )
            record(try await client.requestKeys(try device.sign(badNonce, nonce: "AAAA"), token: token), .malformedRequest)
            badNonce.nonce = TestDevice.freshNonce()
            badNonce.version = 2
            record(try await client.requestKeys(try device.sign(badNonce, nonce: badNonce.nonce), token: token), .malformedRequest)

            // 401 invalid_token: none, forged, expired.
            let request = { try device.keyRequest(asset: "movie-1", keyIDs: movieKey) }
            record(try await client.requestKeys(try request(), token: nil), .invalidToken)
            let other = try KeyServerDataDirectory.initialize(at: fixture.directory.path + "-other")
            defer { try? FileManager.default.removeItem(atPath: other.path) }
            let forged = try await other.makeToken(subject: "alice", assets: ["movie-1"], ttl: 3_600, clock: fixture.clock.keyServerClock)
            record(try await client.requestKeys(try request(), token: forged), .invalidToken)
            let shortLived = try await fixture.token(ttl: 60)
            fixture.clock.advance(by: 61)
            record(try await client.requestKeys(try request(), token: shortLived), .invalidToken)

            // 401 bad_device_signature: missing header, a signature by another key.
            let unsigned = try request()
            record(try await client.post("/v1/keys", unsigned, token: token, signature: ""), .badDeviceSignature)
            let foreignSignature = try RequestSigning.signature(for: unsigned.body, with: Ed25519.PrivateKey.generate())
            record(try await client.post("/v1/keys", unsigned, token: token, signature: foreignSignature), .badDeviceSignature)

            // 403 not_entitled: the token does not list the asset.
            let trailerOnly = try await fixture.token(assets: ["trailer"])
            record(try await client.requestKeys(try request(), token: trailerOnly), .notEntitled)

            // 404 unknown_asset, unknown_key.
            record(try await client.requestKeys(try device.keyRequest(asset: "no-such-asset", keyIDs: movieKey), token: token), .unknownAsset)
            record(
                try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.rentalKeyID]), token: token),
                .unknownKey
            )

            // 409 device_key_mismatch: this device's ID presented with another device's keys (signed by that other key),
            // once registered; and an ID that is not derived from the keys.
            #expect(try await client.requestKeys(try request(), token: token).status == 200)
            let impostor = try TestDevice()
            var stolenID = impostor.publicInfo
            stolenID.id = device.id
            record(
                try await client.requestKeys(try impostor.keyRequest(asset: "movie-1", keyIDs: movieKey, device: stolenID), token: token),
                .deviceKeyMismatch
            )
            var madeUpID = impostor.publicInfo
            madeUpID.id = "0123456789abcdef0123456789abcdef"
            record(
                try await client.requestKeys(try impostor.keyRequest(asset: "movie-1", keyIDs: movieKey, device: madeUpID), token: token),
                .deviceKeyMismatch
            )

            // 409 replayed_request.
            let once = try request()
            #expect(try await client.requestKeys(once, token: token).status == 200)
            record(try await client.requestKeys(once, token: token), .replayedRequest)

            // 400 clock_skew: a request whose clientTime is an hour from the server's (captured and sent again later).
            let stale = KeyRequest(
                assetId: "movie-1",
                keyIds: movieKey,
                lease: .persistent,
                nonce: TestDevice.freshNonce(),
                clientTime: fixture.clock.now - 3_600,
                device: device.publicInfo
            )
            record(try await client.requestKeys(try device.sign(stale, nonce: stale.nonce), token: token), .clockSkew)

            // 403 device_limit_reached: the rental policy allows one device.
            let rentalKey = [KeyServerFixture.rentalKeyID]
            #expect(try await client.requestKeys(try device.keyRequest(asset: "rental", keyIDs: rentalKey), token: token).status == 200)
            let secondDevice = try TestDevice()
            record(try await client.requestKeys(try secondDevice.keyRequest(asset: "rental", keyIDs: rentalKey), token: token), .deviceLimitReached)

            // 403 renewal_not_allowed, 404 unknown_lease, 410 lease_expired.
            let streaming = try await client.requestKeys(
                try device.keyRequest(asset: "live", keyIDs: [KeyServerFixture.liveKeyID], lease: .streaming),
                token: token
            )
            let streamingLease = try PayloadSigning.verify(try streaming.decode(SignedPayload.self), serverKey: await client.serverKey()).lease
                .leaseId
            record(try await client.renew(streamingLease, try device.renewRequest(leaseID: streamingLease), token: token), .renewalNotAllowed)
            let missing = UUID().uuidString.lowercased()
            record(try await client.renew(missing, try device.renewRequest(leaseID: missing), token: token), .unknownLease)
            #expect(try await client.release(streamingLease, try device.releaseRequest(leaseID: streamingLease)).status == 200)
            record(try await client.renew(streamingLease, try device.renewRequest(leaseID: streamingLease), token: token), .leaseExpired)

            // 500 internal: the asset's policy is gone from config.json.
            record(
                try await client.requestKeys(try device.keyRequest(asset: "orphan", keyIDs: [KeyServerFixture.liveKeyID]), token: token),
                .internal
            )
        }

        // 429 rate_limited needs a tight limit (below), 403 stream_limit_reached a policy with maxStreams (ServerSideDoorTests).
        // Every other code was met here.
        #expect(Set(seen.keys) == Set(KeyProtocolErrorCode.allCases.map(\.rawValue)).subtracting(["rate_limited", "stream_limit_reached"]))
        let audit = try await fixture.directory.openStore().auditRecords(limit: 1_000)
        let refusals = Set(audit.filter { $0.event == .refused }.compactMap(\.code))
        #expect(refusals == Set(seen.keys))
    }

    @Test func rateLimitIsPerAccountAndDeviceAndRefills() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.rateLimit = .init(requestsPerSecond: 0.5, burst: 3)
        }
        defer { fixture.remove() }
        let token = try await fixture.token()
        let device = try TestDevice()
        let other = try TestDevice()
        try await fixture.withLiveServer { client in
            let key = [KeyServerFixture.movieKeyIDs[0]]
            for _ in 0..<3 {
                #expect(try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: key), token: token).status == 200)
            }
            let limited = try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: key), token: token)
            #expect(limited.status == 429)
            #expect(limited.errorCode == "rate_limited")
            // Another device of the same account shares the account's bucket: rotating device IDs gains nothing.
            #expect(try await client.requestKeys(try other.keyRequest(asset: "movie-1", keyIDs: key), token: token).status == 429)
            // Another account has buckets of its own.
            let bob = try await fixture.token("bob")
            #expect(try await client.requestKeys(try other.keyRequest(asset: "movie-1", keyIDs: key), token: bob).status == 200)
            // Two seconds refill one token at 0.5 per second.
            fixture.clock.advance(by: 2)
            #expect(try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: key), token: token).status == 200)
            #expect(try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: key), token: token).status == 429)
        }
        // Refusals are written aggregated (a count per minute, operation, code and account), when the server stops.
        let audit = try await fixture.directory.openStore().auditRecords(limit: 100)
        #expect(audit.filter { $0.code == "rate_limited" }.reduce(0) { $0 + $1.count } == 3)
    }

    @Test func oversizedBodiesAreMalformedRequests() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { client in
            let huge = [UInt8](repeating: UInt8(ascii: " "), count: 70_000)
            for path in ["/v1/keys", "/v1/leases/x/renew", "/v1/leases/x/release"] {
                let reply = try await client.post(path, nil, token: token, signature: "AAAA", rawBody: huge)
                #expect(reply.status == 400)
                #expect(reply.errorCode == "malformed_request")
            }
            // Just under the limit is read (and then refused for what it is, not for its size).
            let big = Array(#"{"padding":""#.utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 60_000) + Array(#""}"#.utf8)
            let reply = try await client.post("/v1/keys", nil, token: token, rawBody: big)
            #expect(reply.errorCode == "malformed_request")
            #expect(String(decoding: reply.body, as: UTF8.self).contains("missing member"))
        }
    }
}
