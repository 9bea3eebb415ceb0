public import AssetDownload
import AsyncHTTPClient
import Foundation
import KeyDelivery
import NIOCore
import NIOHTTP1
public import OfflinePackage
import StowageCore
public import StowageLibrary

/// Talks to a running download service over its Unix socket: what the `stowage` commands use when one runs
/// (``connect(dataDirectory:)`` answers nil when none does, and the commands work in-process instead).
///
/// Errors the service reports come back as ``StowageCore/ReportedError`` with the code, message and subject the
/// service's library gave them, so a command prints the same thing either way.
public final class ServiceClient: Sendable {
    public let endpoint: ServiceEndpoint
    private let http: HTTPClient
    /// Set when the service holds `service.lock` but did not answer ``connect(dataDirectory:)``'s probe: every call
    /// fails with it at once.
    private let unresponsive: ReportedError?

    /// How long ``connect(dataDirectory:)`` waits for the service to answer its status.
    static let probeTimeout: Int64 = 10

    private init(endpoint: ServiceEndpoint, unresponsive: ReportedError? = nil) {
        self.endpoint = endpoint
        self.unresponsive = unresponsive
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(2), read: .seconds(120))
        configuration.connectionPool.retryConnectionEstablishment = false
        self.http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// The service on `dataDirectory`, or nil when none runs: no socket, or a socket a killed service left behind.
    ///
    /// A service that holds `service.lock` but does not answer within 10 s (stuck, or its machine overloaded) is still
    /// the one running: its client is returned, and its calls fail at once with `service_unreachable`, instead of the
    /// command acting on the downloads beside it as if no service ran.
    public static func connect(dataDirectory: DataDirectory = .fromEnvironment()) async -> ServiceClient? {
        let endpoint = ServiceEndpoint(dataDirectory: dataDirectory)
        guard FileManager.default.fileExists(atPath: endpoint.socketURL.path) else { return nil }
        let client = ServiceClient(endpoint: endpoint)
        var failure: any Error
        let started = ContinuousClock.now
        repeat {
            do {
                let _: ServiceStatus = try await client.call("GET", "/v1/status", body: Optional<String>.none, timeout: .seconds(probeTimeout))
                return client
            } catch {
                failure = error
            }
            // A service starting up has bound its socket (the file exists) but may not listen on it yet: a refusal
            // that comes at once, while it holds the lock, is asked again within the probe's time, not taken for a
            // service that does not answer (found as a test's `service_unreachable` a moment after the service started).
            guard AssetLock.currentHolder(of: endpoint.lockURL, name: "service") != nil,
                ContinuousClock.now - started < .seconds(probeTimeout)
            else { break }
            try? await Task.sleep(for: .milliseconds(50))
        } while true
        await client.close()
        guard let holder = AssetLock.currentHolder(of: endpoint.lockURL, name: "service") else { return nil }
        let why = (failure as? any StowageError)?.message ?? "\(failure)"
        return ServiceClient(
            endpoint: endpoint,
            unresponsive: ReportedError(
                code: .serviceUnreachable,
                message: "the download service (\(holder)) holds \(endpoint.lockURL.path) but did not answer within \(probeTimeout) s "
                    + "(\(why)); nothing was done. Wait for it and run the command again, or stop it (`kill -TERM` that process; "
                    + "downloads continue where they were when it starts again) and run the command again"
            )
        )
    }

    /// The service on `dataDirectory`.
    /// - Throws: ``StowageCore/ReportedError`` `service_not_running` with how to start it.
    public static func require(dataDirectory: DataDirectory = .fromEnvironment()) async throws -> ServiceClient {
        guard let client = await connect(dataDirectory: dataDirectory) else {
            throw ReportedError(
                code: .serviceNotRunning,
                message: "no download service runs on \(dataDirectory.url.path); start it with `stowage service run` (or "
                    + "`systemctl --user start stowage` after `stowage service install`), or download in the foreground without --background"
            )
        }
        return client
    }

    public func close() async {
        try? await http.shutdown()
    }

    deinit {
        // Dropped without close(): shut the client down rather than trap (AsyncHTTPClient asserts on an open client).
        let client = http
        Task { try? await client.shutdown() }
    }

    // MARK: - Calls

    public func status() async throws -> ServiceStatus { try await call("GET", "/v1/status") }

    public func assets() async throws -> [AssetSummary] { try await call("GET", "/v1/assets") }

    public func info(assetId: String) async throws -> PackageInfo { try await call("GET", "/v1/assets/\(Self.escape(assetId))") }

    public func delete(assetId: String) async throws -> AssetDeletion { try await call("DELETE", "/v1/assets/\(Self.escape(assetId))") }

    /// Queues a download; returns at once with where it stands.
    public func submit(_ request: DownloadRequest, priority: Int = 0) async throws -> ServiceDownload {
        try await call("POST", "/v1/downloads", body: DownloadSubmission(request: request, priority: priority))
    }

    public func downloads() async throws -> [ServiceDownload] { try await call("GET", "/v1/downloads") }

