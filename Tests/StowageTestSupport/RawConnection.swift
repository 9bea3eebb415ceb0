import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to a loopback server, byte by byte, for what no HTTP client does: a client that connects
/// and says nothing, or sends its request one byte every few seconds (a slowloris).
public final class RawConnection: @unchecked Sendable {
    private let descriptor: Int32
    private let lock = NSLock()
    private var closed = false

    /// Connects to 127.0.0.1:`port` on a thread of its own: `connect` blocks while the server's listen backlog is
    /// full, and blocking the cooperative pool (two threads here) would stall the servers under test with it.
    ///
    /// The connections are handed over under a lock, not only through the continuation: ThreadSanitizer does not see
    /// a continuation resumed on a Foundation thread as ordering that thread's writes (each connection's descriptor)
    /// before the task's reads, and reported a data race (`scripts/sanitize.sh thread`, 2026-11-27).
    public static func open(port: Int, count: Int = 1) async throws -> [RawConnection] {
        final class Handover: @unchecked Sendable {
            let lock = NSLock()
            var opened: Result<[RawConnection], any Error> = .success([])
        }
        let handover = Handover()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                let result = Result { try (0..<count).map { _ in try RawConnection(port: port) } }
                handover.lock.withLock { handover.opened = result }
                continuation.resume()
            }.start()
        }
        return try handover.lock.withLock { handover.opened }.get()
    }

    /// Connects to 127.0.0.1:`port`, blocking until the server's listen backlog takes the connection.
    public init(port: Int) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            let code = errno
            Glibc.close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .ECONNREFUSED)
        }
        self.descriptor = descriptor
    }

    deinit { close() }

    /// Sends `bytes`; false when the server has closed the connection (or reset it).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var sent = 0
            while sent < buffer.count {
                let n = Glibc.send(descriptor, buffer.baseAddress! + sent, buffer.count - sent, Int32(MSG_NOSIGNAL))
                if n <= 0 { return false }
                sent += n
            }
            return true
        }
    }

    /// Sends `text` as UTF-8.
    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Whether the server closed the connection within `timeout`: reads (and drops) whatever it sends until end of
    /// file, a reset, or the time is up. Never blocks a thread: the test's servers share the cooperative pool.
    public func closedByServer(within timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        // At least one look, even when the time is already up: a connection closed earlier reads end of file at once.
        while await readable(before: deadline) {
            let n = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { return true }
        }
        return false
    }

    /// Whether something can be read (data, end of file or an error) before `deadline`; looks at least once.
    private func readable(before deadline: ContinuousClock.Instant) async -> Bool {
        repeat {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, 0) > 0 { return true }
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(5))
        } while true
    }

    /// Reads until `marker` appears in what the server sent, or `timeout`; what was read.
    public func read(until marker: String, within timeout: Duration) async -> String {
        let deadline = ContinuousClock.now + timeout
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: received, as: UTF8.self).contains(marker), await readable(before: deadline) {
            let n = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { break }
            if n > 0 { received += buffer[0..<n] }
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// One HTTP response: what arrives until the head and a Content-Length body are in, the peer closes, 10 s pass, or
    /// 64 KiB.
    public func receive() async -> String {
        let deadline = ContinuousClock.now + .seconds(10)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while received.count < 65_536, await readable(before: deadline) {
            let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { break }
            guard count > 0 else { continue }
            received += buffer[0..<count]
            let text = String(decoding: received, as: UTF8.self)
            if let split = text.range(of: "\r\n\r\n"),
                let length = text[..<split.lowerBound].components(separatedBy: "\r\n").first(where: { $0.lowercased().hasPrefix("content-length:") })
                    .flatMap({ Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }),
                text.utf8.count - text[..<split.upperBound].utf8.count >= length
            {
                break
            }
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// The bytes the server sends until at least `count` are in, it closes, or `timeout` passes.
    public func read(atLeast count: Int, within timeout: Duration) async -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while received.count < count, await readable(before: deadline) {
            let n = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { break }
            if n > 0 { received += buffer[0..<n] }
        }
        return received
    }

    /// How many bytes the server sends until it closes the connection (or `timeout` passes), dropping them.
    public func drain(within timeout: Duration) async -> Int {
        let deadline = ContinuousClock.now + timeout
        var total = 0
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while await readable(before: deadline) {
            let n = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { break }
            if n > 0 { total += n }
        }
        return total
    }

    /// Ends the connection both ways without closing its descriptor: a send or read blocked on it, or to come, fails.
    public func shutdown() {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return }
        Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Closes the connection (once).
    public func close() {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return }
        closed = true
        Glibc.close(descriptor)
    }
}

/// What hostile clients do to a server at `port`, and what a normal client gets meanwhile: `idle` connections that
/// say nothing, one slowloris sending a request head one byte every `drip`, and then a normal request on a fresh
/// connection, which must answer within `prompt`.
public struct HostileClients: Sendable {
    public var port: Int
    public var idle: Int
    public var drip: Duration

