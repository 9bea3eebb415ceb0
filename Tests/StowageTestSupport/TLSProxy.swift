public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway certificate authority and a server certificate it signed for 127.0.0.1 and localhost, made with the
/// `openssl` command (test material only: made per test in a temporary directory, valid for two days, never committed).
public struct TestCertificateAuthority: Sendable {
    /// The CA's certificate (PEM): what a client is told to trust with `--ca-file`.
    public let caFile: String
    /// The server's certificate chain and key (PEM), for nginx.
    public let certificateFile: String
    public let keyFile: String

    /// Makes the CA and the server certificate in `directory`, the server's for `subjectAltName` (OpenSSL's syntax).
    public static func make(in directory: String, subjectAltName: String = "IP:127.0.0.1, DNS:localhost") async throws -> TestCertificateAuthority {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        func path(_ name: String) -> String { (directory as NSString).appendingPathComponent(name) }
        let extensions = path("server.ext")
        try "subjectAltName = \(subjectAltName)\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n"
            .write(toFile: extensions, atomically: true, encoding: .utf8)
        let steps: [[String]] = [
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("ca.key"), "-out", path("ca.pem"),
                "-days", "2", "-subj", "/CN=Stowage test CA (throwaway)",
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("server.key"), "-out", path("server.csr"),
                "-subj", "/CN=127.0.0.1",
            ],
            [
                "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"), "-CAcreateserial", "-days", "2",
                "-extfile", extensions, "-out", path("server.pem"),
            ],
        ]
        for arguments in steps {
            let result = try await ProcessRunner.run(program: "openssl", arguments, timeout: .seconds(60))
            guard result.status == 0 else {
                throw FrameHashes.Failure(description: "openssl \(arguments[0]) failed: \(String(decoding: result.standardError, as: UTF8.self))")
            }
        }
        return TestCertificateAuthority(caFile: path("ca.pem"), certificateFile: path("server.pem"), keyFile: path("server.key"))
    }
}

/// nginx (Debian's) terminating TLS on 127.0.0.1 in front of plain-HTTP servers, as a fleet's load balancer does: each
/// path prefix goes to its upstream servers, round robin.
public final class TLSProxy: Sendable {
    public let port: Int
    private let process: RunningProcess
    private let directory: String
    /// The port, held bound (not listening) for the proxy's life: nginx listens beside it (both bind with
    /// SO_REUSEADDR), so no other test takes the port between its choice and nginx's bind.
    private let reservation: HeldPort

    /// `https://127.0.0.1:PORT`
    public var baseURL: String { "https://127.0.0.1:\(port)" }

    /// The repository's `deploy/nginx-keyserver.conf` (docs/deploy.md), the configuration the fleet tests run.
    public static let keyServerTemplate = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy/nginx-keyserver.conf")

    /// Starts nginx on a configuration template with `@PREFIX@`, `@LISTEN@`, `@CERTIFICATE@`, `@CERTIFICATE_KEY@` and
    /// `@UPSTREAM_SERVERS@` placeholders (``keyServerTemplate``), its upstream the `upstreams` (`http://HOST:PORT`).
    public static func start(
        template: URL = keyServerTemplate,
        certificate: TestCertificateAuthority,
        upstreams: [String],
        in directory: String
    ) async throws -> TLSProxy {
        let text = try String(contentsOf: template, encoding: .utf8)
        let servers = upstreams.map { "server \($0.replacingOccurrences(of: "http://", with: "")) max_fails=1 fail_timeout=5s;" }
        return try await launch(in: directory) { port in
            // The placeholders of directives; the comments that explain them stay as they are.
            text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
                guard !line.trimmingCharacters(in: .whitespaces).hasPrefix("#") else { return String(line) }
                return line.replacingOccurrences(of: "@PREFIX@", with: directory)
                    .replacingOccurrences(of: "@LISTEN@", with: "127.0.0.1:\(port)")
                    .replacingOccurrences(of: "@CERTIFICATE_KEY@", with: certificate.keyFile)
                    .replacingOccurrences(of: "@CERTIFICATE@", with: certificate.certificateFile)
                    .replacingOccurrences(of: "@UPSTREAM_SERVERS@", with: servers.joined(separator: "\n        "))
            }.joined(separator: "\n")
        }
    }

