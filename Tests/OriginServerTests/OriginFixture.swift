import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import OriginServer

#if canImport(Glibc)
import Glibc
#endif

/// Runs an origin over a temporary directory on an OS-assigned loopback port, and stops it when the test is done.
enum OriginFixture {
    struct StartFailed: Error {}

    /// A new empty directory, removed by the caller.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("origin-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Deterministic content of `count` bytes.
    static func bytes(_ count: Int, salt: UInt8 = 0) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8 &+ Int(salt)) }
    }

    /// Starts an origin, runs `body` with its base URL (`http://127.0.0.1:PORT`) and stops the origin, gracefully.
    static func withOrigin<Result: Sendable>(
        _ configuration: Origin.Configuration,
        _ body: (String) async throws -> Result
    ) async throws -> Result {
        try await withThrowingTaskGroup(of: Void.self) { group in
            let (addresses, continuation) = AsyncStream.makeStream(of: Origin.Address.self)
            group.addTask {
                do {
                    try await Origin(configuration: configuration).run { address in
                        continuation.yield(address)
                        continuation.finish()
                    }
                } catch {
                    continuation.finish()
                    throw error
                }
                continuation.finish()
            }
            var iterator = addresses.makeAsyncIterator()
            guard let address = await iterator.next() else {
                try await group.waitForAll()
                throw StartFailed()
            }
            do {
                let result = try await body("http://\(address.host):\(address.port)")
                group.cancelAll()
                try await group.waitForAll()
                return result
            } catch {
                group.cancelAll()
                try? await group.waitForAll()
                throw error
            }
        }
    }

    /// Runs `body` with a new HTTP client and shuts the client down afterwards, whatever happens.
    static func withClient<Result: Sendable>(
        readTimeout: TimeAmount? = nil,
        _ body: (HTTPClient) async throws -> Result
    ) async throws -> Result {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(5), read: readTimeout ?? .seconds(30))
        // Bodies are compared byte for byte: no decompression, no redirects.
        configuration.redirectConfiguration = .disallow
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            let result = try await body(client)
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// A response as the tests look at it.
    struct Fetched: Sendable {
        /// 0 when the request failed before a response head arrived.
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        /// Set when the body failed part way (reset, closed early, read timeout): the error's description.
        var bodyError: String?

        func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    /// GETs (or HEADs) `url`, collecting the body even when it fails part way; connection errors become `bodyError`.
    static func fetch(
        _ client: HTTPClient,
        _ url: String,
        method: String = "GET",
        headers: [(String, String)] = [],
        deadline: TimeAmount = .seconds(30)
    ) async throws -> Fetched {
        var request = HTTPClientRequest(url: url)
        request.method = .init(rawValue: method)
        for (name, value) in headers {
            request.headers.add(name: name, value: value)
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: deadline)
        } catch {
            // A reset can reach the client before it has read the head: no status, only the error.
            return Fetched(status: 0, headers: [:], body: [], bodyError: String(describing: error))
        }
        var collected: [UInt8] = []
        var bodyError: String?
        do {
            for try await buffer in response.body {
                collected.append(contentsOf: buffer.readableBytesView)
            }
        } catch {
            bodyError = String(describing: error)
        }
        var fields: [String: String] = [:]
        for header in response.headers {
            fields[header.name.lowercased()] = header.value
        }
        return Fetched(status: Int(response.status.code), headers: fields, body: collected, bodyError: bodyError)
    }

    /// Sends `requestTarget` exactly as written (no URL normalisation) and returns the response's status code.
    static func rawStatus(base: String, requestTarget: String) async throws -> Int {
        guard let url = URL(string: base), let port = url.port else { throw StartFailed() }
        let request = "GET \(requestTarget) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        let response = try await NIOThreadPool.singleton.runIfActive { try RawSocket.exchange(port: port, request: request) }
        let statusLine = response.prefix { $0 != "\r" && $0 != "\n" }
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw StartFailed() }
        return status
    }
}

/// A blocking loopback client that sends bytes as given, for requests that URL types would normalise.
enum RawSocket {
    struct Failure: Error {
        var errno: Int32
    }

    static func exchange(port: Int, request: String) throws -> String {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(errno: errno) }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(errno: errno) }
        let bytes = Array(request.utf8)
        guard send(descriptor, bytes, bytes.count, 0) == bytes.count else { throw Failure(errno: errno) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        // Bounded: the server closes (Connection: close) or the receive timeout ends the loop.
        for _ in 0..<1000 {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { break }
            response.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: response, as: UTF8.self)
    }
}
