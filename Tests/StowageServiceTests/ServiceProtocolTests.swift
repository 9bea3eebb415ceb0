import Foundation
import Hummingbird
import Logging
import NIOCore
import OfflinePackage
import StowageCore
import StowageService
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Something other than this Stowage's download service answering on the service's socket (another version, or a
/// service that breaks): every answer it cannot read is `service_protocol_error`, naming the socket and the request,
/// through the library and through the command line alike.
struct ServiceProtocolTests {
    /// A server on the service socket of `dataDirectory` that answers its status as a service does (so the client
    /// takes it for the running service) and `GET /v1/assets` with `assets`, while `body` runs.
    static func withStrangeService<T: Sendable>(
        in dataDirectory: DataDirectory,
        assets: (status: HTTPResponse.Status, body: String),
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        let socket = ServiceEndpoint(dataDirectory: dataDirectory).socketURL.path
        try FileManager.default.createDirectory(
            at: URL(fileURLWithPath: socket).deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        let status =
            #"{"pid":1,"dataDirectory":"\#(dataDirectory.url.path)","startedAt":0,"maxDownloads":1,"keepFreeBytes":0,"downloads":[],"runs":[]}"#
        let router = Router()
        router.get("v1/status") { _, _ in Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: status))) }
        router.get("v1/assets") { _, _ in Response(status: assets.status, body: ResponseBody(byteBuffer: ByteBuffer(string: assets.body))) }
        var logger = Logger(label: "strange-service")
        logger.logLevel = .critical
        let (started, continuation) = AsyncStream.makeStream(of: Void.self)
        let app = Application(
            router: router,
            configuration: .init(address: .unixDomainSocket(path: socket)),
            onServerRunning: { _ in continuation.yield() },
            logger: logger
        )
        let server = Task {
            defer { continuation.finish() }
            try await app.run()
        }
        defer {
            server.cancel()
            try? FileManager.default.removeItem(atPath: socket)
        }
        var iterator = started.makeAsyncIterator()
        guard await iterator.next() != nil else { throw CancellationError() }
        return try await body()
    }

    @Test(
        "an answer this stowage cannot read (JSON of another shape, an error status with no Stowage error): service_protocol_error",
        arguments: [
            (HTTPResponse.Status.ok, #"{"items":[{"name":"movie"}]}"#, "bytes that are not the answer this stowage reads"),
            (HTTPResponse.Status.internalServerError, "Internal Server Error", "with HTTP 500 and no Stowage error"),
        ]
    )
    func unreadableAnswers(status: HTTPResponse.Status, answer: String, says: String) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("service-protocol-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let dataDirectory = DataDirectory(url: root)
        let socket = ServiceEndpoint(dataDirectory: dataDirectory).socketURL.path
        try await Self.withStrangeService(in: dataDirectory, assets: (status, answer)) {
            let client = try #require(await ServiceClient.connect(dataDirectory: dataDirectory), "the strange service was not taken for one")
            let error = await #expect(throws: ReportedError.self) { _ = try await client.assets() }
            await client.close()
            #expect(error?.code == "service_protocol_error")
            let message = error?.message ?? ""
            #expect(message.contains(socket) && message.contains("GET /v1/assets") && message.contains(says), "\(message)")

            // The command a user runs says the same, in the one error shape, and fails.
            var environment = ProcessInfo.processInfo.environment
            environment["STOWAGE_HOME"] = root.path
            let listed = try await ProcessRunner.run(
                try StowageExecutable.url(),
                ["list", "--json"],
                environment: environment,
                timeout: .seconds(60)
            )
            #expect(listed.status == 1)
            let printed = String(decoding: listed.standardOutput + listed.standardError, as: UTF8.self)
            #expect(printed.contains(#""code":"service_protocol_error""#), "\(printed)")
        }
    }
}

/// A command run in the moment a service starting up has bound its socket but does not listen on it yet.
struct ServiceStartingUpTests {
    @Test("a socket that refuses for a moment while the service holds its lock: the client asks again and gets the service")
    func refusedWhileStartingIsAskedAgain() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("service-starting-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let dataDirectory = DataDirectory(url: root)
        let endpoint = ServiceEndpoint(dataDirectory: dataDirectory)
        try FileManager.default.createDirectory(at: endpoint.socketURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        // The service's lock, `service.lock` in the data directory, held as a running service holds it.
        let (lock, _) = try AssetLock.tryAcquire(file: root.appendingPathComponent("service.lock"), name: "service", purpose: "the download service")
        let held = try #require(lock)
        defer { held.release() }
        // Bound, not listening: a connection is refused at once, as in the moment between a service's bind and listen.
        let bound = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(bound >= 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            endpoint.socketURL.path.utf8CString.withUnsafeBytes { raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(raw.count))) }
        }
        let didBind = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(bound, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
        try #require(didBind, "bind: \(errno)")
        // Half a second later the service is up: the bound socket goes, a server listens on the path.
        let connecting = Task { await ServiceClient.connect(dataDirectory: dataDirectory) }
        try await Task.sleep(for: .milliseconds(500))
        close(bound)
        try FileManager.default.removeItem(at: endpoint.socketURL)
        let answered = try await ServiceProtocolTests.withStrangeService(in: dataDirectory, assets: (.ok, "[]")) {
            let connected = try #require(await connecting.value, "no client: the socket was taken for one a killed service left")
            do {
                let empty = try await connected.assets().isEmpty
                await connected.close()
                return empty
            } catch {
                await connected.close()
                throw error
            }
        }
        #expect(answered, "the client took the starting service for one that does not answer")
    }
}
