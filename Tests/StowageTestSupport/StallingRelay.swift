import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay on 127.0.0.1 (an OS-assigned port) to a port on 127.0.0.1 that can be made slow: while ``stall()`` is
/// in force, what the upstream sends is held, not dropped, and delivered after ``resume()``. A database that answers
/// late rather than not at all. ``redirect(to:)`` sends new connections to another port: a server that restarts
/// elsewhere keeps the address its clients know, without binding again a port just let go. Blocking sockets on threads
/// of its own: test material only.
public final class StallingRelay: Sendable {
    public var port: Int { listener.port }
    private let listener: LoopbackListener
    private let state: Mutex<State>

    private struct State {
        var upstreamPort: Int
        var stalled = false
        var stopped = false
    }

    /// Listens at once, relaying each connection to `127.0.0.1:upstreamPort`.
    public init(upstreamPort: Int) throws {
        listener = try LoopbackListener()
        state = Mutex(State(upstreamPort: upstreamPort))
        listener.start { [self] client in relay(client) }
    }

    /// Relays the connections made from now on to `127.0.0.1:upstreamPort`; open ones stay where they are.
    public func redirect(to upstreamPort: Int) { state.withLock { $0.upstreamPort = upstreamPort } }

    /// Holds what the upstream sends from now on, until ``resume()``.
    public func stall() { state.withLock { $0.stalled = true } }

    /// Delivers what was held, and relays again as it comes.
    public func resume() { state.withLock { $0.stalled = false } }

    /// Stops accepting and ends every relayed connection (their threads close them: ``LoopbackListener``).
    public func stop() {
        state.withLock { state in
            state.stopped = true
            state.stalled = false
        }
        listener.stop()
    }

    /// Connects `client` (tracked by the listener) to the upstream and relays both ways, each on a thread of its own.
    private func relay(_ client: Int32) {
        let upstreamPort = state.withLock { $0.upstreamPort }
        guard let upstream = UInt16(exactly: upstreamPort).flatMap({ LoopbackSockets.connect(to: "127.0.0.1", port: $0) }) else {
            listener.release(client)
            return
        }
        guard listener.track(upstream) else {
            close(upstream)
            listener.release(client)
            return
        }
        let finished = Mutex(0)
        let done: @Sendable () -> Void = { [self] in
            // The second direction to end closes both sockets.
            guard
                finished.withLock({ count in
                    count += 1
                    return count == 2
                })
            else { return }
            listener.release(client)
            listener.release(upstream)
        }
        Thread.detachNewThread { [self] in
            relay(from: client, to: upstream, holding: false)
            done()
        }
        Thread.detachNewThread { [self] in
            relay(from: upstream, to: client, holding: true)
            done()
        }
    }

    /// Copies until `source` ends; bytes from the upstream (`holding`) wait while the relay is stalled.
    private func relay(from source: Int32, to destination: Int32, holding: Bool) {
        LoopbackSockets.relay(from: source, to: destination) {
            // Bounded by the test: every test that stalls resumes or stops the relay.
            while holding, state.withLock({ $0.stalled && !$0.stopped }) { usleep(5_000) }
        }
    }
}
