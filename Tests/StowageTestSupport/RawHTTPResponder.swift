import Foundation
import StowageCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A server on 127.0.0.1 (an OS-assigned port) that answers every request with a fixed head and then bytes without
/// end: what a hostile segment server does (a `Content-Length` no file has, or a body that never stops). It writes
/// until the client closes the connection or `budget` bytes have gone out, whichever is first. Blocking sockets on
/// threads of its own: test material only.
public final class RawHTTPResponder: Sendable {
    public var port: Int { listener.port }
    private let listener: LoopbackListener
    private let head: [UInt8]
    private let budget: Int
    private let pace: Duration?
    private let counts = Mutex<(requests: Int, bytesSent: Int)>((0, 0))

    /// - Parameters:
    ///   - head: the status line and headers, each line ending in CRLF, without the blank line that ends the head.
    ///   - budget: the most body bytes sent on one connection.
    ///   - pace: when given, the body goes one byte at a time, this long apart (a server trickling its answer).
    public init(head: String, budget: Int = 1 << 30, pace: Duration? = nil) throws {
        listener = try LoopbackListener()
        self.head = Array((head + "\r\n").utf8)
        self.budget = budget
        self.pace = pace
        listener.start { [self] client in
            counts.withLock { $0.requests += 1 }
            Thread.detachNewThread {
                self.answer(client)
                self.listener.release(client)
            }
        }
    }

    /// The connections answered so far.
    public var requests: Int { counts.withLock { $0.requests } }
    /// The body bytes written so far, on every connection (what the clients' sockets took).
    public var bytesSent: Int { counts.withLock { $0.bytesSent } }

    /// Stops accepting and ends every connection (their threads close them: ``LoopbackListener``).
    public func stop() { listener.stop() }

    private func answer(_ client: Int32) {
        // The request head, up to its blank line (at most 16 KiB).
        var received: [UInt8] = []
        var byte: UInt8 = 0
        while received.count < 16 << 10, !(received.count >= 4 && Array(received.suffix(4)) == [13, 10, 13, 10]) {
            guard read(client, &byte, 1) == 1 else { return }
            received.append(byte)
        }
        var withBlankLine = head
        withBlankLine += [13, 10]
        guard writeAll(client, withBlankLine) else { return }
        let chunk = [UInt8](repeating: 0x47, count: pace == nil ? 64 << 10 : 1)
        var sent = 0
        while sent < budget {
            if let pace { Thread.sleep(forTimeInterval: pace.inSeconds) }
            let count = min(chunk.count, budget - sent)
            guard writeAll(client, Array(chunk[0..<count])) else { return }
            sent += count
            counts.withLock { $0.bytesSent += count }
        }
    }

    private func writeAll(_ socket: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
