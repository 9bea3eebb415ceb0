import AssetDownload
import DownloadTestSupport
import Foundation
import KeyDelivery
import KeyServer
import Logging
import OfflinePackage
import OriginServer
import ServiceLifecycle
import StowageCore
import StowageLibrary
import StowageService
import Testing

/// Runs `service` in a service group while `body` talks to it over its socket, then shuts it down gracefully.
func withService<T: Sendable>(_ service: DownloadService, _ body: @Sendable (ServiceClient) async throws -> T) async throws -> T {
    var logger = Logger(label: "test.service")
    logger.logLevel = .error
    let group = ServiceGroup(configuration: .init(services: [service], gracefulShutdownSignals: [], logger: logger))
    let running = Task { try await group.run() }
    var client: ServiceClient?
    for _ in 0..<250 where client == nil {  // up to 5 s for the socket
        client = await ServiceClient.connect(dataDirectory: service.library.dataDirectory)
        if client == nil { try await Task.sleep(for: .milliseconds(20)) }
    }
    guard let client else {
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        throw ReportedError(code: .serviceNotRunning, message: "the service did not start listening")
    }
    // Only the owner may talk to it (set just after the bind; the 0700 data directory covers the moment between).
    let socket = ServiceEndpoint(dataDirectory: service.library.dataDirectory).socketURL.path
    var mode = 0
    for _ in 0..<50 where mode != 0o600 {
        mode = ((try? FileManager.default.attributesOfItem(atPath: socket))?[.posixPermissions] as? NSNumber)?.intValue ?? 0
        if mode != 0o600 { try await Task.sleep(for: .milliseconds(20)) }
    }
    #expect(mode == 0o600, "the service's socket has mode \(String(mode, radix: 8)), not 600")
    let result: Result<T, any Error>
    do {
        result = .success(try await body(client))
    } catch {
        result = .failure(error)
    }
    await client.close()
    await group.triggerGracefulShutdown()
    try await running.value
    await service.library.close()
    return try result.get()
}

/// Collects a download's updates from the service until its run ends.
func attach(_ client: ServiceClient, _ assetId: String) async throws -> [DownloadUpdate] {
    var updates: [DownloadUpdate] = []
    for try await update in try await client.updates(assetId: assetId) { updates.append(update) }
    return updates
}

@Suite("The download service: queue, socket API, lease upkeep")
struct ServiceTests {
    static func configuration(_ configure: (inout ServiceConfiguration) -> Void = { _ in }) -> ServiceConfiguration {
        var configuration = ServiceConfiguration(
            keepFreeBytes: 1 << 20,
            upkeepInterval: .seconds(3600),
            tickInterval: .milliseconds(100),
            initialRetryDelay: .milliseconds(200),
            maximumRetryDelay: .seconds(1)
        )
        configuration.downloads.retry = RetryPolicy(maximumAttempts: 6, initialDelay: 0.02, maximumDelay: 0.2, networkDownGrace: 2)
        // AsyncHTTPClient keeps retrying a refused connection until the request's deadline: keep it short here.
        configuration.downloads.headTimeout = 2
        configure(&configuration)
        return configuration
    }

    static func request(_ fixture: DownloadFixture, _ origin: URL, _ keyServer: URL, asset: String) async throws -> DownloadRequest {
        DownloadRequest(
            url: fixture.sourceURL(origin, asset: asset),
            assetId: asset,
            selection: MediaSelectionOptions(subtitles: .none),
            keyServerURL: keyServer.absoluteString,
            token: try await fixture.token(),
            concurrency: 2
        )
    }

