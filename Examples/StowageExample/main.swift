// StowageExample: the library API as a Swift program uses it, importing only StowageLibrary.
//
// It starts the embedded key server and origin (DemoEnvironment) on the bundled demo fixture, then, through
// OfflineLibrary: downloads the asset with its keys, verifies it deeply, plays it once through the playback gate
// (into ffmpeg's null sink when ffmpeg is installed, else by reading the served playlist), and deletes it. Exit status
// 0 when every step did what it should.
//
// Run: STOWAGE_HOME=$(mktemp -d) swift run StowageExample [Fixtures/demo/master.m3u8]

import Foundation
import StowageDemo
import StowageLibrary

@main
struct StowageExample {
    static func main() async {
        do {
            try await run()
            print("example complete")
        } catch let error as any StowageError {
            FileHandle.standardError.write(Data("example failed: \(error.message) [\(error.code)]\n".utf8))
            exit(1)
        } catch {
            FileHandle.standardError.write(Data("example failed: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run() async throws {
        let given = CommandLine.arguments.dropFirst().first
        guard let fixture = DemoEnvironment.locateFixture(given) else {
            throw ExampleError("cannot find Fixtures/demo/master.m3u8; run from the repository or pass its path")
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-example-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: work) }
        let environment = try await DemoEnvironment.start(fixture: fixture, in: work, profile: "lan")
        let library = try OfflineLibrary()
        do {
            try await use(library, environment)
        } catch {
            await library.close()
            await environment.stop()
            throw error
        }
        await library.close()
        await environment.stop()
    }

    static func use(_ library: OfflineLibrary, _ environment: DemoEnvironment) async throws {
        // 1. Download, keys first.
        let task = try await library.download(
            DownloadRequest(url: environment.masterURL.absoluteString, assetId: environment.assetId, token: try await environment.token())
        )
        for await event in task.events {
            if case .finished(let manifest) = event { print("downloaded \(manifest.assetId): \(manifest.renditions.count) renditions") }
        }
        _ = try await task.result()

        // 2. Verify before going offline.
        let report = try await library.verify(assetId: task.assetId, options: .init(deep: true))
        guard report.isPlayable else { throw ExampleError("the package does not play: \(report.problems.map { $0.message })") }
        print("verified: \(report.renditions.reduce(0) { $0 + $1.filesDecrypted }) files trial-decrypted")

        // 3. Play once through the gate.
        let hasFFmpeg = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/ffmpeg")
        }
        let playback = try await library.play(assetId: task.assetId, player: hasFFmpeg ? .ffmpegNull : nil)
        print("playing \(playback.url.absoluteString)")
        if hasFFmpeg {
            let end = try await playback.ended()
            guard end.playerExitStatus == 0 else { throw ExampleError("ffmpeg could not play the served asset") }
        } else {
            // No player here: the session serves until stopped.
            await playback.stop()
        }
        print("played")

        // 4. Delete: files, keys, and the lease released to the key server.
        let deletion = try library.delete(assetId: task.assetId)
        let sync = try await library.syncLeases()
        print("deleted \(deletion.report.filesRemoved) files; \(sync.released.count) lease(s) released")
    }
}

struct ExampleError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
