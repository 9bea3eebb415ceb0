import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay on 127.0.0.1 (an OS-assigned port) to a port on 127.0.0.1 that can be made slow: while ``stall()`` is
/// in force, what the upstream sends is held, not dropped, and delivered after ``resume()``. A database that answers
/// late rather than not at all. Blocking sockets on threads of its own: test material only.
public final class StallingRelay: Sendable {
    public let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private let state = Mutex(State())

    private struct State {
        var stalled = false
        var sockets: Set<Int32> = []
        var stopped = false
    }

    /// Listens at once, relaying each connection to `127.0.0.1:upstreamPort`.
    public init(upstreamPort: Int) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound, listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        self.upstreamPort = upstreamPort
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Holds what the upstream sends from now on, until ``resume()``.
    public func stall() { state.withLock { $0.stalled = true } }

    /// Delivers what was held, and relays again as it comes.
    public func resume() { state.withLock { $0.stalled = false } }

    /// Stops accepting and closes every relayed connection.
    public func stop() {
        let open = state.withLock { state in
            state.stopped = true
            state.stalled = false
            return state.sockets
        }
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for socket in open { Glibc.shutdown(socket, Int32(SHUT_RDWR)) }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: upstreamPort)
            let connected =
                upstream >= 0
                && withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                    }
                }
            let admitted =
                connected
                && state.withLock { state in
                    guard !state.stopped else { return false }
                    state.sockets.formUnion([client, upstream])
                    return true
                }
            guard admitted else {
                close(client)
                if upstream >= 0 { close(upstream) }
                continue
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
                state.withLock { $0.sockets.subtract([client, upstream]) }
                close(client)
                close(upstream)
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
    }

    /// Copies until `source` ends; bytes from the upstream (`holding`) wait while the relay is stalled.
    private func relay(from source: Int32, to destination: Int32, holding: Bool) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            // Bounded by the test: every test that stalls resumes or stops the relay.
            while holding, state.withLock({ $0.stalled && !$0.stopped }) { usleep(5_000) }
            var written = 0
            while written < count {
                let step = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + written, count - written) }
                guard step > 0 else { break copying }
                written += step
            }
        }
        Glibc.shutdown(destination, Int32(SHUT_WR))
        Glibc.shutdown(source, Int32(SHUT_RD))
    }
}
