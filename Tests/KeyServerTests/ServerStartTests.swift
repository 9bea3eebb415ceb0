import Foundation
import KeyServer
import StowageCore
import StowageTestSupport
import Testing

/// A server that cannot start fails whoever waits for its address, with its own error, instead of leaving the wait
/// forever: a key server whose port another test had taken hung a whole CI run (docs/RELIABILITY.md, "A test that
/// never ends"). Every fixture and the demo start their servers through ``ListeningServer``.
struct ServerStartTests {
    @Test func aPortInUseFailsTheStartWithTheBindError() async throws {
        let fixture = try await KeyServerFixture.make()
        defer { fixture.remove() }
        let server = fixture.server
        let first = try await ListeningServer.start { onListening in try await server.run(port: 0, onListening: onListening) }
        defer { first.task.cancel() }
        let port = try first.listeningAddress().port
        // A second server on the same port: the bind fails before it listens.
        let failure = await #expect(throws: (any Error).self) {
            _ = try await ListeningServer.start { onListening in try await server.run(port: port, onListening: onListening) }
        }
        #expect("\(failure.map { "\($0)" } ?? "")".lowercased().contains("address already in use"), "\(String(describing: failure))")
        first.task.cancel()
        _ = try? await first.task.value
    }

    @Test func aServerThatReturnsBeforeListeningGivesNoAddress() async throws {
        let started = try await ListeningServer<Int, Void>.start { _ in }
        #expect(started.address == nil)
        #expect(throws: ServerDidNotListen.self) { try started.listeningAddress() }
    }

    @Test func cancellingTheWaitStopsTheServer() async throws {
        // A server that never listens and runs until cancelled: cancelling the caller ends both.
        let waiting = Task {
            try await ListeningServer<Int, Void>.start { _ in
                while !Task.isCancelled { try await Task.sleep(for: .milliseconds(10)) }
                throw CancellationError()
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
    }
}