    @Test("with --max-downloads 1, background downloads run one after the other, higher priority first, and complete intact")
    func queueRunsOneAtATime() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.addAsset("second")
        try await fixture.addAsset("third")
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 2_000_000)) { origin, keyServer in
            let service = try DownloadService.open(
                dataDirectory: fixture.clientDirectory,
                configuration: Self.configuration { $0.maxDownloads = 1 }
            )
            try await withService(service) { client in
                let first = try await client.submit(try await Self.request(fixture, origin, keyServer, asset: fixture.assetId))
                let second = try await client.submit(try await Self.request(fixture, origin, keyServer, asset: "second"))
                let third = try await client.submit(try await Self.request(fixture, origin, keyServer, asset: "third"), priority: 5)
                #expect([first.assetId, second.assetId, third.assetId] == [fixture.assetId, "second", "third"])
                // While one runs the others wait their turn, the higher priority first.
                let queued = try await client.downloads()
                #expect(queued.filter(\.running).count == 1)
                #expect(queued.first { $0.assetId == "third" }?.position == 0)
                #expect(queued.first { $0.assetId == "second" }?.position == 1)
                for asset in [fixture.assetId, "second", "third"] {
                    #expect(try await attach(client, asset).last?.event == .finished)
                }
                let runs = try await client.status().runs
                #expect(runs.map(\.assetId) == [fixture.assetId, "third", "second"])
                for (earlier, later) in zip(runs, runs.dropFirst()) {
                    #expect(later.startedAt >= (earlier.endedAt ?? .infinity), "runs overlapped: \(runs)")
                }
                #expect(runs.allSatisfy { $0.outcome == "finished" })
                let assets = try await client.assets()
                #expect(Set(assets.map(\.assetId)) == [fixture.assetId, "second", "third"])
                #expect(assets.allSatisfy { $0.state == "complete" })
            }
            let manifest = try fixture.package.readManifest()
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
        }
    }

    @Test("outside its --window the service queues a download and fetches nothing: waiting, outside_time_window, and when it goes on")
    func outsideTheWindowWaits() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        // A window that opens two hours from now, local time, and lasts an hour: closed now, whatever the time.
        let parts = Calendar.current.dateComponents([.hour, .minute], from: Date())
        let minutes = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        let opens = (minutes + 120) % 1440
        let text = "\(String(format: "%02d:%02d", opens / 60, opens % 60))-\(String(format: "%02d:%02d", ((opens + 60) % 1440) / 60, opens % 60))"
        let window = try TimeWindow(parsing: text)
        try await fixture.withServers { origin, keyServer in
            let service = try DownloadService.open(
                dataDirectory: fixture.clientDirectory,
                configuration: Self.configuration { $0.window = window }
            )
            try await withService(service) { client in
                _ = try await client.submit(try await Self.request(fixture, origin, keyServer, asset: fixture.assetId))
                // Some scheduler ticks (100 ms each) go by, and still nothing runs.
                try await Task.sleep(for: .seconds(1))
                let download = try #require(try await client.downloads().first { $0.assetId == fixture.assetId })
                #expect(!download.running && download.waiting)
                #expect(download.reason?.code == "outside_time_window")
                let message = download.reason?.message ?? ""
                #expect(message.contains("between \(text.prefix(5)) and \(text.suffix(5)) local time") && message.contains("--window"), "\(message)")
                let files =
                    FileManager.default.enumerator(at: fixture.clientDirectory.url, includingPropertiesForKeys: nil)?.allObjects as? [URL] ?? []
                let media = files.filter { ["ts", "m4s", "mp4", "aac"].contains($0.pathExtension) }
                #expect(media.isEmpty, "fetched outside the window: \(media.map(\.lastPathComponent))")
            }
        }
    }

    @Test("pause holds a download until resume; cancel and delete through the socket stop it first; errors keep their code")
    func pauseResumeCancelDelete() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 300_000)) { origin, keyServer in
            let service = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: Self.configuration())
            try await withService(service) { client in
                _ = try await client.submit(try await Self.request(fixture, origin, keyServer, asset: fixture.assetId))
                // Running with bytes on disk (keys fetched, package folder made), however slow the machine is.
                var running = false
                for _ in 0..<400 where !running {
                    let download = try await client.download(assetId: fixture.assetId)
                    running = download.running && (download.bytes ?? 0) > 0
                    if !running { try await Task.sleep(for: .milliseconds(50)) }
                }
                #expect(running)
                let paused = try await client.pause(assetId: fixture.assetId)
                #expect(paused.state == "paused" && !paused.running && !paused.waiting)
                // Passes of the queue leave a download the user paused alone.
                for _ in 0..<3 { await service.schedulingPass() }
                #expect(try await client.download(assetId: fixture.assetId).state == "paused")
                // An attach to a paused download says so and ends.
                #expect(try await attach(client, fixture.assetId).map(\.event) == [.paused])

                let resumed = try await client.resume(assetId: fixture.assetId)
                #expect(resumed.state != "paused")
                // The asset is busy in the service: a deletion from another process is refused; through the service it
                // stops the download first.
                var runningAgain = false
                for _ in 0..<400 where !runningAgain {
                    runningAgain = try await client.download(assetId: fixture.assetId).running
                    if !runningAgain { try await Task.sleep(for: .milliseconds(25)) }
                }
                #expect(runningAgain)
                let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
                do {
                    _ = try library.delete(assetId: fixture.assetId)
                    Issue.record("a deletion beside a running download was allowed")
                } catch let error as any StowageError {
                    #expect(error.code == "asset_busy")
                }
                await library.close()
                let deletion = try await client.delete(assetId: fixture.assetId)
                #expect(deletion.report.packageFound)
                #expect(!FileManager.default.fileExists(atPath: fixture.package.url.path))
                // Gone: the service says so with the library's code.
                do {
                    _ = try await client.pause(assetId: fixture.assetId)
                    Issue.record("pausing a deleted download succeeded")
                } catch let error as ReportedError {
                    #expect(error.code == "download_not_found")
                    #expect(error.subject.assetId == fixture.assetId)
                }
                do {
                    _ = try await client.info(assetId: fixture.assetId)
                    Issue.record("info of a deleted asset succeeded")
                } catch let error as ReportedError {
                    #expect(error.code == "package_not_found")
                }
            }
        }
    }

    @Test("a download whose servers are down waits (never failed) and completes once they are back")
    func networkDownIsWaitedOut() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let (ports, request) = try await fixture.withServers { origin, keyServer in
            ((origin.port ?? 0, keyServer.port ?? 0), try await Self.request(fixture, origin, keyServer, asset: fixture.assetId))
        }
        let service = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: Self.configuration())
        try await withService(service) { client in
            // Both servers are down (their ports refuse connections): the task waits and retries instead of failing.
            try await fixture.whileDown(ports: [ports.0, ports.1]) {
                _ = try await client.submit(request)
                var waited: ServiceDownload?
                for _ in 0..<150 where waited == nil {
                    let status = try await client.download(assetId: fixture.assetId)
                    #expect(status.state != "failed")
                    if status.waiting { waited = status } else { try await Task.sleep(for: .milliseconds(100)) }
                }
                let waiting = try #require(waited)
                #expect(
                    DownloadError.isTransient(code: ErrorCode(waiting.reason?.code ?? "", fallback: .failed)),
                    "\(String(describing: waiting.reason))"
                )
            }
            // Back where the request says they are: the next retry completes the download.
            try await fixture.withServers(keyServerPort: ports.1, originPort: ports.0) { origin, _ in
                #expect(try await attach(client, fixture.assetId).last?.event == .finished)
                try fixture.assertPackageMatchesSource(try fixture.package.readManifest(), origin: origin)
            }
        }
    }

    @Test("SIGTERM-like shutdown stops running downloads as service_stopped; the next start continues them")
    func shutdownAndRestartContinues() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = OriginRequestLog()
        try await fixture.withServers(conditions: NetworkConditions(bandwidthBytesPerSecond: 150_000), log: log) { origin, keyServer in
            let first = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: Self.configuration())
            try await withService(first) { client in
                _ = try await client.submit(try await Self.request(fixture, origin, keyServer, asset: fixture.assetId))
                // Some segments whole (renamed into place), however loaded the machine is.
                func whole() -> Int {
                    let files = (try? fixture.package.readManifest().files) ?? []
                    return files.filter { FileManager.default.fileExists(atPath: (try? fixture.package.url(forRelativePath: $0.path).path) ?? "") }
                        .count
                }
                for _ in 0..<800 where whole() < 2 { try await Task.sleep(for: .milliseconds(25)) }
            }
            let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
            let stopped = try #require(try library.downloadRecord(assetId: fixture.assetId))
            await library.close()
            #expect(stopped.state == .paused)
            #expect(stopped.failureCode == "service_stopped")
            // The files in place when the service stopped (renamed from .part: whole), by their source path.
            let manifestBefore = try fixture.package.readManifest()
            let whole = manifestBefore.files.filter {
                FileManager.default.fileExists(atPath: (try? fixture.package.url(forRelativePath: $0.path).path) ?? "")
            }
            let wholeSources = Set(whole.map { String($0.sourceURL.dropFirst(origin.absoluteString.count)) })
            #expect(!wholeSources.isEmpty)
            let requestsBefore = log.entries.count

            let second = try DownloadService.open(dataDirectory: fixture.clientDirectory, configuration: Self.configuration())
            try await withService(second) { client in
                let updates = try await attach(client, fixture.assetId)
                #expect(updates.last?.event == .finished, "\(updates.map(\.event))")
            }
            let manifest = try fixture.package.readManifest()
            #expect(manifest.isComplete)
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            // No file that was whole when the service stopped was asked for again.
            let askedAgain = Set(log.entries.dropFirst(requestsBefore).map(\.path)).intersection(wholeSources)
            #expect(askedAgain.isEmpty, "fetched again: \(askedAgain.sorted())")
        }
    }
}
