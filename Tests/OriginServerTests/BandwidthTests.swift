import Foundation
import OriginServer
import Testing

/// Bandwidth shaping: only lower bounds on time, which a busy machine cannot break.
struct BandwidthTests {
    @Test func limitsOneDownloadToTheLinkRate() async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let content = OriginFixture.bytes(1_000_000)
        try Data(content).write(to: root.appendingPathComponent("seg.ts"))
        let conditions = NetworkConditions(bandwidthBytesPerSecond: 2_000_000)
        try await OriginFixture.withOrigin(.init(root: root.path, conditions: conditions)) { base in
            try await OriginFixture.withClient { client in
                let clock = ContinuousClock()
                let start = clock.now
                let response = try await OriginFixture.fetch(client, base + "/seg.ts")
                let elapsed = start.duration(to: clock.now)
                #expect(response.body == content)
                #expect(elapsed >= .milliseconds(400), "1 MB at 2 MB/s took \(elapsed)")
            }
        }
    }

    @Test func sharesTheLinkBetweenConnections() async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try Data(OriginFixture.bytes(500_000)).write(to: root.appendingPathComponent("a.ts"))
        try Data(OriginFixture.bytes(500_000)).write(to: root.appendingPathComponent("b.ts"))
        let conditions = NetworkConditions(bandwidthBytesPerSecond: 2_000_000)
        try await OriginFixture.withOrigin(.init(root: root.path, conditions: conditions)) { base in
            try await OriginFixture.withClient { client in
                let clock = ContinuousClock()
                let start = clock.now
                async let a = OriginFixture.fetch(client, base + "/a.ts")
                async let b = OriginFixture.fetch(client, base + "/b.ts")
                let (first, second) = try await (a, b)
                let elapsed = start.duration(to: clock.now)
                #expect(first.body.count == 500_000 && second.body.count == 500_000)
                // 1 MB in all over one 2 MB/s link, not 2 MB/s each.
                #expect(elapsed >= .milliseconds(400), "2 x 500 kB at 2 MB/s took \(elapsed)")
            }
        }
    }

    @Test func addsLatencyBeforeTheHead() async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try Data("#EXTM3U\n".utf8).write(to: root.appendingPathComponent("index.m3u8"))
        try await OriginFixture.withOrigin(.init(root: root.path, conditions: .init(latencyMilliseconds: 200))) { base in
            try await OriginFixture.withClient { client in
                let clock = ContinuousClock()
                let start = clock.now
                let response = try await OriginFixture.fetch(client, base + "/index.m3u8")
                #expect(response.status == 200)
                #expect(start.duration(to: clock.now) >= .milliseconds(200))
            }
        }
    }
}
