import Foundation
import Hummingbird
import Logging
import NIOCore
import OfflinePackage
import StowageCore
import StowageService
import StowageTestSupport
import Testing

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
        let server = Task { try await app.run() }
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
