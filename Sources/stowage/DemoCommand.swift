import ArgumentParser
import AssetDownload
import AsyncHTTPClient
import Foundation
import KeyDelivery
import KeyServer
import OfflinePackage
import OriginServer
import Playback

/// `stowage demo`: the whole job on the bundled fixture, narrated.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the main job end to end on the bundled fixture: package, serve, download, verify, play, renew, expire, delete.",
        discussion: """
            Everything runs on 127.0.0.1 in a temporary folder (your own data directory is not touched): an embedded
            key server and origin, the fixture packaged with SAMPLE-AES and skd keys, a download with two audio
            languages and subtitles, a deep verification, playback through the gate into ffmpeg (null sink; the URL
            is printed when ffmpeg is missing), a lease renewal, a simulated clock moved past the playback window to
            show the refusal, and the asset deleted with its lease released.
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
        let started = Date()
        guard let source = Self.locateFixture(fixture) else {
            CommandOutput.fail(
                code: "fixture_not_found",
                message: "cannot find Fixtures/demo/master.m3u8; run from the repository or pass --fixture PATH",
                json: false
            )
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-demo-\(UUID().uuidString.prefix(8))")
        do {
            try await Demo(source: source, work: work, profile: profile).run()
        } catch {
            FileHandle.standardError.write(Data("demo failed: \(Self.describe(error))\n".utf8))
            if !keep { try? FileManager.default.removeItem(at: work) }
            throw ExitCode(1)
        }
        if keep {
            demoPrint("kept \(work.path)")
        } else {
            try? FileManager.default.removeItem(at: work)
        }
        demoPrint(String(format: "demo complete in %.1f s", Date().timeIntervalSince(started)))
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as DownloadError: "\(error.description) [\(error.code)]"
        case let error as PlaybackError: "\(error.message) [\(error.code)]"
        case let error as KeySessionError: "\(error.message) [\(error.code)]"
        case let error as PackageError: "\(error.description) [\(error.code)]"
        case let error as DemoError: error.message
        default: "\(error)"
        }
    }

    /// `--fixture`, else Fixtures/demo/master.m3u8 under the working directory or any folder above the executable.
    static func locateFixture(_ given: String?) -> URL? {
        if let given { return FileManager.default.fileExists(atPath: given) ? URL(fileURLWithPath: given) : nil }
        let relative = "Fixtures/demo/master.m3u8"
        var candidates = [URL(fileURLWithPath: FileManager.default.currentDirectoryPath)]
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<6 {
            candidates.append(directory)
            directory.deleteLastPathComponent()
        }
        return candidates.map { $0.appendingPathComponent(relative) }.first { FileManager.default.fileExists(atPath: $0.path) }
    }
}

/// The demo's steps. Each prints what it does and what came of it.
struct Demo {
    let source: URL
    let work: URL
    let profile: String
    let assetId = "demo"

    private func step(_ number: Int, _ text: String) {
        demoPrint("\n==> \(number). \(text)")
    }

    private func say(_ text: String) { demoPrint("    \(text)") }

    func run() async throws {
        let home = DataDirectory(url: work.appendingPathComponent("home", isDirectory: true))
        try home.prepare()
        // The client's clock: real time, until step 8 moves it.
        let clock = TestClock(now: SystemClock().now)
        let serverClock = KeyServerClock { Date().timeIntervalSince1970 }

        step(1, "Starting an embedded key server on 127.0.0.1")
        let keyServerDirectory = try KeyServerDataDirectory.initialize(at: work.appendingPathComponent("keyserver").path)
        let keyServer = try await KeyServerApplication(dataDirectory: keyServerDirectory, clock: serverClock)
        let (keyAddresses, keyContinuation) = AsyncStream.makeStream(of: KeyServerApplication.Address.self)
        let keyTask = Task { try await keyServer.run(port: 0) { keyContinuation.yield($0) } }
        defer { keyTask.cancel() }
        var keyIterator = keyAddresses.makeAsyncIterator()
        guard let keyAddress = await keyIterator.next() else { throw CancellationError() }
        say("key server at \(keyAddress.baseURL.absoluteString) (policy: 30 days to keep, 48 hours to watch once started)")

        step(2, "Packaging \(source.deletingLastPathComponent().lastPathComponent)/ with SAMPLE-AES and fresh skd keys")
        let originRoot = work.appendingPathComponent("origin", isDirectory: true)
        let packager = ContentPackager(
            assetID: assetId,
            method: .sampleAES,
            outputDirectory: originRoot.appendingPathComponent(assetId),
            rotationPeriod: nil,
            keyServerURL: keyAddress.baseURL.absoluteString,
            registrar: keyServerDirectory
        )
        let packaged = try await packager.package(playlistAt: source)
        for rendition in packaged.renditions {
            say("\(rendition.playlist): \(rendition.container), \(rendition.segments) segments, \(rendition.keyIDs.isEmpty ? "clear" : "encrypted")")
        }
        say("content key \(packaged.keyIDs.joined(separator: ", ")) registered with the key server; the origin never sees it")

        step(3, "Starting an origin on 127.0.0.1 shaped like '\(profile)'")
        let conditions = NetworkConditions.profile(named: profile) ?? .unconditioned
        let origin = Origin(configuration: .init(root: originRoot.path, conditions: conditions, seed: 1))
        let (originAddresses, originContinuation) = AsyncStream.makeStream(of: Origin.Address.self)
        let originTask = Task { try await origin.run { originContinuation.yield($0) } }
        defer { originTask.cancel() }
        var originIterator = originAddresses.makeAsyncIterator()
        guard let originAddress = await originIterator.next() else { throw CancellationError() }
        let url = originAddress.baseURL.appendingPathComponent("\(assetId)/master.m3u8").absoluteString
        say(url)

        step(4, "Downloading: highest variant, audio en+fr, all subtitles (keys first, then segments)")
        let session = try DownloadSession(dataDirectory: home, clock: clock)
        let token = try await keyServerDirectory.makeToken(subject: "demo-user", assets: [assetId], ttl: 3600, clock: serverClock)
        let request = DownloadRequest(
            url: url,
            assetId: assetId,
            title: "Stowage demo",
            selection: MediaSelectionOptions(audio: .languages(["en", "fr"]), subtitles: .all),
            token: token
        )
        let task = try session.start(request)
        let display = ProgressDisplay(json: false, assetId: assetId)
        for await event in task.events { display.show(event) }
        let manifest = try await task.result()
        try await session.shutdown()

        step(5, "Verifying the package before going offline (deep: every file hashed and trial-decrypted)")
        let store = try KeyStore(dataDirectory: home.url, clock: clock)
        let device = try DeviceIdentity.loadOrCreate(in: home.url)
        let package = try PackageDirectory(assetId: assetId, in: home)
        let report = try await PackageVerifier(store: store, device: device, clock: clock, options: .init(deep: true, duration: 48 * 3600))
            .verify(package)
        for rendition in report.renditions {
            say("\(rendition.id): \(rendition.files) files, \(rendition.filesDecrypted) decrypted, \(rendition.isPlayable ? "ok" : "PROBLEM")")
        }
        guard report.isPlayable else {
            throw DemoError("verification found problems: " + report.problems.map(\.message).joined(separator: "; "))
        }
        say("playable offline for at least 48 h: yes (\(Library.megabytes(manifest.knownBytes)))")

        step(6, "Playing through the gate (first play starts the 48 h playback window)")
        let gate = PlaybackGate(dataDirectory: home, store: store, device: device, clock: clock)
        let authorization = try gate.authorize(assetId: assetId)
        let server = try PlaybackServer(authorization: authorization, gate: gate)
        if Self.onPath("ffmpeg") {
            let end = try await server.run(player: .ffmpegNull) { address in
                demoPrint("    serving \(address.multivariantURL.absoluteString)")
            }
            if let error = end.error { throw error }
            guard end.playerExitStatus == 0 else { throw DemoError("ffmpeg exited with status \(end.playerExitStatus ?? -1)") }
            say("ffmpeg decoded every stream of the decrypted package (null sink)")
        } else {
            let serving = Task {
                try await server.run { address in demoPrint("    serving \(address.multivariantURL.absoluteString) (no ffmpeg found)") }
            }
            try await Task.sleep(for: .seconds(2))
            serving.cancel()
            _ = try? await serving.value
        }
        if let lease = try store.evaluate(assetId: assetId, at: clock.now).lease, let ends = lease.playbackEndsAt {
            say("lease \(lease.leaseId): playback window ends in \(Library.duration(ends - clock.now))")
        }

        step(7, "Renewing the lease with the key server")
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            let keys = KeySession(clock: clock, http: http, store: store, device: device, serverURL: keyAddress.baseURL, token: token)
            let leaseId = try requireLease(store.evaluate(assetId: assetId, at: clock.now).lease?.leaseId)
            let renewed = try await keys.renew(leaseId: leaseId)
            say(
                "storage window now ends \(Date(timeIntervalSince1970: TimeInterval(renewed.terms.storageExpiresAt))); the playback window is unchanged"
            )

            step(8, "Moving a simulated clock 49 hours ahead, past the playback window")
            clock.advance(by: 49 * 3600)
            do {
                _ = try gate.authorize(assetId: assetId)
                throw DemoError("the gate allowed playback after the playback window")
            } catch let refusal as PlaybackError {
                say("refused: \(refusal.message) [\(refusal.code)]")
            }

            step(9, "Deleting the asset: files removed, keys erased, release sent to the key server")
            let deletion = try PackageDeletion(dataDirectory: home, store: store).delete(assetId: assetId, at: clock.now)
            say(
                "\(deletion.filesRemoved) files removed, \(Library.megabytes(deletion.bytesFreed)) freed, \(deletion.leasesReturned.count) lease(s) queued for release"
            )
            let sync = try await keys.sync()
            say("released on the key server: \(sync.released.count) lease(s)\(sync.failed.isEmpty ? "" : ", still queued: \(sync.failed.count)")")
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
        keyTask.cancel()
        originTask.cancel()
        _ = try? await keyTask.value
        _ = try? await originTask.value
    }

    static func onPath(_ program: String) -> Bool {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return paths.contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(program)") }
    }
}

/// The lease ID or a clear error.
private func requireLease(_ id: String?) throws -> String {
    guard let id else { throw LeaseError.noLease(assetId: "demo") }
    return id
}

/// A step of the demo that did not turn out as it should.
struct DemoError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Writes a line to standard output unbuffered, so the steps and the download display (standard error) stay in order
/// when both go to one pipe.
func demoPrint(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
