import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

@testable import KeyServer

/// `trustedProxies`: behind a load balancer the per-source rate limit counts the client `X-Forwarded-For` names, and
/// only when the connection comes from a balancer the configuration names.
struct ForwardedSourceTests {
    @Test("the address nearest the server that is not a trusted balancer; the header ignored from anyone else")
    func chosenAddress() {
        let trusted: Set<String> = ["10.0.0.5", "10.0.0.6"]
        #expect(ForwardedSource.client(peer: "10.0.0.5", forwardedFor: ["203.0.113.7"], trusted: trusted) == "203.0.113.7")
        // A client's own X-Forwarded-For is further left: the balancer's addition wins.
        #expect(ForwardedSource.client(peer: "10.0.0.5", forwardedFor: ["1.2.3.4, 203.0.113.7"], trusted: trusted) == "203.0.113.7")
        // Two balancers in a row.
        #expect(ForwardedSource.client(peer: "10.0.0.5", forwardedFor: ["203.0.113.7", "10.0.0.6"], trusted: trusted) == "203.0.113.7")
        // Not from a balancer: the header means nothing.
        #expect(ForwardedSource.client(peer: "198.51.100.1", forwardedFor: ["203.0.113.7"], trusted: trusted) == "198.51.100.1")
        // Garbage or nothing: the balancer's own address.
        #expect(ForwardedSource.client(peer: "10.0.0.5", forwardedFor: ["unknown"], trusted: trusted) == "10.0.0.5")
        #expect(ForwardedSource.client(peer: "10.0.0.5", forwardedFor: [], trusted: trusted) == "10.0.0.5")
        #expect(ForwardedSource.client(peer: "::1", forwardedFor: ["2001:db8::1"], trusted: ["::1"]) == "2001:db8::1")
    }

    @Test("config.json's databaseTimeout: 10 s when left out, refused outside 1-3600 s")
    func databaseTimeout() throws {
        let json = #"{"defaultPolicy": "default", "policies": {"default": {}}, "tokenAudience": "stowage:test"}"#
        var configuration = try JSONDecoder().decode(KeyServerConfiguration.self, from: Data(json.utf8))
        #expect(configuration.databaseTimeout == 10)
        try configuration.validate()
        let explicit = try JSONDecoder().decode(
            KeyServerConfiguration.self,
            from: Data(json.replacingOccurrences(of: "}}, ", with: "}}, \"databaseTimeout\": 45, ").utf8)
        )
        #expect(explicit.databaseTimeout == 45)
        for bad in [0, 0.5, 3_601] {
            configuration.databaseTimeout = bad
            #expect(throws: KeyServerSetupError.self) { try configuration.validate() }
        }
    }

    @Test("config.json refuses a trusted proxy that is not an IP address")
    func validated() throws {
        var configuration = KeyServerConfiguration(tokenAudience: "stowage:test")
        configuration.trustedProxies = ["lb.example"]
        #expect(throws: KeyServerSetupError.self) { try configuration.validate() }
        configuration.trustedProxies = ["10.0.0.5", "::1"]
        try configuration.validate()
    }

    /// Three malformed key requests (each charged to the source bucket first, then refused as malformed) with
    /// `forwardedFor`; the statuses.
    static func statuses(_ client: LiveClient, forwardedFor: String) async throws -> [Int] {
        var statuses: [Int] = []
        for _ in 0..<3 {
            var request = HTTPClientRequest(url: client.baseURL + "/v1/keys")
            request.method = .POST
            request.headers.add(name: "X-Forwarded-For", value: forwardedFor)
            request.body = .bytes(ByteBuffer(string: "{}"))
            let response = try await client.http.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 16)
            statuses.append(Int(response.status.code))
        }
        return statuses
    }

    @Test("over loopback: with 127.0.0.1 trusted each forwarded client has its own bucket; without, they share the balancer's")
    func bucketsFollowTheForwardedClient() async throws {
        for trusting in [true, false] {
            let fixture = try await KeyServerFixture.make { configuration in
                configuration.sourceRateLimit = .init(requestsPerSecond: 0.001, burst: 2)
                if trusting { configuration.trustedProxies = ["127.0.0.1"] }
            }
            defer { fixture.remove() }
            try await fixture.withLiveServer { client in
                let first = try await Self.statuses(client, forwardedFor: "203.0.113.7")
                let second = try await Self.statuses(client, forwardedFor: "203.0.113.8")
                #expect(first == [400, 400, 429], "trusting \(trusting): \(first)")
                #expect(second == (trusting ? [400, 400, 429] : [429, 429, 429]), "trusting \(trusting): \(second)")
            }
        }
    }
}
