import HLS
import Hummingbird
import NIOCore
import NIOPosix
import StowageCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Answers GET and HEAD with the files under a root, streamed in chunks and shaped by ``NetworkConditions``.
///
/// Unconditioned, a body goes out in 256 KiB chunks with nothing in between; shaped, in chunks of about 20 ms of the
/// link's bandwidth, each one paid for from the shared ``TokenBucket``.
struct FileResponder: HTTPResponder {
    typealias Context = OriginRequestContext

    /// Thrown from a body writer to make Hummingbird close the connection part way through a body.
    struct InjectedConnectionFault: Error, Hashable {
        var fault: NetworkFault
    }

    static let unshapedChunkSize = 256 * 1024

    let resolvedRoot: String
    let conditions: NetworkConditions
    let seed: UInt64
    let requestLog: OriginRequestLog?
    let attempts = AttemptCounter()
    let link: TokenBucket?
    let chunkSize: Int
    let threadPool: NIOThreadPool
    /// Serves VOD media playlists as live streams, when set.
    let live: LivePlaylists?

    init(
        resolvedRoot: String,
        conditions: NetworkConditions,
        seed: UInt64,
        requestLog: OriginRequestLog?,
        threadPool: NIOThreadPool,
        live: LivePlaylists? = nil
    ) {
        self.resolvedRoot = resolvedRoot
        self.live = live
        self.conditions = conditions
        self.seed = seed
        self.requestLog = requestLog
        self.threadPool = threadPool
        if let bandwidth = conditions.bandwidthBytesPerSecond {
            let chunkSize = min(64 * 1024, max(1024, bandwidth / 50))
            self.chunkSize = chunkSize
            link = TokenBucket(bytesPerSecond: bandwidth, capacity: chunkSize)
        } else {
            chunkSize = Self.unshapedChunkSize
            link = nil
        }
    }

    func respond(to request: Request, context: Context) async throws -> Response {
        let method = request.method
        let target = request.head.path ?? ""
        let rangeHeader = request.headers[.range]
        if conditions.latencyMilliseconds > 0 {
            try await Task.sleep(for: .milliseconds(conditions.latencyMilliseconds))
        }
        guard method == .get || method == .head else {
            record(method, rawPath(target), rangeHeader, .methodNotAllowed, request.head)
            return Response(status: .methodNotAllowed, headers: [.allow: "GET, HEAD", .contentLength: "0"])
        }
        let path: RequestPath
        do {
            path = try RequestPath(target: target)
        } catch {
            let status: HTTPResponse.Status = error == .malformed ? .badRequest : .notFound
            record(method, rawPath(target), rangeHeader, status, request.head)
            return Response(status: status, headers: [.contentLength: "0"])
        }
        let root = resolvedRoot
        let fileSystemPath = path.fileSystemPath(under: root)
        guard let file = try await threadPool.runIfActive({ ServedFile.open(path: fileSystemPath, resolvedRoot: root) }) else {
            record(method, path.decoded, rangeHeader, .notFound, request.head)
            return Response(status: .notFound, headers: [.contentLength: "0"])
        }

        let plan =
            conditions.isUnconditioned
            ? FaultPlan(action: .none)
            : FaultPlan(
                conditions: conditions,
                seed: seed,
                path: path.decoded,
                range: rangeHeader,
                attempt: attempts.next(for: path.decoded)
            )
        if case .error(let tooManyRequests) = plan.action {
            return errorResponse(tooManyRequests: tooManyRequests, method: method, path: path.decoded, range: rangeHeader, head: request.head)
        }

        if let live, path.decoded.lowercased().hasSuffix(".m3u8"),
            let view = try await live.view(at: file.path, holding: LivePlaylists.blockingSequence(in: target), threadPool: threadPool)
        {
            return livePlaylistResponse(
                PlaylistWriter.write(.media(view)),
                plan: plan,
                method: method,
                path: path.decoded,
                request: request,
                channel: context.channel
            )
        }

        var headers: HTTPFields = [
            .acceptRanges: "bytes",
            .eTag: file.entityTag,
            .lastModified: file.lastModified,
            .contentType: MediaType.forFile(named: path.components.last ?? ""),
        ]
        let range =
            Self.ifRange(request.headers[.ifRange], matches: file)
            ? ByteRangeRequest(header: rangeHeader, size: file.size)
            : .whole
        let status: HTTPResponse.Status
        let bytes: Range<Int>
        switch range {
        case .whole:
            status = .ok
            bytes = 0..<file.size
        case .partial(let closed):
            status = .partialContent
            bytes = closed.lowerBound..<(closed.upperBound + 1)
            headers[.contentRange] = "bytes \(closed.lowerBound)-\(closed.upperBound)/\(file.size)"
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(file.size)"
            headers[.contentLength] = "0"
            record(method, path.decoded, rangeHeader, .rangeNotSatisfiable, request.head)
            return Response(status: .rangeNotSatisfiable, headers: headers)
        }
        headers[.contentLength] = String(bytes.count)

        let cutsBody = method == .get && plan.cutOffset(bodyLength: bytes.count) != nil
        let ticket = requestLog?.append(
            .init(
                method: method.rawValue,
                path: path.decoded,
                range: rangeHeader,
                status: Int(status.code),
                bytesSent: 0,
                fault: cutsBody ? plan.fault : .none,
                headers: Self.recordedHeaders(request.head)
            )
        )
        guard method == .get, !bytes.isEmpty else {
            return Response(status: status, headers: headers, body: ResponseBody())
        }
        let channel = context.channel
        let effectivePlan = cutsBody ? plan : FaultPlan(action: .none)
        return Response(
            status: status,
            headers: headers,
            body: ResponseBody(contentLength: bytes.count) { writer in
                try await sendBody(of: file, bytes: bytes, plan: effectivePlan, ticket: ticket, channel: channel, to: &writer)
            }
        )
    }

