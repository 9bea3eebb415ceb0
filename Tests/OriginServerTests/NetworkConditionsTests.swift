import Foundation
import OriginServer
import Testing

/// The named profiles and the scaling helpers.
struct NetworkConditionsTests {
    @Test(arguments: NetworkConditions.profileNames)
    func everyNamedProfileExists(name: String) throws {
        let profile = try #require(NetworkConditions.profile(named: name))
        #expect(NetworkConditions.profile(named: name.uppercased()) == profile)
        for rate in [profile.errorRate, profile.resetRate, profile.truncateRate, profile.stallRate] {
            #expect((0..<1).contains(rate))
        }
        #expect(profile.latencyMilliseconds >= 1)
        // A 3 MB asset finishes within a few seconds once a test scales the link to at least 1 MB/s.
        let scaled = profile.scaled(bandwidth: 1_000_000 / Double(profile.bandwidthBytesPerSecond ?? 1_000_000))
        #expect(scaled.bandwidthBytesPerSecond.map { $0 >= 1_000_000 } ?? true)
        #expect(scaled.errorRate == profile.errorRate)
    }

    @Test func knowsSixProfilesAndNoOthers() {
        #expect(NetworkConditions.profileNames == ["lan", "wifi", "3g", "edge", "lossy", "very-bad"])
        #expect(NetworkConditions.profile(named: "very_bad") == NetworkConditions.profile(named: "very-bad"))
        #expect(NetworkConditions.profile(named: "5g") == nil)
        #expect(NetworkConditions.profile(named: "") == nil)
    }

    @Test func profilesGetWorseDownTheList() throws {
        let lan = try #require(NetworkConditions.profile(named: "lan"))
        let veryBad = try #require(NetworkConditions.profile(named: "very-bad"))
        #expect(lan.bandwidthBytesPerSecond == nil)
        #expect(lan.errorRate == 0)
        #expect(veryBad.stallRate > 0)
        #expect(veryBad.stallMilliseconds == 3000)
        #expect(veryBad.errorRate > 0 && veryBad.resetRate > 0 && veryBad.truncateRate > 0)
    }

    @Test func scalesBandwidthAndTimeSeparately() throws {
        let edge = try #require(NetworkConditions.profile(named: "edge"))
        let fast = edge.scaled(bandwidth: 100)
        #expect(fast.bandwidthBytesPerSecond == 3_000_000)
        #expect(fast.latencyMilliseconds == edge.latencyMilliseconds)
        let quick = NetworkConditions.profile(named: "very-bad")!.scaled(time: 0.01)
        #expect(quick.latencyMilliseconds == 5)
        #expect(quick.stallMilliseconds == 30)
        #expect(quick.bandwidthBytesPerSecond == 50_000)
        #expect(NetworkConditions.unconditioned.scaled(bandwidth: 10).bandwidthBytesPerSecond == nil)
        #expect(NetworkConditions.unconditioned.isUnconditioned)
        #expect(!edge.isUnconditioned)
    }

    @Test func roundTripsThroughJSON() throws {
        let conditions = try #require(NetworkConditions.profile(named: "lossy"))
        let decoded = try JSONDecoder().decode(NetworkConditions.self, from: JSONEncoder().encode(conditions))
        #expect(decoded == conditions)
    }
}
