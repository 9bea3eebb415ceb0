import ArgumentParser
import Foundation
import OriginServer
import Playback
import StowageCore
import StowageDemo
import StowageLibrary

/// `stowage demo`: the library's demo scenario, narrated.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the main job end to end on the bundled fixture: package, serve, download, verify, play, renew, expire, delete.",
        discussion: """
            Everything runs on 127.0.0.1 in a temporary folder (your own data directory is not touched): an embedded
            key server and origin, the fixture packaged with SAMPLE-AES and skd keys, a download with two audio
            languages and subtitles, a deep verification, playback through the gate into ffmpeg (null sink; the URL
            is served a moment when ffmpeg is missing), a lease renewal, a simulated clock moved past the playback
            window to show the refusal, and the asset deleted with its lease released.
            Example:
              stowage demo
              stowage demo --keep --profile 3g
            """
    )

    @Option(help: "The clear multivariant playlist to package (default: Fixtures/demo/master.m3u8, found from here or the executable).")
    var fixture: String?

    @Option(help: "The origin's network profile (lan, wifi, 3g, edge, lossy, very-bad).")
    var profile = "wifi"

    @Flag(help: "Keep the temporary folder (printed at the end).")
    var keep = false

    func validate() throws {
        guard NetworkConditions.profile(named: profile) != nil else {
            throw ValidationError("unknown profile '\(profile)'; use one of \(NetworkConditions.profileNames.joined(separator: ", "))")
        }
    }

    func run() async throws {
        let started = ContinuousClock.now
        guard let source = DemoEnvironment.locateFixture(fixture) else {
            CommandOutput.fail(
                code: .fixtureNotFound,
                message: fixture.map { "cannot find the fixture \($0); pass the path of a clear multivariant playlist" }
                    ?? "cannot find Fixtures/demo/master.m3u8; run from the repository or pass --fixture PATH",
                json: false
            )
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-demo-\(UUID().uuidString.prefix(8))")
        let display = ProgressDisplay(json: false, assetId: "demo")
        let scenario = DemoScenario(fixture: source, work: work, profile: profile, player: ChildProcess.isAvailable("ffmpeg") ? .ffmpegNull : nil)
        do {
            try await scenario.run { event in
                switch event {
                case .step(let number, let text): demoPrint("\n==> \(number). \(text)")
                case .detail(let text): demoPrint("    \(text)")
                case .download(let event): display.show(event)
                }
            }
        } catch {
            let shown = CommandOutput.presentable(error)
            Terminal.standardError("demo failed: \(shown.message) [\(shown.code)]\n")
            if !keep { try? FileManager.default.removeItem(at: work) }
            throw ExitCode(1)
        }
        if keep {
            demoPrint("kept \(work.path)")
        } else {
            try? FileManager.default.removeItem(at: work)
        }
        let elapsed = ContinuousClock.now - started
        demoPrint(String(format: "demo complete in %.1f s", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
    }
}

/// Writes a line to standard output unbuffered, so the steps and the download display (standard error) stay in order
/// when both go to one pipe.
func demoPrint(_ line: String) {
    Terminal.standardOutput(line + "\n")
}
