import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP `CONNECT` proxy on 127.0.0.1 (an OS-assigned port), the kind AsyncHTTPClient speaks to for http and https
/// URLs alike: it reads `CONNECT HOST:PORT`, opens a TCP connection to the address its own host table gives `HOST`
/// (like a proxy's hosts file), answers `200`, and relays bytes both ways until either side closes. A host outside
/// the table gets `502`, so a host name that resolves nowhere else (`origin.stowage.test`) is reachable only through
/// this proxy. Every `CONNECT` target is recorded. Blocking sockets on threads of its own: test material only.
public final class ConnectProxy: Sendable {
    public let port: Int
    private let listener: Int32
    private let hosts: [String: String]
    private let state = Mutex(State())

    private struct State {
        var targets: [String] = []
        var sockets: Set<Int32> = []
        var stopped = false
    }

    /// `http://127.0.0.1:PORT`
    public var url: String { "http://127.0.0.1:\(port)" }

    /// The `HOST:PORT` of every `CONNECT` so far, in order (refused ones too).
    public var targets: [String] { state.withLock { $0.targets } }

    /// Listens at once. `hosts` maps host names to IPv4 addresses.
    public init(hosts: [String: String]) throws {
        (listener, port) = try LoopbackSockets.listen()
        self.hosts = hosts
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Stops accepting and ends every open tunnel (their threads close them).
    ///
    /// Sockets are shut down, never closed, here: the accept loop and the tunnel threads close their own once they
    /// return, so no thread can use a descriptor number that another socket of the process has taken since.
    public func stop() {
        state.withLock { state in
            state.stopped = true
            // Under the lock: a tunnel closes its sockets only after taking them out of the set under it.
            for socket in state.sockets { Glibc.shutdown(socket, Int32(SHUT_RDWR)) }
        }
        // Ends the accept loop's `accept`, which then closes the listener.
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
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
            Thread.detachNewThread { [self] in serve(client) }
        }
    }

    /// Records an open socket; false once stopped.
    private func track(_ socket: Int32) -> Bool {
        state.withLock { state in
            guard !state.stopped else { return false }
            state.sockets.insert(socket)
            return true
        }
    }

    private func forget(_ socket: Int32) {
        state.withLock { _ = $0.sockets.remove(socket) }
        close(socket)
    }

    private func serve(_ client: Int32) {
        defer { forget(client) }
        // The request head, up to its blank line (at most 16 KiB); nothing follows it before our answer.
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while head.count < 16 << 10, !head.ends(with: [13, 10, 13, 10]) {
            guard read(client, &byte, 1) == 1 else { return }
            head.append(byte)
        }
        let line = String(decoding: head, as: UTF8.self).split(separator: "\r\n").first.map(String.init) ?? ""
        let words = line.split(separator: " ")
        guard words.count == 3, words[0] == "CONNECT" else {
            send(client, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        let target = String(words[1])
        state.withLock { $0.targets.append(target) }
        guard let colon = target.lastIndex(of: ":"), let port = UInt16(target[target.index(after: colon)...]),
            let address = hosts[String(target[..<colon]).lowercased()], let upstream = LoopbackSockets.connect(to: address, port: port)
        else {
            send(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        guard track(upstream) else {
            close(upstream)
            return
        }
        defer { forget(upstream) }
        send(client, "HTTP/1.1 200 Connection established\r\n\r\n")
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            LoopbackSockets.relay(from: upstream, to: client)
            done.signal()
        }
        LoopbackSockets.relay(from: client, to: upstream)
        done.wait()
    }

    private func send(_ socket: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
