import Foundation
import NIOCore
import OriginServer
import Testing

/// Every named profile, sped up, still lets a retrying client download a whole asset.
struct ProfileDownloadTests {
    @Test(arguments: NetworkConditions.profileNames)
    func aRetryingClientGetsEverySegmentThrough(profileName: String) async throws {
        let profile = try #require(NetworkConditions.profile(named: profileName))
        // About 10 MB/s and a hundredth of the delays: seconds, not minutes, with the same fault mix.
        let conditions = profile.scaled(bandwidth: 10_000_000 / Double(profile.bandwidthBytesPerSecond ?? 10_000_000)).scaled(time: 0.01)
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let segments = (0..<6).map { OriginFixture.bytes(500_000, salt: UInt8($0)) }
        for (index, segment) in segments.enumerated() {
            try Data(segment).write(to: root.appendingPathComponent("seg\(index).ts"))
        }
        let log = OriginRequestLog()
        try await OriginFixture.withOrigin(.init(root: root.path, conditions: conditions, seed: 5, requestLog: log)) { base in
            try await OriginFixture.withClient(readTimeout: .seconds(10)) { client in
                for (index, segment) in segments.enumerated() {
                    var received: [UInt8] = []
                    for _ in 0..<50 where received.count < segment.count {
                        let headers = received.isEmpty ? [] : [("Range", "bytes=\(received.count)-")]
                        let response = try await OriginFixture.fetch(client, base + "/seg\(index).ts", headers: headers)
                        if response.status == 200 || response.status == 206 {
                            received += response.body
                        }
                    }
                    #expect(received == segment, "seg\(index).ts through \(profileName)")
                }
            }
        }
        #expect(log.entries.count >= segments.count)
    }
}
