import Foundation
import Testing

@testable import OriginServer

/// The same seed and the same requests give the same faults, however requests interleave.
struct DeterminismTests {
    static let conditions = NetworkConditions(errorRate: 0.2, resetRate: 0.2, truncateRate: 0.2, stallRate: 0.2, stallMilliseconds: 1)

    struct Outcome: Hashable, Comparable {
        var path: String
        var attempt: Int
        var fault: NetworkFault
        var status: Int

        static func < (lhs: Outcome, rhs: Outcome) -> Bool {
            (lhs.path, lhs.attempt) < (rhs.path, rhs.attempt)
        }
    }

    /// Fetches seg0...seg7 three times each, path after path or all paths at once, and returns what the log says.
    static func outcomes(seed: UInt64, concurrently: Bool) async throws -> [Outcome] {
        let log = OriginRequestLog()
        let paths = (0..<8).map { "/seg\($0).ts" }
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        for path in paths {
            try Data(OriginFixture.bytes(20_000)).write(to: root.appendingPathComponent(String(path.dropFirst())))
        }
        try await OriginFixture.withOrigin(.init(root: root.path, conditions: conditions, seed: seed, requestLog: log)) { base in
            try await OriginFixture.withClient { client in
                if concurrently {
                    // Paths in parallel; each path's attempts in order, as a retrying client makes them.
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for path in paths.reversed() {
                            group.addTask {
                                for _ in 0..<3 { _ = try await OriginFixture.fetch(client, base + path) }
                            }
                        }
                        try await group.waitForAll()
                    }
                } else {
                    for path in paths {
                        for _ in 0..<3 { _ = try await OriginFixture.fetch(client, base + path) }
                    }
                }
            }
        }
        var attempts: [String: Int] = [:]
        return log.entries.map { entry in
            defer { attempts[entry.path, default: 0] += 1 }
            return Outcome(path: entry.path, attempt: attempts[entry.path, default: 0], fault: entry.fault, status: entry.status)
        }
        .sorted()
    }

    @Test func sameSeedSameFaults() async throws {
        let first = try await Self.outcomes(seed: 7, concurrently: false)
        let second = try await Self.outcomes(seed: 7, concurrently: false)
        #expect(first.count == 24)
        #expect(first == second)
        #expect(Set(first.map(\.fault)).count >= 3)
    }

    @Test func interleavingDoesNotChangeTheFaults() async throws {
        let sequential = try await Self.outcomes(seed: 7, concurrently: false)
        let concurrent = try await Self.outcomes(seed: 7, concurrently: true)
        #expect(sequential == concurrent)
    }

    @Test func anotherSeedOtherFaults() async throws {
        let first = try await Self.outcomes(seed: 7, concurrently: false)
        let other = try await Self.outcomes(seed: 8, concurrently: false)
        #expect(first.map(\.fault) != other.map(\.fault))
    }

    @Test func planIsAPureFunctionOfItsInputs() {
        func plan(seed: UInt64 = 1, path: String = "/a.ts", range: String? = nil, attempt: Int = 0) -> FaultPlan {
            FaultPlan(conditions: Self.conditions, seed: seed, path: path, range: range, attempt: attempt)
        }
        #expect(plan() == plan())
        let byAttempt = Set((0..<50).map { plan(attempt: $0) })
        let byRange = Set((0..<50).map { plan(range: "bytes=\($0)-") })
        let bySeed = Set((0..<50).map { plan(seed: UInt64($0)) })
        #expect(byAttempt.count > 10 && byRange.count > 10 && bySeed.count > 10)
    }

    @Test func faultRatesMatchTheConditions() {
        // 10,000 plans, fixed inputs: the fractions land near the rates (each fault is tried only if earlier ones were not).
        var counts: [NetworkFault: Int] = [:]
        for attempt in 0..<10_000 {
            counts[FaultPlan(conditions: Self.conditions, seed: 3, path: "/seg.ts", range: nil, attempt: attempt).fault, default: 0] += 1
        }
        #expect((1700...2300).contains(counts[.error, default: 0]))
        #expect((1300...1900).contains(counts[.reset, default: 0]))
        let none = FaultPlan(conditions: .unconditioned, seed: 3, path: "/seg.ts", range: nil, attempt: 0)
        #expect(none.fault == .none)
    }
}
