import Foundation
import Hummingbird
import KeyDelivery
import Logging
import NIOCore
import StowageCrypto

/// The protocol's endpoints (docs/key-protocol.md) on a Hummingbird router; each handler reads the request, calls
/// ``KeyService`` and writes its answer or its protocol error.
enum KeyServerRoutes {
    static let signatureHeader = HTTPFields.Element.Name(KeyProtocol.deviceSignatureHeader)!

    static func makeRouter(service: KeyService, metrics: KeyServerMetrics, metricsToken: SecretBytes?) -> Router<KeyServerRequestContext> {
        let router = Router(context: KeyServerRequestContext.self)
        router.add(middleware: RequestObservingMiddleware(metrics: metrics))
        router.add(middleware: ProtocolErrorMiddleware(logger: service.logger))
        OperationsRoutes.add(to: router, service: service, metrics: metrics, metricsToken: metricsToken)
        let limit = service.configuration.maxRequestBytes
        let proxies = Set(service.configuration.trustedProxies)

        router.post("v1/keys") { request, context -> Response in
            let body = try await readBody(request, limit: limit, operation: "keys", service: service)
            let signed = try await service.requestKeys(
                body: body,
                signature: request.headers[signatureHeader],
                authorization: request.headers[.authorization],
                source: context.sourceKey(request, trustedProxies: proxies)
            )
            return jsonResponse(PayloadSigning.responseBody(signed))
        }
        router.post("v1/leases/:leaseID/renew") { request, context -> Response in
            let body = try await readBody(request, limit: limit, operation: "renew", service: service)
            let signed = try await service.renew(
                leaseID: try context.parameters.require("leaseID"),
                body: body,
                signature: request.headers[signatureHeader],
                authorization: request.headers[.authorization],
                source: context.sourceKey(request, trustedProxies: proxies)
            )
            return jsonResponse(PayloadSigning.responseBody(signed))
        }
        router.post("v1/leases/:leaseID/first-play") { request, context -> Response in
            let body = try await readBody(request, limit: limit, operation: "first-play", service: service)
            let answer = try await service.recordFirstPlay(
                leaseID: try context.parameters.require("leaseID"),
                body: body,
                signature: request.headers[signatureHeader],
                source: context.sourceKey(request, trustedProxies: proxies)
            )
            return try json(answer)
        }
        router.post("v1/leases/:leaseID/release") { request, context -> Response in
            let body = try await readBody(request, limit: limit, operation: "release", service: service)
            try await service.release(
                leaseID: try context.parameters.require("leaseID"),
                body: body,
                signature: request.headers[signatureHeader],
                source: context.sourceKey(request, trustedProxies: proxies)
            )
            return try json(ReleaseResponse(released: true))
        }
        router.get("v1/server-key") { _, _ -> Response in
            try json(service.serverKey)
        }
        router.get("v1/identity/:assetID/:keyID") { request, context -> Response in
            let key = try await service.identityKey(
                assetID: try context.parameters.require("assetID"),
                keyID: try context.parameters.require("keyID"),
                authorization: request.headers[.authorization],
                source: context.sourceKey(request, trustedProxies: proxies)
            )
            return Response(
                status: .ok,
                headers: [.contentType: "application/octet-stream", .cacheControl: "no-store"],
                body: .init(byteBuffer: key.withUnsafeBytes { ByteBuffer(bytes: $0) })
            )
        }
        return router
    }

    /// The body, at most `limit` bytes; a larger one is `400 malformed_request` (recorded in the audit log).
    private static func readBody(_ request: Request, limit: Int, operation: String, service: KeyService) async throws -> [UInt8] {
        let tooLarge = KeyServerError(.malformedRequest, "the request body is larger than \(limit) bytes")
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            service.recordRefusal(operation, tooLarge)
            throw tooLarge
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return Array(buffer.readableBytesView)
        } catch is NIOTooManyBytesError {
            service.recordRefusal(operation, tooLarge)
            throw tooLarge
        }
    }

    private static func json(_ value: some Encodable) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return jsonResponse(Array(try encoder.encode(value)))
    }

    private static func jsonResponse(_ body: [UInt8]) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// Turns any error that is not already an HTTP error into `500 internal` with the protocol's error body, so a client
/// never sees a bare 500 without a code.
struct ProtocolErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            throw error
        } catch {
            logger.error("unhandled error", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            throw KeyServerError(.internal, "the key server failed to answer; try again later")
        }
    }
}
