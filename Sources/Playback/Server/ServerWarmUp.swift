import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One request the playback server sends itself before it gives the player the URL.
///
/// The first request a process serves costs about 8 ms more than the next (measured on the release build: a 404 on a
/// fresh connection took 8.6 ms as the first request and 1 ms after it). That is the runtime doing first-use work
/// (generic metadata and protocol conformances of the HTTP pipeline), and it made the multivariant playlist's time to
/// first byte 16 ms against nginx's 1 ms. Done here, the player's first request finds it done.
enum ServerWarmUp {
    /// Sends `GET path` to `host:port` (IPv4) and reads the answer to its end, at most 2 s, on a thread of its own so
    /// that no cooperative thread waits for an answer that needs one. Failures are ignored: the server serves anyway.
    static func request(host: String, port: Int, path: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                send(host: host, port: port, path: path)
                continuation.resume()
            }
        }
    }

    private static func send(host: String, port: Int, path: String) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1, let port = UInt16(exactly: port) else { return }
        address.sin_port = port.bigEndian
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return }
        // Two requests on one connection, as a player sends them (keep-alive), the second closing it.
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\n\r\nGET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        let sent = request.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == request.count else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        // Until the server closes (Connection: close), a timeout or an error; a 404 is a few hundred bytes.
        for _ in 0..<64 {
            let got = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if got < 0, errno == EINTR { continue }
            if got <= 0 { break }
        }
    }
}
