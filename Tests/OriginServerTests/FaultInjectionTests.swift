import AsyncHTTPClient
import Foundation
import NIOCore
import OriginServer
import Testing

/// Each fault, as a client sees it.
struct FaultInjectionTests {
    static let size = 1_000_000

    /// Serves `seg0.ts`...`seg{n-1}.ts` (1 MB each) and `index.m3u8` under `conditions`.
    static func withFaultyOrigin(
        _ conditions: NetworkConditions,
        seed: UInt64 = 1,
        log: OriginRequestLog? = nil,
        segments: Int = 1,
        _ body: (String, [UInt8]) async throws -> Void
    ) async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let content = OriginFixture.bytes(size)
        for index in 0..<segments {
            try Data(content).write(to: root.appendingPathComponent("seg\(index).ts"))
        }
        try Data("#EXTM3U\n#EXT-X-ENDLIST\n".utf8).write(to: root.appendingPathComponent("index.m3u8"))
        try await OriginFixture.withOrigin(.init(root: root.path, conditions: conditions, seed: seed, requestLog: log)) { base in
            try await body(base, content)
        }
    }

    @Test func answersErrorsWith503OrWith429AndRetryAfter() async throws {
        let log = OriginRequestLog()
        try await Self.withFaultyOrigin(NetworkConditions(errorRate: 1), log: log) { base, _ in
            try await OriginFixture.withClient { client in
                var statuses: [Int: Int] = [:]
                for attempt in 0..<30 {
                    let response = try await OriginFixture.fetch(client, base + (attempt % 2 == 0 ? "/seg0.ts" : "/index.m3u8"))
                    statuses[response.status, default: 0] += 1
                    #expect(response.status == 503 || response.status == 429)
                    if response.status == 429 {
                        #expect(response.header("Retry-After") == "1")
                    }
                }
                // Deterministic for seed 1: both kinds occur, 503 more often.
                #expect(statuses[429, default: 0] > 0)
                #expect(statuses[503, default: 0] > statuses[429, default: 0])
            }
        }
        #expect(log.entries.count == 30)
        #expect(log.entries.allSatisfy { $0.fault == .error })
        #expect(log.count(path: "/index.m3u8") == 15)
    }

    @Test func resetsConnectionsPartWayThroughTheBody() async throws {
        let log = OriginRequestLog()
        try await Self.withFaultyOrigin(NetworkConditions(resetRate: 1), log: log, segments: 3) { base, content in
            try await OriginFixture.withClient { client in
                for index in 0..<3 {
                    let response = try await OriginFixture.fetch(client, base + "/seg\(index).ts")
                    // A real TCP reset (ECONNRESET), not an orderly close.
                    let error = try #require(response.bodyError)
                    #expect(error.lowercased().contains("reset"), "\(error)")
                    if response.status != 0 {
                        #expect(response.status == 200)
                        #expect(response.header("Content-Length") == "\(Self.size)")
                    }
                    #expect(response.body.count < Self.size)
                    #expect(response.body == Array(content.prefix(response.body.count)))
                }
            }
        }
        #expect(log.entries.map(\.fault) == [.reset, .reset, .reset])
        #expect(log.entries.allSatisfy { $0.bytesSent < Self.size })
    }

    @Test func truncatesBodiesShortOfTheirContentLength() async throws {
        let log = OriginRequestLog()
        try await Self.withFaultyOrigin(NetworkConditions(truncateRate: 1), log: log, segments: 3) { base, content in
            try await OriginFixture.withClient { client in
                for index in 0..<3 {
                    let response = try await OriginFixture.fetch(client, base + "/seg\(index).ts")
                    #expect(response.status == 200)
                    #expect(response.header("Content-Length") == "\(Self.size)")
                    // A client either reports the early end or, at the least, has fewer bytes than declared.
                    #expect(response.body.count < Self.size)
                    #expect(response.body == Array(content.prefix(response.body.count)))
                }
            }
        }
        #expect(log.entries.map(\.fault) == [.truncate, .truncate, .truncate])
    }

    @Test func stallsTripAShorterReadTimeout() async throws {
        let log = OriginRequestLog()
        try await Self.withFaultyOrigin(NetworkConditions(stallRate: 1, stallMilliseconds: 2000), log: log) { base, _ in
            try await OriginFixture.withClient(readTimeout: .milliseconds(300)) { client in
                let response = try await OriginFixture.fetch(client, base + "/seg0.ts")
                // On a loaded machine the head itself can outlast 300 ms; either way a read timeout fires.
                #expect(response.status == 200 || response.status == 0)
                let error = try #require(response.bodyError)
                #expect(error.lowercased().contains("timeout") || error.lowercased().contains("timedout"), "\(error)")
                #expect(response.body.count < Self.size)
            }
        }
        #expect(log.entries.first?.fault == .stall)
    }

    @Test func stallsShorterThanTheReadTimeoutOnlyDelay() async throws {
        let log = OriginRequestLog()
        try await Self.withFaultyOrigin(NetworkConditions(stallRate: 1, stallMilliseconds: 100), log: log) { base, content in
            try await OriginFixture.withClient(readTimeout: .seconds(10)) { client in
                let response = try await OriginFixture.fetch(client, base + "/seg0.ts")
                #expect(response.status == 200)
                #expect(response.bodyError == nil)
                #expect(response.body == content)
            }
        }
        #expect(log.entries.map(\.fault) == [.stall])
        #expect(log.entries.first?.bytesSent == Self.size)
    }

    @Test func faultsApplyToPlaylistsToo() async throws {
        try await Self.withFaultyOrigin(NetworkConditions(truncateRate: 1)) { base, _ in
            try await OriginFixture.withClient { client in
                let playlist = try await OriginFixture.fetch(client, base + "/index.m3u8")
                #expect(playlist.status == 200)
                #expect(playlist.body.count < "#EXTM3U\n#EXT-X-ENDLIST\n".utf8.count)
            }
        }
    }

    @Test func rangesResumeAfterAFault() async throws {
        // With every rate below 1 each path eventually succeeds: resume with Range until the segment is whole.
        let conditions = NetworkConditions(errorRate: 0.3, resetRate: 0.3, truncateRate: 0.3)
        let log = OriginRequestLog()
        try await Self.withFaultyOrigin(conditions, seed: 99, log: log) { base, content in
            try await OriginFixture.withClient { client in
                var received: [UInt8] = []
                for _ in 0..<100 where received.count < Self.size {
                    let headers = received.isEmpty ? [] : [("Range", "bytes=\(received.count)-")]
                    let response = try await OriginFixture.fetch(client, base + "/seg0.ts", headers: headers)
                    if response.status == 200 || response.status == 206 {
                        received += response.body
                    }
                }
                #expect(received == content)
            }
        }
        #expect(log.entries.contains { $0.fault != .none })
    }
}
