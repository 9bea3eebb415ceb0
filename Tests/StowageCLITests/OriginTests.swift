import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

struct OriginTests {
    @Test func servesFilesWithRangesOverLoopback() async throws {
        let root = try TestSupport.temporaryDirectory("origin")
        defer { try? FileManager.default.removeItem(at: root) }
        let content = [UInt8]((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try FileManager.default.createDirectory(at: root.appendingPathComponent("a b"), withIntermediateDirectories: true)
        try Data(content).write(to: root.appendingPathComponent("a b/seg.ts"))

        try await TestSupport.withOrigin(root: root) { base in
            #expect(base.host == "127.0.0.1")
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                let whole = try await client.execute(HTTPClientRequest(url: base.absoluteString + "/a%20b/seg.ts"), timeout: .seconds(10))
                #expect(whole.status == .ok)
                #expect(Array(buffer: try await whole.body.collect(upTo: 1 << 20)) == content)

                var ranged = HTTPClientRequest(url: base.absoluteString + "/a%20b/seg.ts")
                ranged.headers.add(name: "Range", value: "bytes=100-199")
                let part = try await client.execute(ranged, timeout: .seconds(10))
                #expect(part.status == .partialContent)
                #expect(Array(buffer: try await part.body.collect(upTo: 1 << 20)) == Array(content[100..<200]))

                let missing = try await client.execute(HTTPClientRequest(url: base.absoluteString + "/nope.ts"), timeout: .seconds(10))
                #expect(missing.status == .notFound)
            } catch {
                try await client.shutdown()
                throw error
            }
            try await client.shutdown()
        }
    }
}