    /// One download as the service sees it (completed ones too, until deleted).
    public func download(assetId: String) async throws -> ServiceDownload {
        try await call("GET", "/v1/downloads/\(Self.escape(assetId))")
    }

    public func pause(assetId: String) async throws -> ServiceDownload {
        try await call("POST", "/v1/downloads/\(Self.escape(assetId))/pause")
    }

    /// Ends a live recording the service makes, and keeps it (``DownloadTask/stopRecording()``).
    public func stopRecording(assetId: String) async throws -> ServiceDownload {
        try await call("POST", "/v1/downloads/\(Self.escape(assetId))/stop-recording")
    }

    public func resume(assetId: String, priority: Int? = nil) async throws -> ServiceDownload {
        try await call("POST", "/v1/downloads/\(Self.escape(assetId))/resume", body: ResumeSubmission(priority: priority))
    }

    public func cancel(assetId: String) async throws {
        let _: [String: String] = try await call("POST", "/v1/downloads/\(Self.escape(assetId))/cancel")
    }

    public func upkeepLeases() async throws -> LeaseUpkeepReport { try await call("POST", "/v1/leases/upkeep") }

    /// The updates of a download as the service runs it, until its run ends (finished, failed, paused) or the stream
    /// is dropped.
    public func updates(assetId: String) async throws -> AsyncThrowingStream<DownloadUpdate, any Error> {
        let path = "/v1/downloads/\(Self.escape(assetId))/events"
        let response = try await send("GET", path, body: Optional<String>.none, timeout: .hours(24 * 7))
        guard response.status == .ok else {
            throw Self.error(
                data: Data(try await response.body.collect(upTo: 1 << 20).readableBytesView),
                status: Int(response.status.code),
                request: "GET \(path)",
                socket: endpoint.socketURL.path
            )
        }
        return AsyncThrowingStream { continuation in
            let reader = Task {
                var pending = ByteBuffer()
                do {
                    for try await var chunk in response.body {
                        pending.writeBuffer(&chunk)
                        while let newline = pending.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
                            let length = newline - pending.readerIndex
                            let line = pending.readSlice(length: length)!
                            pending.moveReaderIndex(forwardBy: 1)
                            if let update = try? JSONDecoder().decode(DownloadUpdate.self, from: Data(line.readableBytesView)) {
                                continuation.yield(update)
                            }
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in reader.cancel() }
        }
    }

    // MARK: - HTTP

    private func call<Answer: Decodable>(_ method: String, _ path: String) async throws -> Answer {
        try await call(method, path, body: Optional<String>.none)
    }

    private func call<Answer: Decodable, Body: Encodable>(
        _ method: String,
        _ path: String,
        body: Body?,
        timeout: TimeAmount = .seconds(300)
    ) async throws -> Answer {
        let response = try await send(method, path, body: body, timeout: timeout)
        let data = Data(try await response.body.collect(upTo: 64 << 20).readableBytesView)
        guard (200..<300).contains(response.status.code) else {
            throw Self.error(data: data, status: Int(response.status.code), request: "\(method) \(path)", socket: endpoint.socketURL.path)
        }
        do {
            return try JSONDecoder().decode(Answer.self, from: data)
        } catch {
            throw ReportedError(
                code: .serviceProtocolError,
                message: "the download service on \(endpoint.socketURL.path) answered \(method) \(path) with \(data.count) bytes that "
                    + "are not the answer this stowage reads; nothing was changed here. It may be another version of Stowage: "
                    + "restart it (`systemctl --user restart stowage`, or stop `stowage service run` and start it again)"
            )
        }
    }

    private func send<Body: Encodable>(_ method: String, _ path: String, body: Body?, timeout: TimeAmount) async throws -> HTTPClientResponse {
        if let unresponsive { throw unresponsive }
        guard let url = URL(httpURLWithSocketPath: endpoint.socketURL.path, uri: path) else {
            throw ReportedError(code: .serviceNotRunning, message: "the service socket path \(endpoint.socketURL.path) cannot be used")
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = HTTPMethod(rawValue: method)
        if let body {
            let encoder = JSONEncoder()
            request.body = .bytes(ByteBuffer(bytes: try encoder.encode(body)))
            request.headers.add(name: "Content-Type", value: "application/json")
        }
        do {
            return try await http.execute(request, timeout: timeout)
        } catch {
            throw ReportedError(
                code: .serviceUnreachable,
                message: "the download service on \(endpoint.socketURL.path) did not answer (\(NetworkErrorText.describe(error))); "
                    + "check it with `stowage service status`"
            )
        }
    }

    /// The error a non-2xx answer to `request` carries, or `service_protocol_error` when it carries none.
    private static func error(data: Data, status: Int, request: String, socket: String) -> ReportedError {
        if let document = try? JSONDecoder().decode(ErrorDocument.self, from: data) { return document.reported }
        return ReportedError(
            code: .serviceProtocolError,
            message: "the download service on \(socket) answered \(request) with HTTP \(status) and no Stowage error; what it did is "
                + "unknown. Check it with `stowage service status`, and restart it if it is another version of Stowage"
        )
    }

    private static func escape(_ assetId: String) -> String {
        assetId.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? assetId
    }
}
