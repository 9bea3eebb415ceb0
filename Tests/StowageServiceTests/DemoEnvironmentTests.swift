import Foundation
import StowageCore
import StowageDemo
import StowageLibrary
import Testing

/// The demo's environment as the library starts it (the command checks its options first, so only a program calling
/// the library reaches these).
struct DemoEnvironmentTests {
    @Test("a network profile that does not exist: unknown_profile, naming the ones that do, before anything starts")
    func unknownProfile() async throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("demo-environment-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let fixture = work.appendingPathComponent("master.m3u8")
        let error = await #expect(throws: DemoError.self) {
            _ = try await DemoEnvironment.start(fixture: fixture, in: work, profile: "dial-up")
        }
        #expect(error?.code == "unknown_profile")
        #expect(error?.message.contains("\"dial-up\"") == true && error?.message.contains("wifi") == true, "\(error?.message ?? "")")
        // No key server data directory, no origin folder: it stopped before starting either.
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.path).isEmpty)
    }
}
