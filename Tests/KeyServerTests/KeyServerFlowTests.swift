import Foundation
import KeyDelivery
import KeyServer
import StowageCrypto
import Testing

/// The whole protocol against the real server on loopback, with AsyncHTTPClient as the client.
struct KeyServerFlowTests {
    @Test func keysRenewAndReleaseOverLoopback() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let device = try TestDevice()
        let token = try await fixture.token()
        let start = fixture.clock.now

        try await fixture.withLiveServer { client in
            // The client pins the server key it fetched; it is the data directory's signing key.
            let serverKey = try await client.serverKey()
            #expect(serverKey == fixture.server.serverPublicKey)
            #expect(serverKey == (try fixture.directory.loadSigningKey().publicKey))

            // Keys.
            let request = try device.keyRequest(asset: "movie-1", keyIDs: KeyServerFixture.movieKeyIDs)
            let reply = try await client.requestKeys(request, token: token)
            #expect(reply.status == 200)
            #expect(reply.contentType == "application/json")
            let signed = try reply.decode(SignedPayload.self)
            let payload = try PayloadSigning.verify(signed, serverKey: serverKey)
            #expect(payload.version == 1)
            #expect(payload.serverTime == start)
            let lease = payload.lease
            #expect(lease.assetId == "movie-1")
            #expect(lease.deviceId == device.id)
            #expect(lease.keyIds == KeyServerFixture.movieKeyIDs)
            #expect(lease.type == .persistent)
            #expect(lease.issuedAt == start)
            #expect(lease.storageExpiresAt == start + 30 * 86_400)
            #expect(lease.playbackDuration == Int64(48 * 3_600))
            #expect(lease.renewableUntil == start + 90 * 86_400)
            #expect(lease.requestNonce == request.nonce)
            #expect(UUID(uuidString: lease.leaseId) != nil)
            #expect(lease.leaseId == lease.leaseId.lowercased())
            let keys = try device.unwrapKeys(of: payload)
            for (keyID, key) in zip(KeyServerFixture.movieKeyIDs, KeyServerFixture.movieKeys) {
                #expect(keys[keyID] == SecretBytes(Hex.decode(key)!))
            }

            // Renew ten days later: same lease, keys wrapped afresh, a later storage expiry.
            fixture.clock.advance(by: 10 * 86_400)
            let renewReply = try await client.renew(lease.leaseId, try device.renewRequest(leaseID: lease.leaseId), token: token)
            #expect(renewReply.status == 200)
            let renewed = try PayloadSigning.verify(try renewReply.decode(SignedPayload.self), serverKey: serverKey)
            #expect(renewed.lease.leaseId == lease.leaseId)
            #expect(renewed.lease.storageExpiresAt == fixture.clock.now + 30 * 86_400)
            #expect(renewed.lease.storageExpiresAt > lease.storageExpiresAt)
            #expect(renewed.lease.renewableUntil == lease.renewableUntil)
            #expect(renewed.lease.issuedAt == fixture.clock.now)
            #expect(renewed.serverTime == fixture.clock.now)
            #expect(Set(renewed.keys.map(\.ephemeralKey)).isDisjoint(with: payload.keys.map(\.ephemeralKey)))
            #expect(try device.unwrapKeys(of: renewed) == keys)

            // Release, twice: the same answer both times.
            for _ in 0..<2 {
                let released = try await client.release(lease.leaseId, try device.releaseRequest(leaseID: lease.leaseId))
                #expect(released.status == 200)
                #expect(try released.decode(ReleaseResponse.self) == ReleaseResponse(released: true))
                #expect(String(decoding: released.body, as: UTF8.self) == #"{"released":true}"#)
            }
            // A released lease cannot be renewed.
            let late = try await client.renew(lease.leaseId, try device.renewRequest(leaseID: lease.leaseId), token: token)
            #expect(late.status == 410)
            #expect(late.errorCode == "lease_expired")
        }

