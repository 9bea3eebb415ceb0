import DownloadTestSupport
import Foundation
import OfflinePackage
import OriginServer
import StowageTestSupport
import Testing

/// `stowage service run` as a separate process, driven by the commands a user types.
@Suite("stowage service: background downloads that survive kill -9")
struct ServiceCommandTests {
    /// The test process's environment with `STOWAGE_HOME`, and `STOWAGE_TOKEN` set to `token` (unset without one: never
    /// the developer's own).
    static func environment(home: URL, token: String? = nil) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["STOWAGE_HOME"] = home.path
        environment["STOWAGE_TOKEN"] = token
        return environment
    }

    /// Runs `stowage` to completion; an entitlement token goes in `STOWAGE_TOKEN`, as a user passes it.
    static func stowage(
        _ arguments: [String],
        home: URL,
        token: String? = nil,
        timeout: Duration = .seconds(60)
    ) async throws -> ProcessRunner.Output {
        try await ProcessRunner.run(try TestSupport.stowageBinary, arguments, environment: environment(home: home, token: token), timeout: timeout)
    }

    /// Starts the service and waits until it answers.
    static func startService(home: URL) async throws -> RunningProcess {
        let service = try ProcessRunner.start(
            try TestSupport.stowageBinary,
            ["service", "run", "--keep-free", "1M"],
            environment: environment(home: home)
        )
        for _ in 0..<100 {
            if try await stowage(["service", "status"], home: home).status == 0 { return service }
            try await Task.sleep(for: .milliseconds(50))
        }
        service.kill()
        _ = try? await service.waitForExit(timeout: .seconds(5))
        throw FrameHashes.Failure(
            description: "the service did not come up: \(String(decoding: (try? service.standardError()) ?? Data(), as: UTF8.self))"
        )
    }

    @Test("a service that holds its lock but does not answer: commands say service_unreachable, and do not act beside it")
    func stuckServiceIsNotTakenForAbsent() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("stuck-service-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        // A stand-in for a stuck service: it holds service.lock as the service does, and listens on service.sock
        // without ever answering.
        let standIn = try ProcessRunner.start(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "python3", "-c",
                """
                import fcntl, os, socket, sys, time
                home = sys.argv[1]
                lock = open(os.path.join(home, "service.lock"), "w")
                fcntl.flock(lock, fcntl.LOCK_EX)
                lock.write("process %d (the download service)" % os.getpid()); lock.flush()
                server = socket.socket(socket.AF_UNIX); server.bind(os.path.join(home, "service.sock")); server.listen(16)
                print("ready", flush=True)
                held = []
                while True:
                    connection, _ = server.accept(); held.append(connection)
                """,
                home.path,
            ]
        )
        defer { standIn.kill() }
        for _ in 0..<200 where !String(decoding: (try? standIn.standardOutput()) ?? Data(), as: UTF8.self).contains("ready") {
            try await Task.sleep(for: .milliseconds(25))
        }
        let listed = try await Self.stowage(["list"], home: home, timeout: .seconds(60))
        let output = String(decoding: listed.standardOutput + listed.standardError, as: UTF8.self)
        #expect(listed.status != 0 && output.contains("[service_unreachable]"), "\(output)")
        #expect(output.contains("did not answer within 10 s") && output.contains("(the download service)"), "\(output)")
        // A second service is refused, and so is recovering the state database under it.
        try await ErrorShapeTests.expectPlainFailure(["service", "run"], code: "service_already_running", home: home)
        try await ErrorShapeTests.expectFailure(["recover"], code: "data_directory_busy", home: home)
        // Without the lock held, the same socket is a dead service's: commands work on their own.
        standIn.kill()
        _ = try? await standIn.waitForExit(timeout: .seconds(10))
        let alone = try await Self.stowage(["list"], home: home, timeout: .seconds(60))
        #expect(alone.status == 0, "\(String(decoding: alone.standardError, as: UTF8.self))")
    }

    @Test("download --background returns at once; kill -9 of the service mid-download, start again: byte-identical, no whole file fetched twice")
    func killedServiceContinues() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = OriginRequestLog()
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 120_000), log: log) { origin, keyServer in
            let home = fixture.clientDirectory.url
            #expect(try await Self.stowage(["service", "status"], home: home).status == 3)
            var service = try await Self.startService(home: home)

            let submitted = try await Self.stowage(
                [
                    "download", "--background", fixture.sourceURL(origin), "--asset-id", fixture.assetId, "--subtitles", "none", "--concurrency", "1",
                    "--key-server", keyServer.absoluteString,
                ],
                home: home,
                token: try await fixture.token()
            )
            #expect(submitted.status == 0, "\(String(decoding: submitted.standardError, as: UTF8.self))")
            #expect(String(decoding: submitted.standardOutput, as: UTF8.self) == "\(fixture.assetId)\n")
            // It returned without waiting for the download (which takes seconds at this rate); how fast it returns is
            // measured by Benchmarks/service.sh, not timed here.
            #expect((try? fixture.package.readManifest().isComplete) != true, "download --background waited for the download")

            // Some segments whole (renamed into place), the download not done: kill -9.
            func whole() -> [PackageFile] {
                let files = (try? fixture.package.readManifest().files) ?? []
                return files.filter { FileManager.default.fileExists(atPath: (try? fixture.package.url(forRelativePath: $0.path).path) ?? "") }
            }
            for _ in 0..<800 where whole().count < 3 { try await Task.sleep(for: .milliseconds(25)) }
            service.kill()
            _ = try await service.waitForExit(timeout: .seconds(10))
            let manifest = try fixture.package.readManifest()
            #expect(!manifest.isComplete)
            let whole = whole()
            let wholeSources = Set(whole.map { String($0.sourceURL.dropFirst(origin.absoluteString.count)) })
            #expect(!wholeSources.isEmpty)
            let requestsBefore = log.entries.count
            // Dead service: the commands work on their own, and the socket left behind is not mistaken for a service.
            let list = try await Self.stowage(["list"], home: home)
            #expect(list.status == 0 && String(decoding: list.standardOutput, as: UTF8.self).contains(fixture.assetId))

            service = try await Self.startService(home: home)
            let attached = try await Self.stowage(["download", "--attach", fixture.assetId, "--json"], home: home, timeout: .seconds(90))
            #expect(attached.status == 0, "\(String(decoding: attached.standardError, as: UTF8.self))")
            let lines = String(decoding: attached.standardOutput, as: UTF8.self).split(separator: "\n")
            #expect(lines.last?.contains(#""event":"finished""#) == true, "\(lines.suffix(3))")

            let complete = try fixture.package.readManifest()
            #expect(complete.isComplete)
            try fixture.assertPackageMatchesSource(complete, origin: origin)
            let askedAgain = Set(log.entries.dropFirst(requestsBefore).map(\.path)).intersection(wholeSources)
            #expect(askedAgain.isEmpty, "fetched again after the restart: \(askedAgain.sorted())")

            service.interrupt()
            let stopped = try await service.waitForExit(timeout: .seconds(20))
            #expect(stopped.status == 0, "\(String(decoding: stopped.standardError, as: UTF8.self))")
            #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent("service.sock").path))
            // The service's log follows the download it ran: its progress by tenths and its completion.
            let serviceLog = String(decoding: stopped.standardError, as: UTF8.self)
            #expect(serviceLog.contains("\(fixture.assetId): 100% ("), "\(serviceLog)")
            #expect(serviceLog.contains("\(fixture.assetId): complete, "), "\(serviceLog)")
        }
    }

    @Test("--background without a running service: one error line, service_not_running, the same code with --json")
    func backgroundNeedsTheService() async throws {
        let home = try TestSupport.temporaryDirectory("no-service")
        defer { try? FileManager.default.removeItem(at: home) }
        let plain = try await Self.stowage(["download", "--background", "https://cdn.example/master.m3u8"], home: home)
        #expect(plain.status == 1)
        let text = String(decoding: plain.standardError, as: UTF8.self)
        #expect(text.split(separator: "\n").count == 1)
        #expect(text.hasSuffix("[service_not_running]\n"), "\(text)")
        #expect(text.contains("stowage service run"))
        let json = try await Self.stowage(["download", "--background", "https://cdn.example/master.m3u8", "--json"], home: home)
        let document = try JSONSerialization.jsonObject(with: json.standardOutput) as? [String: [String: String]]
        #expect(document?["error"]?["code"] == "service_not_running")
    }
}
