import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Blocking TCP sockets on loopback for the test proxies and relays (``ConnectProxy``, ``StallingRelay``): test
/// material only.
enum LoopbackSockets {
    /// A socket listening on 127.0.0.1 at a port the OS chose, and that port.
    static func listen() throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound, Glibc.listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A connection to `address:port` (IPv4); nil when it cannot be made.
    static func connect(to address: String, port: UInt16) -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_addr.s_addr = inet_addr(address)
        socketAddress.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    /// Copies until `source` ends, then ends `destination`'s writing side. `beforeWrite` runs before each write (a
    /// relay that holds bytes back waits in it).
    static func relay(from source: Int32, to destination: Int32, beforeWrite: () -> Void = {}) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            beforeWrite()
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

/// A socket listening on 127.0.0.1 (an OS-assigned port) and the sockets of its connections, shared by the test relays
/// and servers (``ConnectProxy``, ``StallingRelay``, ``RawHTTPResponder``).
///
/// Nothing here uses a descriptor number that another socket of the process may have taken since: ``stop()`` only shuts
/// sockets down, under the lock that ``release(_:)`` takes before it closes one, and the accept loop closes the
/// listener itself once `accept` fails. (Closing the listener in `stop()` while the loop could still call `accept` on
/// that number, and shutting down sockets outside the lock, let a relay take another test's connection:
/// docs/RELIABILITY.md.)
final class LoopbackListener: Sendable {
    let port: Int
    private let listener: Int32
    private let state = Mutex(State())

    private struct State {
        var sockets: Set<Int32> = []
        var stopped = false
    }

    init() throws {
        (listener, port) = try LoopbackSockets.listen()
    }

    /// Accepts on a thread of its own until ``stop()``, handing each connection, once tracked, to `handle` on that
    /// thread (which starts its own threads for anything that blocks). Call once.
    func start(_ handle: @escaping @Sendable (Int32) -> Void) {
        Thread.detachNewThread { [self] in
            defer { close(listener) }
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else {
                    if errno == EINTR { continue }
                    return
                }
                guard track(client) else {
                    close(client)
                    return
                }
                handle(client)
            }
        }
    }

    /// Records a socket of a connection, so that ``stop()`` ends it; false once stopped (the caller closes it then).
    func track(_ socket: Int32) -> Bool {
        state.withLock { state in
            guard !state.stopped else { return false }
            state.sockets.insert(socket)
            return true
        }
    }

    /// Forgets a tracked socket and closes it: only its owner's thread, once done with it.
    func release(_ socket: Int32) {
        state.withLock { _ = $0.sockets.remove(socket) }
        close(socket)
    }

    /// Stops accepting and shuts every tracked socket down; their owners close them.
    func stop() {
        state.withLock { state in
            state.stopped = true
            for socket in state.sockets { Glibc.shutdown(socket, Int32(SHUT_RDWR)) }
        }
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
    }
}
