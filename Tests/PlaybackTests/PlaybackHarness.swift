import AsyncHTTPClient
import Foundation
import KeyDelivery
import KeyServer
import NIOCore
import NIOHTTP1
import OfflinePackage
import PackageTestSupport
import Packaging
import Playback
import StowageCore
import StowageTestSupport
import Testing

/// A package the HTTP and real-player tests serve: a clear fixture, how it is encrypted, and its key rotation.
struct PackageCase: Sendable, CustomTestStringConvertible {
    var fixture: String
    var method: ContentPackager.Method
    var rotationPeriod: Int?

    var clear: URL { TestPackages.mediaFixture(fixture) }
    var isTransportStream: Bool { fixture.hasPrefix("ts-") }
    var testDescription: String { "\(fixture) \(method.rawValue)\(rotationPeriod.map { " rotating every \($0)" } ?? "")" }

    /// The package, as asset `movie`, in a new folder under `root`.
    func make(in root: URL) async throws -> TestPackage {
        try await TestPackages.make(clearPlaylist: clear, method: method, assetId: "movie", in: root, rotationPeriod: rotationPeriod)
    }
}

/// Packages, gates and running playback servers for the tests, each in its own temporary folder.
enum PlaybackHarness {
    static func temporaryRoot() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("playback-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        return root
    }

    static func gate(_ package: TestPackage, fileCheck: PlaybackGate.FileCheck = .sizes) -> PlaybackGate {
        PlaybackGate(dataDirectory: package.dataDirectory, store: package.store, device: package.device, clock: package.clock, fileCheck: fileCheck)
    }

    /// Authorizes `package`, runs a playback server on 127.0.0.1 while `body` runs with its address, stops it.
    /// - Returns: the body's result and how the session ended.
    static func withSession<Result: Sendable>(
        _ package: TestPackage,
        gate: PlaybackGate? = nil,
        configuration: PlaybackServer.Configuration = .init(),
        _ body: @Sendable (PlaybackServer.Address) async throws -> Result
    ) async throws -> (Result, PlaybackEnd) {
        let gate = gate ?? Self.gate(package)
        let authorization = try gate.authorize(assetId: package.manifest.assetId)
        let server = try PlaybackServer(authorization: authorization, gate: gate, configuration: configuration)
        let started = try await ListeningServer.start { onListening in try await server.run(onListening: onListening) }
        let task = started.task
        let address = try started.listeningAddress()
        let result: Swift.Result<Result, any Error>
        do {
            result = .success(try await body(address))
        } catch {
            result = .failure(error)
        }
        task.cancel()
        let end = try await task.value
        return (try result.get(), end)
    }

    /// GETs `url` with a fresh client: the status and the whole body (nil when the body was cut short).
    static func get(_ url: URL) async throws -> (status: Int, body: [UInt8]?) {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let outcome: Swift.Result<(Int, [UInt8]?), any Error>
        do {
            let response = try await http.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(20))
            let status = Int(response.status.code)
            let body = try? await response.body.collect(upTo: 64 << 20)
            outcome = .success((status, body.map { Array($0.readableBytesView) }))
        } catch {
            outcome = .failure(error)
        }
        try await http.shutdown()
        return try outcome.get()
    }

    /// The lines of a package log.
    static func logLines(_ url: URL) -> [String] {
        guard let data = FileManager.default.contents(atPath: url.path) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    }
}

/// ffmpeg as the player: decodes the input and hashes every decoded frame (`-f framemd5`), without blocking a
/// concurrency thread (the server under test shares them).
enum DecodedFrames {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// - Parameters:
    ///   - input: a URL (the session's) or a local playlist (the clear source).
    ///   - map: ffmpeg's `-map`, e.g. `0:v:0`, `0:a:m:language:fr`.
    static func of(_ input: URL, map: String) async throws -> [String] {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("framemd5-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: output) }
        let result = try await ProcessRunner.run(
            program: "ffmpeg",
            [
                "-nostdin", "-v", "error", "-xerror", "-allowed_extensions", "ALL",
                "-i", input.isFileURL ? input.path : input.absoluteString,
                "-map", map, "-f", "framemd5", "-y", output.path,
            ]
        )
        guard result.status == 0 else {
            let message = String(decoding: result.standardError, as: UTF8.self)
            throw Failure(description: "ffmpeg exited with \(result.status) on \(input.absoluteString) (map \(map)): \(message)")
        }
        let text = try String(contentsOf: output, encoding: .utf8)
        return text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
    }
}
