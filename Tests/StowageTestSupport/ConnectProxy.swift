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
    public var port: Int { listener.port }
    private let listener: LoopbackListener
    private let hosts: [String: String]
    /// The `HOST:PORT` of every `CONNECT`.
    private let recorded = Mutex<[String]>([])

    /// `http://127.0.0.1:PORT`
    public var url: String { "http://127.0.0.1:\(port)" }

    /// The `HOST:PORT` of every `CONNECT` so far, in order (refused ones too).
    public var targets: [String] { recorded.withLock { $0 } }

    /// Listens at once. `hosts` maps host names to IPv4 addresses.
    public init(hosts: [String: String]) throws {
        listener = try LoopbackListener()
        self.hosts = hosts
        listener.start { [self] client in Thread.detachNewThread { self.serve(client) } }
    }

    /// Stops accepting and ends every open tunnel (their threads close them: ``LoopbackListener``).
    public func stop() { listener.stop() }

    private func serve(_ client: Int32) {
        defer { listener.release(client) }
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
        recorded.withLock { $0.append(target) }
        guard let colon = target.lastIndex(of: ":"), let port = UInt16(target[target.index(after: colon)...]),
            let address = hosts[String(target[..<colon]).lowercased()], let upstream = LoopbackSockets.connect(to: address, port: port)
        else {
            send(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        guard listener.track(upstream) else {
            close(upstream)
            return
        }
        defer { listener.release(upstream) }
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
