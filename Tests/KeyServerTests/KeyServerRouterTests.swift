import Foundation
import Hummingbird
import HummingbirdTesting
import KeyDelivery
import KeyServer
import NIOCore
import StowageCrypto
import Testing

/// The routes in-process with HummingbirdTesting, where a live socket adds nothing.
struct KeyServerRouterTests {
    @Test func serverKeyEndpoint() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let app = Application(router: fixture.server.makeRouter())
        try await app.test(.router) { client in
            try await client.execute(uri: "/v1/server-key", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "application/json")
                let body = try JSONDecoder().decode(ServerKeyResponse.self, from: Data(String(buffer: response.body).utf8))
                #expect(StrictBase64.decode(body.signingKey, byteCount: 32) == fixture.server.serverPublicKey.rawRepresentation)
            }
        }
    }

    @Test func keysThroughTheRouter() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let device = try TestDevice()
        let token = try await fixture.token()
        let request = try TestDevice.$clock.withValue(fixture.clock) { try device.keyRequest(asset: "movie-1", keyIDs: KeyServerFixture.movieKeyIDs) }
        let app = Application(router: fixture.server.makeRouter())
        try await app.test(.router) { client in
            try await client.execute(
                uri: "/v1/keys",
                method: .post,
                headers: [.authorization: "Bearer \(token)", HTTPFields.Element.Name("Stowage-Device-Signature")!: request.signature],
                body: ByteBuffer(bytes: request.body)
            ) { response in
                #expect(response.status == .ok)
                let signed = try JSONDecoder().decode(SignedPayload.self, from: Data(String(buffer: response.body).utf8))
                let payload = try PayloadSigning.verify(signed, serverKey: fixture.server.serverPublicKey)
                #expect(try device.unwrapKeys(of: payload).count == 2)
            }
            // Unknown members are ignored; a wrong JSON type is a malformed request.
            try await client.execute(uri: "/v1/leases/abc/release", method: .post, body: ByteBuffer(string: #"{"version":"1"}"#)) { response in
                #expect(response.status == .badRequest)
                let body = try JSONDecoder().decode(KeyProtocolErrorBody.self, from: Data(String(buffer: response.body).utf8))
                #expect(body.error.code == "malformed_request")
            }
        }
    }

    @Test func unknownMembersAreIgnored() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let device = try TestDevice()
        let token = try await fixture.token()
        let nonce = TestDevice.freshNonce()
        let info = device.publicInfo
        let json = """
            {"version":1,"assetId":"movie-1","keyIds":["\(KeyServerFixture.movieKeyIDs[0])"],"lease":"persistent","nonce":"\(nonce)",\
            "clientTime":\(fixture.clock.now),"future":{"x":[1,2]},"device":{"id":"\(info.id)","signingKey":"\(info.signingKey)",\
            "agreementKey":"\(info.agreementKey)","model":"test"}}
            """
        let body = Array(json.utf8)
        let signature = try RequestSigning.signature(for: body, with: device.signingKey)
        let app = Application(router: fixture.server.makeRouter())
        try await app.test(.router) { client in
            try await client.execute(
                uri: "/v1/keys",
                method: .post,
                headers: [.authorization: "Bearer \(token)", HTTPFields.Element.Name("Stowage-Device-Signature")!: signature],
                body: ByteBuffer(bytes: body)
            ) { response in
                #expect(response.status == .ok)
            }
        }
    }
}