    public init(port: Int, idle: Int = 300, drip: Duration = .milliseconds(300)) {
        self.port = port
        self.idle = idle
        self.drip = drip
    }

    /// Outcome of ``run(normalRequest:headTimeout:)``.
    public struct Outcome: Sendable {
        /// Seconds the normal request took to be answered (its status line and headers), nil when it was not.
        public var normalAnswerSeconds: Double?
        /// The normal answer's status line.
        public var normalStatusLine: String
        /// Idle connections still open when the normal request had its answer: all of them when the server served it
        /// beside them, instead of after freeing their slots.
        public var idleOpenWhenAnswered: Int
        /// Idle connections the server had closed by the end.
        public var idleClosed: Int
        /// Seconds after which the slowloris found its connection closed, nil when it never was.
        public var slowlorisClosedAfter: Double?
    }

    /// Opens the idle connections and the slowloris, and sends `normalRequest` on a new connection (its answer is
    /// awaited for up to 60 s). With `closing`, then waits until the server has closed the idle connections and the
    /// slowloris, for at most that long; without it, stops there (the server's deadline is out of the test's reach).
    ///
    /// No bound here is a speed target: the whole suite loads the machine, so the bounds only end a test whose
    /// server never answers or never closes.
    public func run(normalRequest: String, closing: Duration?) async throws -> Outcome {
        let idlers = try await RawConnection.open(port: port, count: idle)
        defer { for idler in idlers { idler.close() } }
        let slow = try await RawConnection.open(port: port)[0]
        defer { slow.close() }
        let began = ContinuousClock.now
        let drip = self.drip
        let bound = closing ?? .seconds(60)
        let loris = Task.detached { () -> Double? in
            // A head that never ends: one byte at a time until the server closes, the bound, or cancellation.
            let bytes = Array("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 100_000)
            for byte in bytes {
                if !slow.send([byte]) { break }
                if Task.isCancelled || ContinuousClock.now - began > bound { return nil }
                try? await Task.sleep(for: drip)
            }
            let elapsed = ContinuousClock.now - began
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        defer { loris.cancel() }
        try await Task.sleep(for: .milliseconds(200))
        let asked = ContinuousClock.now
        let normal = try await RawConnection.open(port: port)[0]
        defer { normal.close() }
        normal.send(normalRequest)
        let answer = await normal.read(until: "\r\n\r\n", within: .seconds(60))
        let took = ContinuousClock.now - asked
        let answered = answer.contains("\r\n\r\n")
        var idleOpen = 0
        for idler in idlers where await !idler.closedByServer(within: .zero) { idleOpen += 1 }
        var idleClosed = 0
        var slowClosed: Double?
        if let closing {
            slowClosed = await loris.value
            for idler in idlers where await idler.closedByServer(within: closing - (ContinuousClock.now - began)) {
                idleClosed += 1
            }
        }
        return Outcome(
            normalAnswerSeconds: answered ? Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18 : nil,
            normalStatusLine: answer.components(separatedBy: "\r\n").first ?? "",
            idleOpenWhenAnswered: idleOpen,
            idleClosed: idleClosed,
            slowlorisClosedAfter: slowClosed
        )
    }
}

extension HostileClients {
    /// Sends a request head of about `size` bytes (one header that long) on one connection, then `normalRequest` on a
    /// fresh one; the status line of each answer ("" when none came within 20 s).
    ///
    /// The oversized head goes out from a thread of its own: a server that stops reading could otherwise hold a
    /// cooperative thread in `send`. `size` stays within what loopback's socket buffers take, so it is sent whole.
    public static func oversizedHead(
        port: Int,
        path: String,
        size: Int = 128 << 10,
        normalRequest: String
    ) async throws -> (
        oversized: String, normal: String
    ) {
        let connection = try RawConnection(port: port)
        let head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + String(repeating: "a", count: size) + "\r\n\r\n"
        let (sent, sending) = AsyncStream.makeStream(of: Void.self)
        Thread.detachNewThread {
            _ = connection.send(head)
            sending.finish()
        }
        let oversized = await connection.read(until: "\r\n", within: .seconds(20))
        // The sender is done (a shut-down socket fails its send at once) before the descriptor is closed, so that no
        // send of it can reach a number another socket has taken since.
        connection.shutdown()
        for await _ in sent {}
        connection.close()
        let normal = try RawConnection(port: port)
        defer { normal.close() }
        _ = normal.send(normalRequest)
        let answer = await normal.read(until: "\r\n", within: .seconds(20))
        func statusLine(_ text: String) -> String { text.components(separatedBy: "\r\n").first ?? "" }
        return (statusLine(oversized), statusLine(answer))
    }
}
