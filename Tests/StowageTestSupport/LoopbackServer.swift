public import Hummingbird
import Logging
import ServiceLifecycle

/// Runs `router` on 127.0.0.1 (an OS-assigned port) while `body` runs with that port, then shuts it down gracefully:
/// the small servers tests stand up to play another host (a redirector, a recording proxy, a key server that is not
/// one).
public func withLoopbackServer<T: Sendable>(
    _ router: Router<BasicRequestContext>,
    _ body: (Int) async throws -> T
) async throws -> T {
    var logger = Logger(label: "loopback-test-server")
    logger.logLevel = .warning
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let app = Application(
        router: router,
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) },
        logger: logger
    )
    let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
    let runner = Task {
        // Finished however the server ends, so a server that cannot bind fails the wait below instead of hanging it.
        defer { continuation.finish() }
        try await group.run()
    }
    var iterator = ports.makeAsyncIterator()
    guard let port = await iterator.next() else {
        try await runner.value
        throw ServerDidNotListen()
    }
    let result: Result<T, any Error>
    do {
        result = .success(try await body(port))
    } catch {
        result = .failure(error)
    }
    await group.triggerGracefulShutdown()
    _ = try? await runner.value
    return try result.get()
}
