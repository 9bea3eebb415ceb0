import Foundation
import OriginServer
import Testing

/// The request log that other modules' tests count segment fetches with.
struct RequestLogTests {
    @Test func recordsEveryRequestWithItsOutcome() async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try Data(OriginFixture.bytes(5000)).write(to: root.appendingPathComponent("seg 1.ts"))
        try Data(OriginFixture.bytes(300)).write(to: root.appendingPathComponent("seg2.ts"))
        let log = OriginRequestLog()
        try await OriginFixture.withOrigin(.init(root: root.path, requestLog: log)) { base in
            try await OriginFixture.withClient { client in
                _ = try await OriginFixture.fetch(client, base + "/seg%201.ts")
                _ = try await OriginFixture.fetch(client, base + "/seg%201.ts", headers: [("Range", "bytes=0-99")])
                _ = try await OriginFixture.fetch(client, base + "/seg2.ts", method: "HEAD")
                _ = try await OriginFixture.fetch(client, base + "/missing.ts")
            }
        }
        #expect(log.count(path: "/seg 1.ts") == 2)
        #expect(log.count(path: "/seg2.ts") == 1)
        #expect(log.count(path: "/missing.ts") == 1)
        #expect(log.count(path: "/other.ts") == 0)
        // Each entry keeps the request's Host (and the cookie, user agent and referer when sent); compared apart.
        #expect(log.entries.allSatisfy { $0.headers["host"]?.hasPrefix("127.0.0.1:") == true && $0.headers.count == 1 }, "\(log.entries)")
        let entries = log.entries.map { entry in
            var entry = entry
            entry.headers = [:]
            return entry
        }
        #expect(
            entries == [
                .init(method: "GET", path: "/seg 1.ts", range: nil, status: 200, bytesSent: 5000, fault: .none),
                .init(method: "GET", path: "/seg 1.ts", range: "bytes=0-99", status: 206, bytesSent: 100, fault: .none),
                .init(method: "HEAD", path: "/seg2.ts", range: nil, status: 200, bytesSent: 0, fault: .none),
                .init(method: "GET", path: "/missing.ts", range: nil, status: 404, bytesSent: 0, fault: .none),
            ]
        )
        log.reset()
        #expect(log.entries.isEmpty)
        #expect(log.count(path: "/seg 1.ts") == 0)
    }

    @Test func countsAreCompleteAsSoonAsTheClientHasTheResponse() async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        for index in 0..<20 {
            try Data(OriginFixture.bytes(1000 + index)).write(to: root.appendingPathComponent("seg\(index).ts"))
        }
        let log = OriginRequestLog()
        try await OriginFixture.withOrigin(.init(root: root.path, requestLog: log)) { base in
            try await OriginFixture.withClient { client in
                for index in 0..<20 {
                    let response = try await OriginFixture.fetch(client, base + "/seg\(index).ts")
                    #expect(log.count(path: "/seg\(index).ts") == 1)
                    #expect(log.entries.last?.bytesSent == response.body.count)
                }
            }
        }
    }
}
