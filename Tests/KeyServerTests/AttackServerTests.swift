import AsyncHTTPClient
import Foundation
import KeyDelivery
import KeyServer
import NIOCore
import NIOHTTP1
import StowageCrypto
import Testing

/// The lease issue's attacks on the key server, by a client holding a valid token and a device key of its own, over
/// real HTTP on loopback (the client side of the attack suite is `AttackTests`; `scripts/attack.sh` runs both).
@Suite("Attacks on the key server by a client with a valid token")
struct AttackServerTests {
    /// Finding 1: once a once-per-account rental has ended, no device of the account gets the key by asking for a
    /// streaming lease or a raw identity key; and under `maxDevices: 1` with `maxStreams` unset, other devices asking
    /// to stream are refused like downloads.
    @Test("streaming and identity requests obey the rental and the device limit")
    func streamingStepsAroundNothing() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.policies["rental"]?.oncePerAccount = true
            configuration.policies["rental"]?.identityAllowed = true
        }
        defer { fixture.remove() }
        let token = try await fixture.token("mallory")
        let rental = [KeyServerFixture.rentalKeyID]
        let phone = try TestDevice()
        try await fixture.withLiveServer { client in
            let download = try await client.requestKeys(try phone.keyRequest(asset: "rental", keyIDs: rental), token: token)
            try #require(download.status == 200, "\(download.errorCode ?? "")")
            let lease = try PayloadSigning.verify(try download.decode(SignedPayload.self), serverKey: await client.serverKey()).lease

            // maxDevices 1, no maxStreams: devices 2 to 5 asking to stream are refused.
            for _ in 2...5 {
                let other = try TestDevice()
                let stream = try await client.requestKeys(try other.keyRequest(asset: "rental", keyIDs: rental, lease: .streaming), token: token)
                #expect(stream.status == 403 && stream.errorCode == "device_limit_reached", "\(stream.status) \(stream.errorCode ?? "")")
            }
            let raw = try await client.get("/v1/identity/rental/\(KeyServerFixture.rentalKeyID)", token: token)
            #expect(raw.status == 403 && raw.errorCode == "device_limit_reached", "\(raw.status) \(raw.errorCode ?? "")")

            // The phone reports its first play (as `stowage keys sync` does); the day's window passes.
            let nonce = TestDevice.freshNonce()
            let report = FirstPlayReport(
                leaseId: lease.leaseId,
                deviceId: phone.id,
                nonce: nonce,
                firstPlayedAt: fixture.clock.now,
                clientTime: fixture.clock.now
            )
            #expect(try await client.post("/v1/leases/\(lease.leaseId)/first-play", try phone.sign(report, nonce: nonce), token: nil).status == 200)
            fixture.clock.advance(by: 86_400 + 1)
            // The phone's lease lapses too, so no slot is taken: only the rental can refuse now.
            #expect(try await client.release(lease.leaseId, try phone.releaseRequest(leaseID: lease.leaseId)).status == 200)

            let laptop = try TestDevice()
            for kind in [LeaseType.streaming, .persistent] {
                let late = try await client.requestKeys(try laptop.keyRequest(asset: "rental", keyIDs: rental, lease: kind), token: token)
                #expect(late.status == 403 && late.errorCode == "not_entitled", "\(kind): \(late.status) \(late.errorCode ?? "")")
                #expect(String(decoding: late.body, as: UTF8.self).contains("rental"))
            }
            let lateRaw = try await client.get("/v1/identity/rental/\(KeyServerFixture.rentalKeyID)", token: token)
            #expect(lateRaw.status == 403 && lateRaw.errorCode == "not_entitled", "\(lateRaw.status) \(lateRaw.errorCode ?? "")")
        }
    }

    /// Finding 8: a signed request captured once is not accepted again, neither inside the nonce window (a replay) nor
    /// after the server forgot its nonce (its clientTime is too old).
    @Test("a captured request replayed inside and after its nonce window")
    func replayAfterTheNonceWindow() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        let device = try TestDevice()
        try await fixture.withLiveServer { client in
            let captured = try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]])
            #expect(try await client.requestKeys(captured, token: token).status == 200)
            #expect(try await client.requestKeys(captured, token: token).errorCode == "replayed_request")
            fixture.clock.advance(by: 25 * 3_600)
            #expect(await fixture.server.forgetExpiredNonces() >= 1)
            let late = try await client.requestKeys(captured, token: token)
            #expect(late.status == 400 && late.errorCode == "clock_skew", "\(late.status) \(late.errorCode ?? "")")
            // The same for a renewal and a release captured once.
            let fresh = try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]]), token: token)
            let lease = try fresh.decode(SignedPayload.self)
            let leaseID = try PayloadSigning.verify(lease, serverKey: await client.serverKey()).lease.leaseId
            let renewal = try device.renewRequest(leaseID: leaseID)
            let release = try device.releaseRequest(leaseID: leaseID)
            fixture.clock.advance(by: 3_600)
            #expect(try await client.renew(leaseID, renewal, token: token).errorCode == "clock_skew")
            #expect(try await client.release(leaseID, release).errorCode == "clock_skew")
        }
    }

    /// One entitlement token is one identity stream however its `Authorization` header is spelled: the stream is named
    /// by the token the server verified, not by the header's bytes.
    @Test("one token, its header spelled three ways, is one identity stream")
    func oneTokenOneStream() async throws {
        let fixture = try await KeyServerFixture.make { configuration in
            configuration.policies["default"]?.identityAllowed = true
            configuration.policies["default"]?.maxStreams = 1
        }
        defer { fixture.remove() }
        let token = try await fixture.token("carol")
        let other = try await fixture.token("carol", ttl: 86_400)
        let path = "/v1/identity/movie-1/\(KeyServerFixture.movieKeyIDs[0])"
        try await fixture.withLiveServer { client async throws in
            #expect(try await Self.status(client, path, authorization: "Bearer \(token)") == 200)
            #expect(try await Self.status(client, path, authorization: "bearer \(token)") == 200)
            #expect(try await Self.status(client, path, authorization: "Bearer   \(token)") == 200)
            // Another token of the account is another stream: over maxStreams.
            #expect(try await Self.status(client, path, authorization: "Bearer \(other)") == 403)
        }
    }

    /// The status of `GET path` with `authorization` written as given.
    static func status(_ client: LiveClient, _ path: String, authorization: String) async throws -> Int {
        var request = HTTPClientRequest(url: client.baseURL + path)
        request.headers.add(name: "Authorization", value: authorization)
        let response = try await client.http.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 16)
        return Int(response.status.code)
    }
}
