public import AssetDownload
import Foundation
import Hummingbird
import NIOCore
import OfflinePackage
import StowageCore
public import StowageLibrary

/// What `POST /v1/downloads` takes.
public struct DownloadSubmission: Codable, Sendable {
    public var request: DownloadRequest
    public var priority: Int

    public init(request: DownloadRequest, priority: Int = 0) {
        self.request = request
        self.priority = priority
    }
}

/// What `POST /v1/downloads/ASSET/resume` takes.
public struct ResumeSubmission: Codable, Sendable {
    public var priority: Int?

    public init(priority: Int? = nil) {
        self.priority = priority
    }
}

/// The service's state (`GET /v1/status`, `stowage service status`).
public struct ServiceStatus: Codable, Sendable {
    public var pid: Int32
    public var dataDirectory: String
    public var startedAt: Int64
    public var maxDownloads: Int
    public var bytesPerSecond: Int64?
    public var keepFreeBytes: Int64
    public var window: String?
    public var downloads: [ServiceDownload]
    /// The latest runs, oldest first.
    public var runs: [ServiceRun]
    /// The latest lease upkeep.
    public var lastUpkeep: LeaseUpkeepReport?
}

/// The service's HTTP+JSON API on its Unix socket. Every answer is JSON; every error is an ``ErrorDocument`` with a
/// status that fits its code (404 not found, 409 busy or in the wrong state, 400 bad input, 500 otherwise).
///
/// | Route | Does |
/// |---|---|
/// | `GET /v1/status` | ``ServiceStatus`` |
/// | `GET /v1/assets`, `GET /v1/assets/ASSET` | the catalog (``AssetSummary``) as the service sees it; ``PackageInfo`` |
/// | `DELETE /v1/assets/ASSET` | deletes the asset (stopping its download first): ``AssetDeletion`` |
/// | `POST /v1/downloads` | queues a ``DownloadSubmission``: 202 and its ``ServiceDownload`` |
/// | `GET /v1/downloads`, `GET /v1/downloads/ASSET` | every download not completed; one download |
/// | `POST /v1/downloads/ASSET/pause`, `.../resume`, `.../cancel` | as the commands |
/// | `GET /v1/downloads/ASSET/events` | ``DownloadUpdate`` JSON lines until the run ends |
/// | `POST /v1/leases/upkeep` | one round of lease upkeep now: ``LeaseUpkeepReport`` |
enum ServiceRoutes {
    static func makeRouter(service: DownloadService) -> Router<BasicRequestContext> {
        let router = Router()
        let scheduler = service.scheduler
        let library = service.library
        router.get("v1/status") { _, _ in await respond { try await service.status() } }
        router.get("v1/assets") { _, _ in
            await respond {
                var rows: [AssetSummary] = []
                for row in try library.assets() { rows.append(await scheduler.overlay(row)) }
                return rows
            }
        }
        router.get("v1/assets/:asset") { _, context in
            await respond { try library.info(assetId: try context.parameters.require("asset")) }
        }
        router.delete("v1/assets/:asset") { _, context in
            await respond { try await scheduler.delete(try context.parameters.require("asset")) }
        }
        router.post("v1/downloads") { request, _ in
            await respond(status: .accepted) {
                let submission = try await decode(DownloadSubmission.self, request)
                return try await scheduler.submit(submission.request, priority: submission.priority)
            }
        }
        router.get("v1/downloads") { _, _ in await respond { try await scheduler.downloads() } }
        router.get("v1/downloads/:asset") { _, context in
            await respond { try await scheduler.status(of: try context.parameters.require("asset")) }
        }
        router.post("v1/downloads/:asset/pause") { _, context in
            await respond { try await scheduler.pause(try context.parameters.require("asset")) }
        }
        router.post("v1/downloads/:asset/stop-recording") { _, context in
            await respond { try await scheduler.stopRecording(try context.parameters.require("asset")) }
        }
        router.post("v1/downloads/:asset/resume") { request, context in
            await respond {
                let submission = try await decode(ResumeSubmission.self, request, emptyAs: ResumeSubmission())
                return try await scheduler.resume(try context.parameters.require("asset"), priority: submission.priority)
            }
        }
        router.post("v1/downloads/:asset/cancel") { _, context in
            await respond {
                let asset = try context.parameters.require("asset")
                try await scheduler.cancel(asset)
                return ["cancelled": asset]
            }
        }
        router.get("v1/downloads/:asset/events") { _, context in
            do {
                let updates = try await scheduler.watch(try context.parameters.require("asset"))
                let body = ResponseBody { writer in
                    for await update in updates {
                        try await writer.write(ByteBuffer(string: update.jsonLine() + "\n"))
                    }
                    try await writer.finish(nil)
                }
                return Response(status: .ok, headers: [.contentType: "application/x-ndjson"], body: body)
            } catch {
                return failure(error)
            }
        }
        router.post("v1/leases/upkeep") { _, _ in await respond { await service.upkeepNow() } }
        return router
    }

    /// Runs `body` and answers with its JSON, or with the error's document.
    static func respond<T: Encodable>(status: HTTPResponse.Status = .ok, _ body: () async throws -> T) async -> Response {
        do {
            return json(try await body(), status: status)
        } catch {
            return failure(error)
        }
    }

    static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func failure(_ error: any Error) -> Response {
        let described: any StowageError =
            (error as? any StowageError)
            ?? ReportedError(code: .serviceError, message: "the download service could not do this (\(type(of: error))); see its log")
        let document = ErrorDocument(described)
        return Response(
            status: status(for: described.code),
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: document.json()))
        )
    }

    static func status(for code: ErrorCode) -> HTTPResponse.Status {
        switch code {
        case .packageNotFound, .downloadNotFound: .notFound
        case .assetBusy, .downloadExists, .downloadInvalidState: .conflict
        case _ where code.rawValue.hasPrefix("invalid_"): .badRequest
        default: .internalServerError
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ request: Request, emptyAs empty: T? = nil) async throws -> T {
        let buffer = try await request.body.collect(upTo: 1 << 20)
        if buffer.readableBytes == 0, let empty { return empty }
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch {
            throw ReportedError(code: .invalidRequest, message: "the request body is not a \(T.self) in JSON")
        }
    }
}