        let audit = try await fixture.directory.openStore().auditRecords(limit: 100)
        #expect(audit.map(\.event) == [.issued, .renewed, .released, .released, .refused])
        #expect(audit.allSatisfy { $0.deviceID == device.id })
        #expect(audit[0].account == "alice")
        #expect(audit[4].code == "lease_expired")
    }

    @Test func anotherDeviceCannotUnwrapTheKeys() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let device = try TestDevice()
        let other = try TestDevice()
        let token = try await fixture.token()
        try await fixture.withLiveServer { client in
            let reply = try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]]), token: token)
            let payload = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: await client.serverKey())
            #expect(throws: KeyWrappingError.unwrapFailed) { try other.unwrapKeys(of: payload) }
            // Even claiming the first device's ID, the other device's private key does not open the key.
            #expect(throws: KeyWrappingError.unwrapFailed) {
                try KeyWrapping.unwrap(payload.keys[0], leaseID: payload.lease.leaseId, deviceID: device.id, agreementKey: other.agreementKey)
            }
        }
    }

    @Test func streamingLeasesAreNotCountedAndCannotBeRenewed() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { client in
            let device = try TestDevice()
            let reply = try await client.requestKeys(
                try device.keyRequest(asset: "live", keyIDs: [KeyServerFixture.liveKeyID], lease: .streaming),
                token: token
            )
            #expect(reply.status == 200)
            let payload = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: await client.serverKey())
            #expect(payload.lease.type == .streaming)
            #expect(payload.lease.storageExpiresAt == fixture.clock.now + 3_600)
            #expect(payload.lease.renewableUntil == nil)
            #expect(payload.lease.playbackDuration == nil)
            #expect(try device.unwrapKeys(of: payload)[KeyServerFixture.liveKeyID] == SecretBytes(Hex.decode(KeyServerFixture.liveKey)!))

            let renew = try await client.renew(payload.lease.leaseId, try device.renewRequest(leaseID: payload.lease.leaseId), token: token)
            #expect(renew.status == 403)
            #expect(renew.errorCode == "renewal_not_allowed")

            // A streaming-only asset refuses persistent leases.
            let persistent = try await client.requestKeys(try device.keyRequest(asset: "live", keyIDs: [KeyServerFixture.liveKeyID]), token: token)
            #expect(persistent.status == 403)
            #expect(persistent.errorCode == "not_entitled")
        }
    }

    @Test func deviceLimitCountsActivePersistentLeases() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token("bob")
        let devices = try (0..<5).map { _ in try TestDevice() }
        let movie = [KeyServerFixture.movieKeyIDs[0]]
        try await fixture.withLiveServer { client in
            var leases: [String] = []
            for device in devices[0..<3] {
                let reply = try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: movie), token: token)
                #expect(reply.status == 200)
                leases.append(try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: await client.serverKey()).lease.leaseId)
            }
            // A fourth device is refused...
            let refused = try await client.requestKeys(try devices[3].keyRequest(asset: "movie-1", keyIDs: movie), token: token)
            #expect(refused.status == 403)
            #expect(refused.errorCode == "device_limit_reached")
            // ...and asking to stream instead is refused the same way (the policy sets no maxStreams, so the device limit
            // applies to every lease kind); a device that already holds a slot may take more keys, and another account
            // is not affected.
            // (Device 0's second lease for the same keys supersedes its first, which the server releases: see
            // aLeaseWhoseAnswerWasLostIsSupersededByTheRetry.)
            let again = try await client.requestKeys(try devices[0].keyRequest(asset: "movie-1", keyIDs: movie), token: token)
            #expect(again.status == 200)
            let device0Lease = try PayloadSigning.verify(try again.decode(SignedPayload.self), serverKey: await client.serverKey()).lease.leaseId
            let streaming = try await client.requestKeys(
                try devices[3].keyRequest(asset: "movie-1", keyIDs: movie, lease: .streaming),
                token: token
            )
            #expect(streaming.status == 403 && streaming.errorCode == "device_limit_reached")
            let carol = try await fixture.token("carol")
            #expect(try await client.requestKeys(try devices[3].keyRequest(asset: "movie-1", keyIDs: movie), token: carol).status == 200)

            // Releasing device 1's lease frees a slot for device 4.
            #expect(try await client.release(leases[1], try devices[1].releaseRequest(leaseID: leases[1])).status == 200)
            #expect(try await client.requestKeys(try devices[3].keyRequest(asset: "movie-1", keyIDs: movie), token: token).status == 200)
            #expect(
                try await client.requestKeys(try devices[4].keyRequest(asset: "movie-1", keyIDs: movie), token: token).errorCode
                    == "device_limit_reached"
            )

            // Expired leases free their slots too.
            fixture.clock.advance(by: 31 * 86_400)
            #expect(try await client.requestKeys(try devices[4].keyRequest(asset: "movie-1", keyIDs: movie), token: token).status == 200)
            #expect(try await client.requestKeys(try devices[3].keyRequest(asset: "movie-1", keyIDs: movie), token: token).status == 200)

            // Renewing an expired lease takes its slot back only if one is free: devices 4, 3 and now 2 (renewed) hold
            // slots, so device 0's expired lease cannot come back.
            #expect(try await client.renew(leases[2], try devices[2].renewRequest(leaseID: leases[2]), token: token).status == 200)
            let crowded = try await client.renew(device0Lease, try devices[0].renewRequest(leaseID: device0Lease), token: token)
            #expect(crowded.status == 403)
            #expect(crowded.errorCode == "device_limit_reached")
        }
    }

    /// The key server saves a lease, then dies (or the connection does) before the device hears the answer; the device
    /// asks again. The lease it never heard of must not keep its slot under maxDevices once it releases the one it
    /// holds, nor let it start a playback window again: the retry supersedes it, releasing it and taking its first play.
    @Test func aLeaseWhoseAnswerWasLostIsSupersededByTheRetry() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token("dana")
        let devices = try (0..<4).map { _ in try TestDevice() }
        let movie = [KeyServerFixture.movieKeyIDs[0]]
        try await fixture.withLiveServer { client in
            let serverKey = try await client.serverKey()
            func acquire(_ device: TestDevice) async throws -> LeasePayload {
                let reply = try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: movie), token: token)
                #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
                return try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: serverKey)
            }
            // The answer that was lost: saved on the server, its first play reported by an earlier session.
            let lost = try await acquire(devices[0])
            let nonce = TestDevice.freshNonce()
            let start = fixture.clock.now + 10
            let report = try devices[0].sign(
                FirstPlayReport(leaseId: lost.lease.leaseId, deviceId: devices[0].id, nonce: nonce, firstPlayedAt: start),
                nonce: nonce
            )
            #expect(try await client.post("/v1/leases/\(lost.lease.leaseId)/first-play", report, token: nil).status == 200)
            fixture.clock.advance(by: 60)

            let retry = try await acquire(devices[0])
            #expect(retry.lease.leaseId != lost.lease.leaseId)
            #expect(retry.lease.firstPlayedAt == start, "asking again restarted the playback window")
            let renewLost = try await client.renew(lost.lease.leaseId, try devices[0].renewRequest(leaseID: lost.lease.leaseId), token: token)
            #expect(renewLost.status == 410 && renewLost.errorCode == "lease_expired")

            // Two more devices fill the account's three slots; a fourth is refused.
            _ = try await acquire(devices[1])
            _ = try await acquire(devices[2])
            #expect(
                try await client.requestKeys(try devices[3].keyRequest(asset: "movie-1", keyIDs: movie), token: token).errorCode
                    == "device_limit_reached"
            )
            // Device 0 releases the one lease it holds: its slot is free, with no lease it never heard of holding it.
            #expect(try await client.release(retry.lease.leaseId, try devices[0].releaseRequest(leaseID: retry.lease.leaseId)).status == 200)
            _ = try await acquire(devices[3])
        }
    }

    @Test func renewalRules() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        let device = try TestDevice()
        try await fixture.withLiveServer { client in
            let reply = try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: KeyServerFixture.movieKeyIDs), token: token)
            let lease = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: await client.serverKey()).lease
            let renewableUntil = try #require(lease.renewableUntil)

            // Past its storage window but before renewableUntil: still renewable.
            fixture.clock.advance(by: 45 * 86_400)
            #expect(try await client.renew(lease.leaseId, try device.renewRequest(leaseID: lease.leaseId), token: token).status == 200)

            // Past renewableUntil: gone for good.
            fixture.clock.advance(by: renewableUntil - fixture.clock.now + 1)
            let late = try await client.renew(lease.leaseId, try device.renewRequest(leaseID: lease.leaseId), token: token)
            #expect(late.status == 410)
            #expect(late.errorCode == "lease_expired")

            // A policy without renewals.
            let rental = try await client.requestKeys(try device.keyRequest(asset: "rental", keyIDs: [KeyServerFixture.rentalKeyID]), token: token)
            let rentalLease = try PayloadSigning.verify(try rental.decode(SignedPayload.self), serverKey: await client.serverKey()).lease
            #expect(rentalLease.renewableUntil == nil)
            #expect(rentalLease.storageExpiresAt == fixture.clock.now + 7 * 86_400)
            let refused = try await client.renew(rentalLease.leaseId, try device.renewRequest(leaseID: rentalLease.leaseId), token: token)
            #expect(refused.status == 403)
            #expect(refused.errorCode == "renewal_not_allowed")

            // Another device cannot renew or release this device's lease: to it, the lease does not exist.
            let stranger = try TestDevice()
            _ = try await client.requestKeys(try stranger.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]]), token: token)
            let foreign = try await client.renew(rentalLease.leaseId, try stranger.renewRequest(leaseID: rentalLease.leaseId), token: token)
            #expect(foreign.errorCode == "unknown_lease")
            #expect(
                try await client.release(rentalLease.leaseId, try stranger.releaseRequest(leaseID: rentalLease.leaseId)).errorCode == "unknown_lease"
            )

            // The renewal needs a token of the lease's account.
            let mallory = try await fixture.token("mallory")
            let wrongAccount = try await client.renew(rentalLease.leaseId, try device.renewRequest(leaseID: rentalLease.leaseId), token: mallory)
            #expect(wrongAccount.errorCode == "not_entitled")
        }
    }

    @Test func identityEndpointServesTheRawKeyWhereThePolicyAllowsIt() async throws {
        let fixture = try await KeyServerFixture.make { $0.policies["default"]?.identityAllowed = true }
        defer { fixture.remove() }
        let token = try await fixture.token(assets: ["movie-1"])
        try await fixture.withLiveServer { client in
            let path = "/v1/identity/movie-1/\(KeyServerFixture.movieKeyIDs[1])"
            let reply = try await client.get(path, token: token)
            #expect(reply.status == 200)
            #expect(reply.contentType == "application/octet-stream")
            #expect(reply.body == Hex.decode(KeyServerFixture.movieKeys[1]))

            #expect(try await client.get(path).errorCode == "invalid_token")
            #expect(try await client.get("/v1/identity/rental/\(KeyServerFixture.rentalKeyID)", token: token).errorCode == "not_entitled")
            #expect(try await client.get("/v1/identity/movie-1/\(KeyServerFixture.rentalKeyID)", token: token).errorCode == "unknown_key")
            let all = try await fixture.token(assets: ["*"])
            #expect(try await client.get("/v1/identity/nothing/\(KeyServerFixture.rentalKeyID)", token: all).errorCode == "unknown_asset")
            #expect(try await client.get("/v1/identity/movie-1/NOT-HEX", token: all).errorCode == "malformed_request")
        }
        let audit = try await fixture.directory.openStore().auditRecords(limit: 10)
        #expect(audit.first?.event == .identityKeyServed)
    }

    @Test func replayedNonceIsRefused() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        let device = try TestDevice()
        try await fixture.withLiveServer { client in
            let request = try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]])
            #expect(try await client.requestKeys(request, token: token).status == 200)
            let replay = try await client.requestKeys(request, token: token)
            #expect(replay.status == 409)
            #expect(replay.errorCode == "replayed_request")
            // 23 hours later the captured request is refused by its time, further from the server's than 5 minutes.
            fixture.clock.advance(by: 23 * 3_600)
            #expect(try await client.requestKeys(request, token: token).errorCode == "clock_skew")
            // The same nonce inside another, freshly signed body with a fresh time is the same replay.
            let reused = KeyRequest(
                assetId: "movie-1",
                keyIds: [KeyServerFixture.movieKeyIDs[1]],
                lease: .persistent,
                nonce: request.nonce,
                clientTime: fixture.clock.now,
                device: device.publicInfo
            )
            #expect(try await client.requestKeys(try device.sign(reused, nonce: request.nonce), token: token).errorCode == "replayed_request")
        }
    }

    @Test func tamperedSignatureHeaderIsRefused() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        let device = try TestDevice()
        try await fixture.withLiveServer { client in
            let request = try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]])
            var signature = StrictBase64.decode(request.signature)!
            signature[7] ^= 0x20
            let tampered = try await client.post("/v1/keys", request, token: token, signature: StrictBase64.encode(signature))
            #expect(tampered.status == 401)
            #expect(tampered.errorCode == "bad_device_signature")
            // A body changed after signing.
            var body = request.body
            body[body.count - 3] ^= 0x01
            let changed = try await client.post("/v1/keys", request, token: token, rawBody: body)
            #expect(changed.status == 401 || changed.status == 400)
            // The untouched request still works: a refused signature does not burn the nonce.
            #expect(try await client.requestKeys(request, token: token).status == 200)
        }
    }
}