    /// Starts nginx with `certificate`, sending each request whose path starts with a key of `routes` to that key's
    /// upstream base URLs (`http://127.0.0.1:PORT`); longest prefix wins, as nginx's locations do.
    public static func start(certificate: TestCertificateAuthority, routes: [String: [String]], in directory: String) async throws -> TLSProxy {
        var upstreams = ""
        var locations = ""
        for (index, (prefix, servers)) in routes.sorted(by: { $0.key < $1.key }).enumerated() {
            upstreams += "    upstream backend\(index) {\n"
            for server in servers { upstreams += "        server \(server.replacingOccurrences(of: "http://", with: ""));\n" }
            upstreams += "    }\n"
            locations += """
                        location \(prefix) {
                            proxy_pass http://backend\(index);
                            proxy_http_version 1.1;
                            proxy_set_header Connection "";
                            proxy_buffering off;
                        }

                """
        }
        return try await launch(in: directory) { port in
            """
            worker_processes 1;
            pid \(directory)/nginx.pid;
            error_log \(directory)/error.log warn;
            events { worker_connections 256; }
            http {
                log_format upstreams '$request $status $upstream_addr';
                access_log \(directory)/access.log upstreams;
                client_body_temp_path \(directory)/body;
                proxy_temp_path \(directory)/proxy;
                fastcgi_temp_path \(directory)/fastcgi;
                uwsgi_temp_path \(directory)/uwsgi;
                scgi_temp_path \(directory)/scgi;
            \(upstreams)
                server {
                    listen 127.0.0.1:\(port) ssl;
                    ssl_certificate \(certificate.certificateFile);
                    ssl_certificate_key \(certificate.keyFile);
            \(locations)
                }
            }

            """
        }
    }

    /// Runs nginx in the foreground on the configuration `configuration(port)` gives, on a free port.
    private static func launch(in directory: String, _ configuration: (Int) -> String) async throws -> TLSProxy {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for _ in 0..<5 {
            // nginx cannot report a port the OS chose: take a free one and keep it held while nginx listens beside it.
            let held = try HeldPort()
            let port = held.port
            let file = (directory as NSString).appendingPathComponent("nginx.conf")
            try configuration(port).write(toFile: file, atomically: true, encoding: .utf8)
            // In the foreground, and as root when the tests run as root (workers otherwise drop to nobody).
            let globals = getuid() == 0 ? "daemon off; user root;" : "daemon off;"
            let process = try ProcessRunner.start(
                URL(fileURLWithPath: "/usr/sbin/nginx"),
                ["-p", directory, "-c", file, "-e", directory + "/error.log", "-g", globals]
            )
            // Up once it accepts connections; gone when the port was taken.
            for _ in 0..<200 where process.isRunning {
                if Self.accepts(port) { return TLSProxy(port: port, process: process, directory: directory, reservation: held) }
                try await Task.sleep(for: .milliseconds(25))
            }
            process.kill()
            _ = try? await process.waitForExit(timeout: .seconds(10))
            held.release()
            let log = (try? String(contentsOfFile: directory + "/error.log", encoding: .utf8)) ?? ""
            guard log.contains("Address already in use") else { throw FrameHashes.Failure(description: "nginx did not start: \(log)") }
        }
        throw FrameHashes.Failure(description: "nginx found no free port in 5 tries")
    }

    private init(port: Int, process: RunningProcess, directory: String, reservation: HeldPort) {
        self.port = port
        self.process = process
        self.directory = directory
        self.reservation = reservation
    }

    /// Stops nginx (SIGQUIT: it finishes open requests) and waits for it.
    public func stop() async {
        process.interrupt()
        _ = try? await process.waitForExit(timeout: .seconds(20))
        reservation.release()
    }

    /// What nginx logged, a line per request, naming the upstream address that answered.
    public func accessLog() -> String {
        (try? String(contentsOfFile: directory + "/access.log", encoding: .utf8)) ?? ""
    }

    private static func accepts(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
