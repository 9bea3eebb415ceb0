import Foundation
import StowageCore
import Synchronization
import Testing

@testable import KeyServer

/// A PostgreSQL operation answers within its time limit even when what it waits for ignores cancellation (a connection
/// lease queued on a pool whose client stopped, a query in flight). Before, the limit was a task group, which waits for
/// every child: such an operation hung a key server request, and once the whole test suite.
@Suite("PostgreSQL operations end within their time limit")
struct OperationTimeLimitTests {
    /// Resumed by the test, never by cancellation.
    final class Gate: Sendable {
        private let waiting = Mutex<CheckedContinuation<Void, Never>?>(nil)
        private let opened = Mutex(false)

        func wait() async {
            await withCheckedContinuation { continuation in
                let now = opened.withLock { $0 }
                if now { continuation.resume() } else { waiting.withLock { $0 = continuation } }
            }
        }

        func open() {
            opened.withLock { $0 = true }
            waiting.withLock { slot in
                slot?.resume()
                slot = nil
            }
        }
    }

    final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    @Test(.timeLimit(.minutes(1)))
    func anOperationThatIgnoresCancellationIsAnsweredAtItsLimit() async throws {
        // Nothing listens on port 1; the body below never touches the database anyway.
        let store = try PostgresKeyServerStore(url: "postgres://stowage@127.0.0.1:1/none?sslmode=disable", operationTimeout: .milliseconds(300))
        let gate = Gate()
        let finished = Flag()
        let error = await #expect(throws: KeyServerSetupError.self) {
            try await store.reachable {
                await gate.wait()
                finished.set()
                return 1
            }
        }
        #expect(error?.code == "database_unavailable")
        #expect(error?.message.contains("no answer within") == true, "\(error?.message ?? "")")
        // The operation was answered while its body still waited: the body ends only now.
        let bodyEnded = finished.isSet
        #expect(!bodyEnded)
        gate.open()
        await store.close()
    }

    @Test func theFirstAnswerWinsAndAFastOneIsNotDelayed() async throws {
        let store = try PostgresKeyServerStore(url: "postgres://stowage@127.0.0.1:1/none?sslmode=disable", operationTimeout: .seconds(30))
        #expect(try await store.reachable { 42 } == 42)
        let thrown = await #expect(throws: KeyServerSetupError.self) {
            try await store.reachable { () async throws -> Int in throw KeyServerSetupError.databaseUnavailable("x", reason: "test") }
        }
        #expect(thrown?.message.contains("test") == true)
        await store.close()
    }
}