    /// Streams `bytes` of `file`, paying the link for every chunk and injecting the planned reset, truncation or stall.
    private func sendBody(
        of file: ServedFile,
        bytes: Range<Int>,
        plan: FaultPlan,
        ticket: OriginRequestLog.Ticket?,
        channel: any Channel,
        to writer: inout any ResponseBodyWriter
    ) async throws {
        let length = bytes.count
        let cut = plan.cutOffset(bodyLength: length)
        try await FileChunkReader.withReader(path: file.path, threadPool: threadPool) { reader in
            var sent = 0
            while sent < length {
                if sent == cut {
                    try await injectFault(plan.action, into: channel)
                }
                var end = min(length, sent + chunkSize)
                if let cut, sent < cut, end > cut {
                    end = cut
                }
                // Read, then write: on two cores this beat reading the next chunk while writing (1.9 vs 1.65 GB/s).
                let chunk = try await reader.read(offset: bytes.lowerBound + sent, length: end - sent)
                if let link {
                    let wait = link.reserve(chunk.readableBytes)
                    if wait > .zero {
                        try await Task.sleep(for: wait)
                    }
                }
                if let ticket {
                    requestLog?.addBytesSent(chunk.readableBytes, to: ticket)
                }
                try await writer.write(chunk)
                sent = end
            }
        }
        try await writer.finish(nil)
    }

