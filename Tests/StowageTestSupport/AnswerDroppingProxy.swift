public import Foundation

/// A loopback HTTP/1.1 proxy (Python, a separate process) in front of a server, which forwards each request whole,
/// reads the server's whole answer, and for the first `drop` requests whose line starts with `dropPrefix` closes the
/// client's connection instead of passing the answer on: what a client sees when the server (or the network) dies
/// after the server acted. One upstream connection per request; answers must carry a Content-Length.
public final class AnswerDroppingProxy: Sendable {
    /// Where clients connect: `http://127.0.0.1:PORT`.
    public let url: URL
    private let process: RunningProcess

    static let script = #"""
        import socket, sys, threading
        host, port, prefix, drop = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), int(sys.argv[4])
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        print(server.getsockname()[1], flush=True)
        lock = threading.Lock()
        dropped = [0]

        def read_message(sock):
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return None
                data += chunk
            head, rest = data.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            while len(rest) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    return None
                rest += chunk
            return head + b"\r\n\r\n" + rest[:length]

        def serve(client):
            try:
                while True:
                    request = read_message(client)
                    if request is None:
                        return
                    upstream = socket.create_connection((host, port))
                    upstream.sendall(request)
                    answer = read_message(upstream)
                    upstream.close()
                    if answer is None:
                        return
                    if request.startswith(prefix):
                        with lock:
                            if dropped[0] < drop:
                                dropped[0] += 1
                                print("dropped", flush=True)
                                return
                    client.sendall(answer)
            finally:
                client.close()

        while True:
            connection, _ = server.accept()
            threading.Thread(target=serve, args=(connection,), daemon=True).start()
        """#

    private init(url: URL, process: RunningProcess) {
        self.url = url
        self.process = process
    }

    /// Starts the proxy in front of `upstream` (an `http://127.0.0.1:PORT` URL) and waits until it listens.
    public static func start(upstream: URL, dropPrefix: String, drop: Int) async throws -> AnswerDroppingProxy {
        guard let host = upstream.host, let port = upstream.port else { throw FrameHashes.Failure(description: "no host and port in \(upstream)") }
        let process = try ProcessRunner.start(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["python3", "-c", script, host, String(port), dropPrefix, String(drop)]
        )
        for _ in 0..<400 {
            let output = String(decoding: (try? process.standardOutput()) ?? Data(), as: UTF8.self)
            if let line = output.split(separator: "\n").first, let listening = Int(line) {
                return AnswerDroppingProxy(url: URL(string: "http://127.0.0.1:\(listening)")!, process: process)
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        process.kill()
        throw FrameHashes.Failure(
            description: "the proxy did not start: \(String(decoding: (try? process.standardError()) ?? Data(), as: UTF8.self))"
        )
    }

    /// How many answers it has dropped so far.
    public var dropped: Int {
        String(decoding: (try? process.standardOutput()) ?? Data(), as: UTF8.self).split(separator: "\n").filter { $0 == "dropped" }.count
    }

    /// Stops the proxy and waits for it.
    public func stop() async {
        process.kill()
        _ = try? await process.waitForExit(timeout: .seconds(10))
    }
}
