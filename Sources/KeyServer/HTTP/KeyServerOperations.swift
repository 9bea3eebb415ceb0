import Foundation
import Hummingbird
import KeyDelivery
import Logging
import NIOCore
import Prometheus
import StowageCore
import StowageCrypto

/// What one key server instance counts for `GET /metrics` (Prometheus text format, swift-prometheus): a registry of
/// its own per instance, never the process-wide metrics system, so several servers in one process (tests) do not mix.
///
/// | metric | labels | what |
/// |---|---|---|
/// | `stowage_keyserver_requests_total` | `route`, `status` | answered requests |
/// | `stowage_keyserver_request_duration_seconds` | `route` | time to answer (histogram) |
/// | `stowage_keyserver_refusals_total` | `code` | protocol errors answered (`device_limit_reached`, ...) |
/// | `stowage_keyserver_active_leases` | `type` | leases not released nor expired, read from the database |
/// | `stowage_keyserver_database_up` | | 1 when the database answered that read, else 0 |
/// | `stowage_keyserver_database_operations_in_flight` | | operations holding or awaiting a connection |
/// | `stowage_keyserver_database_connections_max` | | the pool's size |
final class KeyServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    static let buckets: [Duration] = [
        .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(10),
    ]

    private static var requests: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stowage",
            subsystem: "keyserver",
            metricName: "requests",
            unitName: "total",
            helpText: "Requests answered, by route and status."
        )
    }
    private static var duration: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stowage",
            subsystem: "keyserver",
            metricName: "request_duration",
            unitName: "seconds",
            helpText: "Time to answer a request."
        )
    }
    private static var refusals: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stowage",
            subsystem: "keyserver",
            metricName: "refusals",
            unitName: "total",
            helpText: "Protocol errors answered, by code."
        )
    }
    private static var leases: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stowage",
            subsystem: "keyserver",
            metricName: "active_leases",
            unitName: "",
            helpText: "Leases neither released nor past their storage expiry, by type."
        )
    }
    private static var databaseUp: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stowage",
            subsystem: "keyserver",
            metricName: "database_up",
            unitName: "",
            helpText: "1 when the database answered the last scrape's lease count, else 0."
        )
    }

    private static var operations: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stowage",
            subsystem: "keyserver",
            metricName: "database_operations_in_flight",
            unitName: "",
            helpText: "Database operations holding or waiting for a connection."
        )
    }
    private static var connections: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stowage",
            subsystem: "keyserver",
            metricName: "database_connections_max",
            unitName: "",
            helpText: "The most connections this instance opens to the database."
        )
    }

    /// Counts one answer.
    func record(route: String, status: Int, duration: Duration, refusal: String?) {
        registry.makeCounter(descriptor: Self.requests, labels: [("route", route), ("status", String(status))]).increment()
        registry.makeDurationHistogram(descriptor: Self.duration, labels: [("route", route)], buckets: Self.buckets).record(duration)
        if let refusal { registry.makeCounter(descriptor: Self.refusals, labels: [("code", refusal)]).increment() }
    }

    /// The exposition, with the gauges read from `store` now.
    /// A database that does not answer leaves the lease gauges at their last values and sets
    /// `stowage_keyserver_database_up` to 0: the counters are still worth scraping.
    func exposition(store: any KeyServerStore, now: Int64) async -> [UInt8] {
        if let counts = try? await store.activeLeaseCounts(now: now) {
            for type in [LeaseType.persistent, .streaming] {
                registry.makeGauge(descriptor: Self.leases, labels: [("type", type.rawValue)]).set(to: Double(counts[type] ?? 0))
            }
            registry.makeGauge(descriptor: Self.databaseUp).set(to: 1)
        } else {
            registry.makeGauge(descriptor: Self.databaseUp).set(to: 0)
        }
        if let use = store.connectionUse {
            registry.makeGauge(descriptor: Self.operations).set(to: Double(use.operations))
            registry.makeGauge(descriptor: Self.connections).set(to: Double(use.maximumConnections))
        }
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }
}

/// The outermost middleware: gives each request an ID (the caller's `X-Request-ID` when it is a sane token, else a
/// new UUID) that the answer echoes and every log line of the request carries, logs one access line when it is
/// answered (method, route, status, duration, refusal code), and counts it in ``KeyServerMetrics``.
struct RequestObservingMiddleware: RouterMiddleware {
    typealias Context = KeyServerRequestContext
    static let requestIDHeader = HTTPFields.Element.Name("X-Request-ID")!

