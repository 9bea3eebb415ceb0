public import Foundation
import KeyServer
import OriginServer
import Packaging
public import StowageCore
import StowageLibrary

/// An embedded key server and origin on 127.0.0.1, serving a clear HLS fixture packaged with SAMPLE-AES and fresh skd
/// keys: everything `stowage demo` (and the example program) needs to download, verify and play a protected asset
/// without anything outside this machine.
///
/// ```swift
/// let environment = try await DemoEnvironment.start(fixture: fixture, in: work)
/// let request = DownloadRequest(url: environment.masterURL.absoluteString, assetId: environment.assetId,
///                               token: try await environment.token())
/// // ... OfflineLibrary.download(request) ...
/// await environment.stop()
/// ```
public final class DemoEnvironment: Sendable {
    /// The packaged asset's multivariant playlist on the origin (it advertises the key server on the same host).
    public let masterURL: URL
    /// The key server's base URL.
    public let keyServerURL: URL
    /// The packaged asset's ID (its skd key URIs name it).
    public let assetId: String
    /// What the packager wrote, rendition by rendition.
    public let renditions: [DemoRendition]
    /// The content key IDs registered with the key server (the keys themselves exist nowhere else).
    public let keyIDs: [String]
    private let keyServerDirectory: KeyServerDataDirectory
    private let keyServer: Task<Void, any Error>
    private let origin: Task<Void, any Error>

    private init(
        masterURL: URL,
        keyServerURL: URL,
        assetId: String,
        renditions: [DemoRendition],
        keyIDs: [String],
        keyServerDirectory: KeyServerDataDirectory,
        keyServer: Task<Void, any Error>,
        origin: Task<Void, any Error>
    ) {
        self.masterURL = masterURL
        self.keyServerURL = keyServerURL
        self.assetId = assetId
        self.renditions = renditions
        self.keyIDs = keyIDs
        self.keyServerDirectory = keyServerDirectory
        self.keyServer = keyServer
        self.origin = origin
    }

    /// Starts the key server, packages `fixture` into an origin folder under `work`, and starts the origin.
    ///
    /// - Parameters:
    ///   - fixture: a clear multivariant (or media) playlist with its media beside it.
    ///   - work: a folder for the key server's data directory and the origin's files.
    ///   - assetId: the packaged asset's ID.
    ///   - profile: the origin's network profile (`NetworkConditions.profileNames`): `lan`, `wifi`, `3g`, ...
    ///   - clock: the key server's clock, seconds since 1970: the real time by default; the demo's simulated one, so
    ///     that the server and the device agree on the time when the demo moves it.
    /// - Throws: ``DemoError`` for an unknown profile; the key server's, packager's or origin's errors.
    public static func start(
        fixture: URL,
        in work: URL,
        assetId: String = "demo",
        profile: String = "wifi",
        clock: (@Sendable () -> Int64)? = nil
    ) async throws -> DemoEnvironment {
        guard let conditions = NetworkConditions.profile(named: profile) else {
            throw DemoError(
                .unknownProfile,
                "there is no network profile \"\(profile)\"; use one of \(NetworkConditions.profileNames.joined(separator: ", "))"
            )
        }
        let directory = try KeyServerDataDirectory.initialize(at: work.appendingPathComponent("keyserver").path)
        let serverClock = clock.map { now in KeyServerClock { Double(now()) } } ?? KeyServerClock { Date().timeIntervalSince1970 }
        let server = try await KeyServerApplication(dataDirectory: directory, clock: serverClock)
        // A server that cannot start throws its own error here rather than leaving the demo waiting for its address.
        let keyServer = try await ListeningServer.start { onListening in try await server.run(port: 0, onListening: onListening) }
        let keyTask = keyServer.task
        guard let keyAddress = keyServer.address else {
            throw DemoError(.keyServerNotStarted, "the embedded key server stopped before it listened")
        }
        do {
            let originRoot = work.appendingPathComponent("origin", isDirectory: true)
            let report = try await ContentPackager(
                assetID: assetId,
                method: .sampleAES,
                outputDirectory: originRoot.appendingPathComponent(assetId),
                rotationPeriod: nil,
                keyServerURL: keyAddress.baseURL.absoluteString,
                registrar: KeyRegistrar(directory.register)
            ).package(playlistAt: fixture)
            let origin = Origin(configuration: .init(root: originRoot.path, conditions: conditions, seed: 1))
            let originServer = try await ListeningServer.start { onListening in try await origin.run(onListening: onListening) }
            let originTask = originServer.task
            guard let originAddress = originServer.address else {
                throw DemoError(.originNotStarted, "the embedded origin stopped before it listened")
            }
            return DemoEnvironment(
                masterURL: originAddress.baseURL.appendingPathComponent("\(assetId)/\(fixture.lastPathComponent)"),
                keyServerURL: keyAddress.baseURL,
                assetId: assetId,
                renditions: report.renditions.map {
                    DemoRendition(playlist: $0.playlist, container: $0.container, segments: $0.segments, isEncrypted: !$0.keyIDs.isEmpty)
                },
                keyIDs: report.keyIDs,
                keyServerDirectory: directory,
                keyServer: keyTask,
                origin: originTask
            )
        } catch {
            keyTask.cancel()
            _ = try? await keyTask.value
            throw error
        }
    }

    /// An entitlement token for the asset, as the service that sells it would mint.
    public func token(ttl: Int64 = 3600) async throws -> String {
        try await keyServerDirectory.makeToken(subject: "demo-user", assets: [assetId], ttl: ttl)
    }

    /// Stops both servers gracefully.
    public func stop() async {
        keyServer.cancel()
        origin.cancel()
        _ = try? await keyServer.value
        _ = try? await origin.value
    }

    /// `--fixture`'s path when given and present, else `Fixtures/demo/master.m3u8` under the working directory or a
    /// folder above the running executable (so the demo runs from the repository and from `.build`).
    public static func locateFixture(_ given: String?) -> URL? {
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

/// One rendition of the packaged demo asset.
public struct DemoRendition: Sendable, Hashable {
    /// Its media playlist, relative to the master.
    public var playlist: String
    /// `ts`, `fmp4` or `clear` (WebVTT).
    public var container: String
    public var segments: Int
    public var isEncrypted: Bool
}

/// A step of the demo that did not turn out as it should.
public struct DemoError: StowageError {
    public let code: ErrorCode
    public let message: String

    init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