    /// A live view of a media playlist: no validators or ranges (it changes every segment), faults as for files.
    private func livePlaylistResponse(
        _ text: String,
        plan: FaultPlan,
        method: HTTPRequest.Method,
        path: String,
        request: Request,
        channel: any Channel
    ) -> Response {
        let body = ByteBuffer(string: text)
        let headers: HTTPFields = [
            .contentType: MediaType.forFile(named: "index.m3u8"),
            .contentLength: String(body.readableBytes),
            .cacheControl: "no-cache",
        ]
        let cutsBody = method == .get && plan.cutOffset(bodyLength: body.readableBytes) != nil
        let ticket = requestLog?.append(
            .init(
                method: method.rawValue,
                path: path,
                range: request.headers[.range],
                status: 200,
                bytesSent: 0,
                fault: cutsBody ? plan.fault : .none,
                headers: Self.recordedHeaders(request.head)
            )
        )
        guard method == .get else { return Response(status: .ok, headers: headers, body: ResponseBody()) }
        let cut = cutsBody ? plan.cutOffset(bodyLength: body.readableBytes) : nil
        let action = plan.action
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody(contentLength: body.readableBytes) { writer in
                var rest = body
                if let cut, let head = rest.readSlice(length: cut) {
                    if let ticket { requestLog?.addBytesSent(head.readableBytes, to: ticket) }
                    try await writer.write(head)
                    try await injectFault(action, into: channel)
                }
                if let ticket { requestLog?.addBytesSent(rest.readableBytes, to: ticket) }
                try await writer.write(rest)
                try await writer.finish(nil)
            }
        )
    }

    /// Pauses for a stall; for a reset or a truncation, closes the connection and throws so nothing more is sent.
    private func injectFault(_ action: FaultPlan.Action, into channel: any Channel) async throws {
        switch action {
        case .stall(_, let milliseconds):
            try await Task.sleep(for: .milliseconds(milliseconds))
        case .reset:
            // SO_LINGER with a zero timeout makes close() send RST instead of FIN; the channel is closed here, in
            // full, because the server would otherwise half-close its output (FIN) first.
            if let sockets = channel as? any SocketOptionProvider {
                try? await sockets.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
            }
            try? await channel.close()
            throw InjectedConnectionFault(fault: .reset)
        case .truncate:
            // Hummingbird closes the connection (FIN) when a body writer throws.
            throw InjectedConnectionFault(fault: .truncate)
        case .none, .error:
            break
        }
    }

    private func errorResponse(tooManyRequests: Bool, method: HTTPRequest.Method, path: String, range: String?, head: HTTPRequest) -> Response {
        let status: HTTPResponse.Status = tooManyRequests ? .tooManyRequests : .serviceUnavailable
        var headers: HTTPFields = [.contentType: "text/plain; charset=utf-8"]
        if tooManyRequests {
            headers[.retryAfter] = "1"
        }
        let text =
            tooManyRequests
            ? "too many requests (injected by the origin's network conditions)\n"
            : "service unavailable (injected by the origin's network conditions)\n"
        let body = ByteBuffer(string: text)
        record(method, path, range, status, head, bytesSent: method == .head ? 0 : body.readableBytes, fault: .error)
        if method == .head {
            headers[.contentLength] = String(body.readableBytes)
            return Response(status: status, headers: headers, body: ResponseBody())
        }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: body))
    }

    /// The request headers the log keeps: those a client chooses per host (`Cookie`) or per user (`User-Agent`,
    /// `Referer`), and the `Host` it addressed.
    static func recordedHeaders(_ head: HTTPRequest) -> [String: String] {
        var recorded: [String: String] = [:]
        if let authority = head.authority { recorded["host"] = authority }
        for field in head.headerFields where ["cookie", "user-agent", "referer"].contains(field.name.canonicalName) {
            recorded[field.name.canonicalName] = recorded[field.name.canonicalName].map { $0 + "; " + field.value } ?? field.value
        }
        return recorded
    }

    private func record(
        _ method: HTTPRequest.Method,
        _ path: String,
        _ range: String?,
        _ status: HTTPResponse.Status,
        _ head: HTTPRequest,
        bytesSent: Int = 0,
        fault: NetworkFault = .none
    ) {
        _ = requestLog?.append(
            .init(
                method: method.rawValue,
                path: path,
                range: range,
                status: Int(status.code),
                bytesSent: bytesSent,
                fault: fault,
                headers: Self.recordedHeaders(head)
            )
        )
    }

    private func rawPath(_ target: String) -> String {
        String(target.prefix { $0 != "?" && $0 != "#" })
    }

    static func ifRange(_ value: String?, matches file: ServedFile) -> Bool {
        ByteRangeRequest.ifRange(value, entityTag: file.entityTag, lastModified: file.lastModified)
    }
}