    let metrics: KeyServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let requestID = request.headers[Self.requestIDHeader].flatMap(Self.accepted) ?? UUID().uuidString.lowercased()
        context.logger[metadataKey: "request_id"] = .string(requestID)
        let start = ContinuousClock.now
        let route = context.endpointPath ?? "unmatched"
        do {
            var response = try await next(request, context)
            response.headers[Self.requestIDHeader] = requestID
            finish(request, context, route: route, status: Int(response.status.code), refusal: nil, since: start)
            return response
        } catch let error as KeyServerError {
            finish(request, context, route: route, status: Int(error.status.code), refusal: error.code.rawValue, since: start)
            throw RequestIDError(base: error, requestID: requestID)
        } catch let error as any HTTPResponseError {
            finish(request, context, route: route, status: Int(error.status.code), refusal: nil, since: start)
            throw error
        }
    }

    private func finish(_ request: Request, _ context: Context, route: String, status: Int, refusal: String?, since start: ContinuousClock.Instant) {
        let duration = ContinuousClock.now - start
        metrics.record(route: route, status: status, duration: duration, refusal: refusal)
        var metadata: Logger.Metadata = [
            "method": .string(request.method.rawValue),
            "route": .string(route),
            "status": .stringConvertible(status),
            "duration_ms": .string(String(format: "%.2f", duration / .milliseconds(1))),
        ]
        if let refusal { metadata["code"] = .string(refusal) }
        if let address = context.remoteAddress?.ipAddress { metadata["source"] = .string(address) }
        context.logger.info("request", metadata: metadata)
    }

    /// A caller's request ID, kept when it is 1 to 64 characters of `[A-Za-z0-9._-]` (anything else could forge or
    /// break log lines), else nil.
    static func accepted(_ value: String) -> String? {
        guard (1...64).contains(value.utf8.count),
            value.utf8.allSatisfy({
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D
            })
        else { return nil }
        return value
    }
}

/// A protocol error answered with the request's ID in its headers, so a refused client can quote it.
struct RequestIDError: HTTPResponseError {
    let base: KeyServerError
    let requestID: String

    var status: HTTPResponse.Status { base.status }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try base.response(from: request, context: context)
        response.headers[RequestObservingMiddleware.requestIDHeader] = requestID
        return response
    }
}

/// `GET /healthz`, `GET /readyz` and `GET /metrics`, beside the protocol's routes.
enum OperationsRoutes {
    static func add(to router: Router<KeyServerRequestContext>, service: KeyService, metrics: KeyServerMetrics, metricsToken: SecretBytes?) {
        // The process is up and answering.
        router.get("healthz") { _, _ -> Response in
            Self.json(.ok, #"{"status":"ok"}"#)
        }
        // Ready for traffic: the database answers on the schema this build uses. A balancer takes an instance out of
        // rotation on 503 without killing it.
        // Ready for traffic: the database answers on the schema this build uses. A balancer takes an instance out of
        // rotation on 503 without killing it. The answer gives the code only: the reason names the database's
        // address, which is for the operator's log, not for whoever can reach this port.
        router.get("readyz") { _, context -> Response in
            do {
                try await service.store.checkReady()
                return Self.json(.ok, #"{"status":"ready"}"#)
            } catch {
                let problem = error as? KeyServerSetupError
                context.logger.warning("not ready", metadata: ["error": "\(problem?.message ?? String(describing: error))"])
                let code = problem?.code ?? .databaseUnavailable
                return Self.json(.serviceUnavailable, #"{"status":"unavailable","error":{"code":"\#(code)"}}"#)
            }
        }
        // The counters say how busy the server is and what it refuses: for the operator's scraper only, which sends the
        // data directory's `metrics-token` as a bearer token.
        router.get("metrics") { request, _ -> Response in
            guard let metricsToken else {
                return Self.error(
                    .forbidden,
                    code: .metricsDisabled,
                    message: "this key server has no metrics-token file; run `stowage keyserver init` on its data directory to create one"
                )
            }
            guard Self.bears(metricsToken, request.headers[.authorization]) else {
                var response = Self.error(
                    .unauthorized,
                    code: .invalidToken,
                    message: "the request did not carry this key server's metrics token; send the data directory's metrics-token file "
                        + "as `Authorization: Bearer TOKEN`"
                )
                response.headers[.wwwAuthenticate] = "Bearer"
                return response
            }
            let body = await metrics.exposition(store: service.store, now: service.clock.now)
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(bytes: body))
            )
        }
    }

    /// Whether `authorization` is `Bearer` and `token`, compared in constant time.
    private static func bears(_ token: SecretBytes, _ authorization: String?) -> Bool {
        guard let presented = EntitlementVerifier.bearerToken(authorization) else { return false }
        return token.withUnsafeBytes { ConstantTime.isEqual($0, Array(presented.utf8)) }
    }

    /// The protocol's error body, `{"error": {"code": ..., "message": ...}}`.
    private static func error(_ status: HTTPResponse.Status, code: ErrorCode, message: String) -> Response {
        struct Body: Encodable {
            struct Detail: Encodable {
                let code: ErrorCode
                let message: String
            }
            let error: Detail
        }
        let body = (try? JSONEncoder().encode(Body(error: .init(code: code, message: message)))) ?? Data()
        return json(status, String(decoding: body, as: UTF8.self))
    }

    private static func json(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: body))
        )
    }
}
