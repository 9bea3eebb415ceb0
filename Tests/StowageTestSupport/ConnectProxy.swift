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
        guard bound, listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        self.hosts = hosts
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Stops accepting and closes every open tunnel.
    public func stop() {
        let open = state.withLock { state in
            state.stopped = true
            return state.sockets
        }
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for socket in open { Glibc.shutdown(socket, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
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
            let address = hosts[String(target[..<colon]).lowercased()], let upstream = connect(to: address, port: port)
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
            Self.relay(from: upstream, to: client)
            done.signal()
        }
        Self.relay(from: client, to: upstream)
        done.wait()
    }

    /// Copies until `source` ends, then ends `destination`'s writing side.
    private static func relay(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
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

    private func connect(to address: String, port: UInt16) -> Int32? {
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

    private func send(_ socket: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
