import Foundation
import StowageTestSupport
import Testing

/// `Examples/StowageExample` is the library API as a Swift program uses it (README, docs/library.md). It must keep
/// compiling against StowageLibrary alone and keep doing what it says: download, verify, play, delete.
struct ExampleProgramTests {
    @Test func theExampleProgramDownloadsVerifiesPlaysAndDeletes() async throws {
        let home = try TestSupport.temporaryDirectory("example")
        defer { try? FileManager.default.removeItem(at: home) }
        var environment = ProcessInfo.processInfo.environment
        environment["STOWAGE_HOME"] = home.path
        let output = try await ProcessRunner.run(
            try StowageExecutable.product(named: "StowageExample"),
            [TestSupport.fixtures.appendingPathComponent("demo/master.m3u8").path],
            environment: environment
        )
        let text = String(decoding: output.standardOutput, as: UTF8.self)
        let errors = String(decoding: output.standardError, as: UTF8.self)
        #expect(output.status == 0, "\(text)\n\(errors)")
        #expect(text.contains("downloaded "))
        #expect(text.contains("verified: "))
        #expect(text.contains("played"))
        #expect(text.contains("1 lease(s) released"))
        #expect(text.hasSuffix("example complete\n"))
        // Deleted: nothing of the asset remains in the library the example used.
        let assets = home.appendingPathComponent("packages")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: assets.path)) ?? []
        #expect(left.filter { !$0.hasPrefix(".") }.isEmpty, "left behind: \(left)")
    }
}
