import AssetDownload
import AsyncHTTPClient
import Foundation
import OriginServer
import StowageCore
import StowageTestSupport
import Testing

/// Paths and helpers shared by the end-to-end tests.
enum TestSupport {
    /// The repository root, from this file's location.
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let fixtures = repositoryRoot.appendingPathComponent("Fixtures")

    /// The `stowage` binary built beside the test bundle (or `$STOWAGE_BIN`).
    static var stowageBinary: URL {
        get throws { try StowageExecutable.url() }
    }

    static func temporaryDirectory(_ label: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A file of this user's, mode 0600, holding `hex` (a content key as `--key-file` takes it; keys never go on a
    /// command line), in a temporary folder of its own; its path.
    static func keyFile(_ hex: String) throws -> String {
        let url = try temporaryDirectory("key").appendingPathComponent("content.key")
        try Data(hex.utf8).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        return url.path
    }

    /// Runs an origin for the duration of `body`, then stops it.
    static func withOrigin<T: Sendable>(
        root: URL,
        _ body: @Sendable (URL) async throws -> T
    ) async throws -> T {
        let origin = Origin(configuration: .init(root: root.path))
        let started = try await ListeningServer.start { onListening in try await origin.run(onListening: onListening) }
        let server = started.task
        defer { server.cancel() }
        let address = try started.listeningAddress()
        #expect(address.port > 0)
        let result = try await body(address.baseURL)
        server.cancel()
        _ = try? await server.value
        return result
    }

    /// Inspects a playlist with a client of its own, shut down before returning.
    static func inspect(_ location: String, deep: Bool) async throws -> PlaylistInspection {
        let client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(redirectConfiguration: .follow(max: 3, allowCycles: false))
        )
        let result: Result<PlaylistInspection, PlaylistLoadError>
        do throws(PlaylistLoadError) {
            result = .success(try await PlaylistLoader(client: client).inspect(location, deep: deep))
        } catch {
            result = .failure(error)
        }
        try await client.shutdown()
        return try result.get()
    }

    /// The output and exit status of a finished process.
    struct ProcessResult {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    /// Runs `stowage` with arguments to completion (bounded by `timeout`), awaiting it without blocking a thread.
    static func runStowage(_ arguments: [String], timeout: Duration = .seconds(60)) async throws -> ProcessResult {
        let result = try await ProcessRunner.run(try stowageBinary, arguments, timeout: timeout)
        return ProcessResult(
            status: result.status,
            standardOutput: String(decoding: result.standardOutput, as: UTF8.self),
            standardError: String(decoding: result.standardError, as: UTF8.self)
        )
    }
}
