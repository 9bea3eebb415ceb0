import Foundation
import Hummingbird
import KeyDelivery
import MediaCrypto
import NIOCore
import OfflinePackage
import StowageCore
import Synchronization

/// Answers the player's requests for one session: playlists without key tags, files decrypted on the fly.
///
/// Every request under the session path re-checks the gate (package still there, lease or identity keys still valid
/// at the clock's time) before anything is read; a refusal is a 403 (410 once the package is deleted) with the
/// reason in the body and a line in `logs/error.log`. Anything outside the session path is a 404 that reveals nothing.
struct PlaybackResponder: HTTPResponder {
    typealias Context = PlaybackRequestContext

    /// What the gate granted, renewed while a live recording adds files and keys (``RecordingAuthorization``).
    let granted: RecordingAuthorization
    var authorization: PlaybackAuthorization { granted.current }
    let gate: PlaybackGate
    let sessionPath: PlaybackSessionPath
    /// The entry URL serves the multivariant playlist once.
    let entry: EntryLatch
    let logs: PlaybackLogs
    let initSections: InitSectionCache
    /// Playlists served in this session, made clear once per version of their bytes.
    let playlists: ClearPlaylistCache
    /// Files of online renditions, fetched and decrypted in memory.
    let onlineFiles: OnlineFiles
    /// Files whose SHA-256 was checked in this session, so a byte range needs no whole-file hash.
    let verified: VerifiedFiles
    let chunkSize: Int
    /// How long a request for a file a running download has not brought yet waits for it.
    let downloadWait: Duration
    /// How often such a request looks again.
    let downloadPoll: Duration
    /// Told when the session must end (the package was deleted).
    let end: @Sendable (PlaybackEnd.Reason) -> Void
    /// The path of the request the server sends itself before the player comes (``ServerWarmUp``): answered as any
    /// path outside the session, but not logged. Random, so no one else can send it.
    let warmUpPath = "/" + UUID().uuidString.lowercased()

    /// One request of the player's: the session path routed, the gate checked again, then a playlist or a file.
    func respond(to request: Request, context: Context) async throws -> Response {
        let started = ContinuousClock.now
        let method = request.method.rawValue
        if request.uri.path == warmUpPath {
            rehearseEntry(request: request, context: context)
            return Self.text(.notFound, "not found")
        }
        guard let encoded = admit(request, context: context, started: started) else { return Self.text(.notFound, "not found") }
        let relative = encoded.removingPercentEncoding ?? encoded
        let exchange = Exchange(request: request, method: method, uri: "/" + relative, started: started)
        guard request.method == .get || request.method == .head else {
            return exchange.reply(.methodNotAllowed, "only GET and HEAD", logs: logs)
        }
        if let refusal = gate.recheck(authorization) {
            logs.error(uri: exchange.uri, refusal)
            if refusal.reason == .packageDeleted {
                end(.packageDeleted)
                return exchange.reply(.gone, refusal.description, logs: logs)
            }
            return exchange.reply(.forbidden, refusal.description, logs: logs)
        }
        guard PackageDirectory.isSafeRelativePath(relative) else { return exchange.reply(.notFound, "not found", logs: logs) }
        if relative == authorization.manifest.multivariantPlaylist || authorization.playlists[relative] != nil {
            return await playlistResponse(relative, exchange)
        }
        return await fileResponse(relative, exchange)
    }

    /// The session-relative path of a request under the session, or nil (logged) for anything else. The entry URL
    /// (the command line's) serves the multivariant playlist once, to a process of this server's own user. Anything
    /// else, a second use, or another user's process (which may have read the URL from the player's command line)
    /// reveals nothing and leaves the URL to the real player.
    private func admit(_ request: Request, context: Context, started: ContinuousClock.Instant) -> String? {
        let method = request.method.rawValue
        switch sessionPath.target(of: request.uri.path) {
        case .outside:
            logs.request(method: method, uri: "-", status: 404, bytes: nil, seconds: Self.seconds(since: started), rendition: nil)
            return nil
        case .session(let rest):
            return rest
        case .entry(let rest):
            let peer = context.peer()
            let claim: EntryLatch.Claim = rest == authorization.manifest.multivariantPlaylist ? entry.admit(peer) : .reused
            guard claim == .granted else {
                logs.request(method: method, uri: "-", status: 404, bytes: nil, seconds: Self.seconds(since: started), rendition: nil)
                logs.error(
                    uri: "-",
                    claim == .otherUser
                        ? PlaybackError.entryOtherUser(assetId: authorization.assetId, uid: peer?.uid)
                        : PlaybackError.entryReused(assetId: authorization.assetId)
                )
                return nil
            }
            return rest
        }
    }

    /// A playlist, made clear (an online rendition's keys obtained first, so a refusal fails this playlist and not a
    /// segment).
    private func playlistResponse(_ relative: String, _ exchange: Exchange) async -> Response {
        let (method, uri, started) = (exchange.method, exchange.uri, exchange.started)
        let rendition = authorization.playlists[relative].map { authorization.renditions[$0].id }
        if let index = authorization.playlists[relative], index >= authorization.manifest.renditions.count {
            do {
                try await onlineFiles.prepareKeys(of: authorization.renditions[index], in: authorization)
            } catch {
                return refuse(error, method: method, uri: uri, started: started, rendition: rendition)
            }
        }
        do {
            let text = try playlistText(relative, in: authorization)
            return bufferedResponse(
                ByteBuffer(string: text),
                contentType: "application/vnd.apple.mpegurl",
                entityTag: nil,
                request: exchange.request,
                log: accessLog(method: method, uri: uri, started: started, rendition: rendition)
            )
        } catch {
            let failure =
                error as? PlaybackError
                ?? .invalidManifest(assetId: authorization.assetId, reason: "the playlist \(relative) cannot be served: \(error)")
            logs.error(uri: uri, failure)
            return exchange.reply(.internalServerError, failure.description, rendition: rendition, logs: logs)
        }
    }

    /// A file the session lists, perhaps only since a live recording added it: online, arriving, or landed.
    private func fileResponse(_ relative: String, _ exchange: Exchange) async -> Response {
        let (request, method, uri, started) = (exchange.request, exchange.method, exchange.uri, exchange.started)
        var found = authorization.files[relative]
        if found == nil {
            switch await renewedListing() {
            case .renewed(let renewed)?: found = renewed.files[relative]
            case .refused(let refusal)?: return refuse(refusal, method: method, uri: uri, started: started, rendition: nil)
            case nil: break
            }
        }
        guard let listed = found else { return exchange.reply(.notFound, "not found", logs: logs) }
        let rendition = authorization.renditions[listed.renditionIndex]
        if listed.isOnline {
            return await onlineResponse(listed, rendition: rendition, request: request, uri: uri, started: started)
        }
        // A package still downloading: a cbcs segment's init section once it has landed, then a plain GET of a
        // segment a transfer is writing now as it arrives, else the file once it has landed.
        var role = listed
        var initRole: FileRole?
        let waitStarted = ContinuousClock.now
        do {
            if case .segment(let initIndex?) = role.kind, rendition.initSections.indices.contains(initIndex),
                let section = authorization.files[rendition.initSections[initIndex].path]
            {
                initRole = try await landed(section)
            }
            if request.method == .get, request.headers[.range] == nil, case .segment = role.kind, let part = try await arriving(role) {
                return arrivingResponse(
                    role,
                    initRole: initRole,
                    part: part,
                    rendition: rendition,
                    uri: uri,
                    started: started,
                    waitStarted: waitStarted
                )
            }
            role = try await landed(listed)
        } catch {
            return refuse(error, method: method, uri: uri, started: started, rendition: rendition.id, waited: Self.seconds(since: waitStarted))
        }
        let fileLogs = self.logs
        let firstByte = FirstByte()
        let waited = listed.file.sha256 == nil ? Self.seconds(since: waitStarted) : nil
        let log: @Sendable (Int, Int?) -> Void = { status, bytes in
            fileLogs.request(
                method: method,
                uri: uri,
                status: status,
                bytes: bytes,
                seconds: Self.seconds(since: started),
                rendition: rendition.id,
                firstByte: firstByte.seconds(since: started),
                waited: waited
            )
        }
        let contentType = Self.contentType(of: relative, kind: rendition.kind)
        do {
            switch role.kind {
            case .initSection:
                let prepared = try initSections.prepare(role, in: authorization)
                return bufferedResponse(
                    ByteBuffer(bytes: prepared.bytes),
                    contentType: contentType,
                    entityTag: Self.entityTag(of: role.file),
                    request: request,
                    log: log
                )
            case .segment:
                return try await segmentResponse(role, initRole: initRole, contentType: contentType, exchange, firstByte: firstByte, log: log)
            }
        } catch {
            return refuse(error, method: method, uri: uri, started: started, rendition: rendition.id)
        }
    }

    /// The session's grant renewed for a file a live recording listed (perhaps with its key) after the session began.
    /// Its key may still be on its way (the recording fetches segments while it obtains their keys): that is waited
    /// for, as a file still downloading is, at most `downloadWait`; any other refusal is what the player gets, not a 404.
    private func renewedListing() async -> RecordingAuthorization.Renewal? {
        var renewal = granted.renew(through: gate)
        let waitStarted = ContinuousClock.now
        while case .refused(let refusal)? = renewal, refusal.reason == .keysPending, ContinuousClock.now - waitStarted < downloadWait {
            try? await Task.sleep(for: .milliseconds(100))
            renewal = granted.renew(through: gate, waiting: true)
        }
        return renewal
    }

    /// A landed segment, decrypted as it streams, whole or the range asked for (HEAD, Range and If-Range as RFC 9110).
    private func segmentResponse(
        _ role: FileRole,
        initRole: FileRole?,
        contentType: String,
        _ exchange: Exchange,
        firstByte: FirstByte,
        log: @escaping @Sendable (Int, Int?) -> Void
    ) async throws(PlaybackError) -> Response {
        let request = exchange.request
        var prepared = try segmentStream(role, initRole: initRole)
        // Cut inside a PES packet that a neighbouring segment, still downloading, begins or finishes: wait for it.
        // Twice at most: what the end needs shows only once the previous segment has let the start through.
        for _ in 0..<2 {
            let needed = prepared.neighboursNeeded()
            guard needed.previous || needed.next else { break }
            if needed.previous, let previous = segment(besides: role, offset: -1) { _ = try await landed(previous) }
            if needed.next, let next = segment(besides: role, offset: 1) { _ = try await landed(next) }
            prepared = try segmentStream(role, initRole: initRole)
        }
        let plan = prepared
        let length = try plan.servedLength()
        let entityTag = Self.entityTag(of: role.file)
        var headers: HTTPFields = [.contentType: contentType, .cacheControl: "no-store", .acceptRanges: "bytes"]
        if let entityTag { headers[.eTag] = entityTag }
        let wanted =
            ByteRangeRequest.ifRange(request.headers[.ifRange], entityTag: entityTag ?? "", lastModified: nil)
            ? ByteRangeRequest(header: request.headers[.range], size: Int(length)) : .whole
        let range: ClosedRange<Int64>?
        switch wanted {
        case .whole:
            range = nil
        case .partial(let bytes):
            range = Int64(bytes.lowerBound)...Int64(bytes.upperBound)
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(length)"
            headers[.contentLength] = "0"
            log(416, 0)
            return Response(status: .rangeNotSatisfiable, headers: headers, body: ResponseBody())
        }
        let status: HTTPResponse.Status = range == nil ? .ok : .partialContent
        let count = range.map { Int64($0.count) } ?? length
        if let range { headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(length)" }
        headers[.contentLength] = String(count)
        if request.method == .head {
            log(Int(status.code), 0)
            return Response(status: status, headers: headers, body: ResponseBody())
        }
        let (verified, chunkSize, fileLogs, uri) = (self.verified, self.chunkSize, self.logs, exchange.uri)
        return Response(
            status: status,
            headers: headers,
            body: ResponseBody(contentLength: Int(count)) { writer in
                do {
                    let bytes =
                        if let range {
                            try await plan.stream(
                                range: range,
                                length: length,
                                into: &writer,
                                verified: verified,
                                chunkSize: chunkSize,
                                firstByte: firstByte.mark
                            )
                        } else {
                            try await plan.stream(into: &writer, length: length, verified: verified, chunkSize: chunkSize, firstByte: firstByte.mark)
                        }
                    try await writer.finish(nil)
                    log(Int(status.code), bytes)
                } catch {
                    // Headers are sent: the only way left to refuse is to cut the response short.
                    if let failure = error as? PlaybackError { fileLogs.error(uri: uri, failure) }
                    log(Int(status.code), nil)
                    throw error
                }
            }
        )
    }

    /// One request as the logs see it.
    struct Exchange {
        let request: Request
        let method: String
        /// The session-relative path, with a leading slash.
        let uri: String
        let started: ContinuousClock.Instant

        /// A short text answer, logged.
        func reply(_ status: HTTPResponse.Status, _ body: String, rendition: String? = nil, logs: PlaybackLogs) -> Response {
            logs.request(
                method: method,
                uri: uri,
                status: Int(status.code),
                bytes: nil,
                seconds: PlaybackResponder.seconds(since: started),
                rendition: rendition
            )
            return PlaybackResponder.text(status, body)
        }
    }

    /// The playlist at `relative` as the player gets it (``ClearPlaylistCache``): keys pointed at the session, its
    /// URIs relative to it.
    private func playlistText(_ relative: String, in authorization: PlaybackAuthorization) throws -> String {
        let url = try authorization.package.url(forRelativePath: relative)
        let isMultivariant = relative == authorization.manifest.multivariantPlaylist
        let bytes: [UInt8]
        if let online = authorization.online, let text = isMultivariant ? online.plan.multivariantPlaylist : online.plan.playlists[relative] {
            // The source's offer: stored and online renditions side by side, or an online rendition's playlist.
            bytes = Array(text.utf8)
        } else {
            guard let handle = try? ChunkedFile(url), let size = handle.size else {
                throw PlaybackError.segmentMissing(assetId: authorization.assetId, path: relative)
            }
            bytes = try handle.read(count: Int(size), at: 0)
        }
        return try playlists.clearText(of: bytes, path: relative, url: url, sessionPrefix: isMultivariant ? sessionPath.description : nil)
    }

    /// Makes every playlist of the session ready before the player is given the URL, so its first requests are served
    /// from memory: the multivariant playlist's time to first byte was 17.6 ms against nginx's 1.2 ms, most of it
    /// work done once (reading and rewriting the playlist, the gate's first read of the key store, the runtime's first
    /// use of these types). What fails here is left for the request to report, in its own words.
    func prepare() {
        let authorization = granted.current
        guard gate.recheck(authorization) == nil else { return }
        for relative in [authorization.manifest.multivariantPlaylist] + authorization.playlists.keys.sorted() {
            _ = try? playlistText(relative, in: authorization)
        }
    }

    /// Everything needed to stream a segment, checked before the response starts.
    /// `at` reads another file than the package's (the part file a transfer is writing).
    private func segmentStream(_ role: FileRole, initRole: FileRole?, at partFile: URL? = nil) throws(PlaybackError) -> SegmentStream {
        let file = role.file
        let assetId = authorization.assetId
        guard let url = partFile ?? (try? authorization.package.url(forRelativePath: file.path)), let size = FileSystem.size(of: url) else {
            throw .segmentMissing(assetId: assetId, path: file.path)
        }
        if let expected = file.size, expected != size {
            throw .segmentModified(assetId: assetId, path: file.path, expected: expected, found: size)
        }
        guard let key = file.key else { return SegmentStream(assetId: assetId, url: url, file: file, decryption: nil) }
        var decryption = try Decryptions.wholeFile(key, path: file.path, in: authorization)
        if decryption.method.isSampleEncryption {
            guard let handle = try? ChunkedFile(url), let prefix = try? handle.read(count: SegmentContainer.detectionLength, at: 0) else {
                throw .segmentMissing(assetId: assetId, path: file.path)
            }
            decryption.container = SegmentContainer.detect(prefix)
            if decryption.container == .fragmentedMP4 {
                guard let initRole else {
                    throw .unsupportedEncryption(assetId: assetId, path: file.path, detail: "a SAMPLE-AES fMP4 segment without an init section")
                }
                decryption.initSection = try initSections.prepare(initRole, in: authorization).protection
                guard decryption.initSection?.protectsAnyTrack == true else {
                    throw .unsupportedEncryption(
                        assetId: assetId,
                        path: file.path,
                        detail: "the playlist sample-encrypts it, but its init section \(initRole.file.path) protects no track (no sinf box)"
                    )
                }
            }
        }
        if decryption.method == .sampleAES, decryption.container == .transportStream {
            decryption.neighbours = neighbours(of: role)
        }
        return SegmentStream(assetId: assetId, url: url, file: file, decryption: decryption)
    }

    /// The segments around a SAMPLE-AES MPEG-TS segment, with the sizes of those a running download has landed since
    /// authorization.
    private func neighbours(of role: FileRole) -> TransportStreamNeighbours {
        guard let index = role.segmentIndex, !role.isOnline, authorization.renditions.indices.contains(role.renditionIndex) else {
            return .none
        }
        var rendition = authorization.renditions[role.renditionIndex]
        if let download = authorization.download {
            for other in [index - 1, index + 1] where rendition.segments.indices.contains(other) {
                if let path = rendition.segments[other].file?.path, rendition.segments[other].file?.size == nil,
                    let done = download.completedFile(path)
                {
                    rendition.segments[other].file?.size = done.size
                }
            }
        }
        return rendition.transportStreamNeighbours(ofSegmentAt: index, in: authorization.package) { authorization.keys[$0.keyId] }
    }

    /// The role of the segment `offset` places from `role`'s in its rendition.
    private func segment(besides role: FileRole, offset: Int) -> FileRole? {
        guard let index = role.segmentIndex, authorization.renditions.indices.contains(role.renditionIndex) else { return nil }
        let segments = authorization.renditions[role.renditionIndex].segments
        guard segments.indices.contains(index + offset), let path = segments[index + offset].file?.path else { return nil }
        return authorization.files[path]
    }

    /// The part file a transfer is writing `role` into now, once it holds enough bytes to tell the container; nil
    /// when the file has landed first (the caller serves it as usual). A running download is asked to fetch it next
    /// (``DownloadInProgress/want(_:)``); with none running, the session fetches it from the source
    /// (``DownloadInProgress/fetchFromSource(_:)``) in a task of its own, which completes even if the player goes
    /// away. Waits at most ``downloadWait`` for the transfer to start, then throws `segment_downloading` (503); throws
    /// `segment_not_downloaded` (404) when the source cannot provide the file.
    private func arriving(_ role: FileRole) async throws(PlaybackError) -> URL? {
        guard role.file.sha256 == nil, let download = authorization.download else { return nil }
        let path = role.file.path
        let started = ContinuousClock.now
        let fetched = SourceFetch()
        var fetching = false
        var asked = false
        while true {
            if download.completedFile(path) != nil { return nil }
            if let part = download.partialFile(path), let size = FileSystem.size(of: part), size >= Int64(SegmentContainer.detectionLength) {
                return part
            }
            if download.isRunning() {
                if !asked {
                    download.want(path)
                    asked = true
                }
            } else if !fetching {
                fetching = true
                Task {
                    do throws(PlaybackError) {
                        _ = try await download.fetchFromSource(path)
                        fetched.outcome.withLock { $0 = .success(()) }
                    } catch {
                        fetched.outcome.withLock { $0 = .failure(error) }
                    }
                }
            } else if let outcome = fetched.outcome.withLock({ $0 }) {
                if case .failure(let error) = outcome { throw error }
                return nil
            }
            guard ContinuousClock.now - started < downloadWait else {
                throw .segmentDownloading(assetId: authorization.assetId, path: path, waited: Self.seconds(since: started))
            }
            do {
                try await Task.sleep(for: Self.arrivingPoll)
            } catch {
                throw .segmentDownloading(assetId: authorization.assetId, path: path, waited: Self.seconds(since: started))
            }
        }
    }

    /// How often a transfer in progress is looked at: its part file for new bytes, the record for its end.
    static let arrivingPoll: Duration = .milliseconds(20)

    /// A segment streamed from `part` while a transfer writes it (``SegmentStream/streamArriving``): `200`, chunked,
    /// with no validators (the next request for it, once landed, gets `ETag`, length and ranges).
    private func arrivingResponse(
        _ role: FileRole,
        initRole: FileRole?,
        part: URL,
        rendition: PackageRendition,
        uri: String,
        started: ContinuousClock.Instant,
        waitStarted: ContinuousClock.Instant
    ) -> Response {
        let plan: SegmentStream
        do {
            plan = try segmentStream(role, initRole: initRole, at: part)
        } catch {
            return refuse(error, method: "GET", uri: uri, started: started, rendition: rendition.id)
        }
        let waited = Self.seconds(since: waitStarted)
        let fileLogs = self.logs
        let firstByte = FirstByte()
        let log: @Sendable (Int?) -> Void = { bytes in
            fileLogs.request(
                method: "GET",
                uri: uri,
                status: 200,
                bytes: bytes,
                seconds: Self.seconds(since: started),
                rendition: rendition.id,
                firstByte: firstByte.seconds(since: started),
                waited: waited
            )
        }
        let download = authorization.download
        let path = role.file.path
        let (stall, chunkSize) = (downloadWait, self.chunkSize)
        // The neighbouring segments as they land, for PES packets split between segments.
        let responder = self
        let neighbours: @Sendable () -> TransportStreamNeighbours = { responder.neighbours(of: role) }
        let headers: HTTPFields = [.contentType: Self.contentType(of: path, kind: rendition.kind), .cacheControl: "no-store"]
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody { writer in
                do {
                    let bytes = try await plan.streamArriving(
                        into: &writer,
                        landed: { download?.completedFile(path) },
                        neighbours: neighbours,
                        poll: Self.arrivingPoll,
                        stall: stall,
                        chunkSize: chunkSize,
                        firstByte: firstByte.mark
                    )
                    try await writer.finish(nil)
                    log(bytes)
                } catch {
                    // Headers are sent: the only way left to refuse is to cut the response short.
                    if let failure = error as? PlaybackError { fileLogs.error(uri: uri, failure) }
                    log(nil)
                    throw error
                }
            }
        )
    }

    /// `role` as it is on disk now. Files of a complete package are returned as they are. A file of a package still
    /// downloading gets the downloader's size and checksum once it has landed; until then this asks the running
    /// download to fetch it next (``DownloadInProgress/want(_:)``: the player seeked ahead) and waits for it (polling
    /// every ``downloadPoll``, at most ``downloadWait``), then throws `segment_downloading` (503). With no download
    /// running it is fetched from the source into the package (``DownloadInProgress/fetchFromSource(_:)``), or throws
    /// `segment_not_downloaded` (404) when the source cannot provide it.
    private func landed(_ role: FileRole) async throws(PlaybackError) -> FileRole {
        guard role.file.sha256 == nil, let download = authorization.download else { return role }
        let started = ContinuousClock.now
        var asked = false
        while true {
            if let done = download.completedFile(role.file.path) {
                var landed = role
                landed.file.size = done.size
                landed.file.sha256 = done.sha256
                return landed
            }
            guard download.isRunning() else {
                let done = try await download.fetchFromSource(role.file.path)
                var landed = role
                landed.file.size = done.size
                landed.file.sha256 = done.sha256
                return landed
            }
            if !asked {
                // The player is ahead of the download: the download fetches this file next.
                download.want(role.file.path)
                asked = true
            }
            guard ContinuousClock.now - started < downloadWait else {
                throw .segmentDownloading(assetId: authorization.assetId, path: role.file.path, waited: Self.seconds(since: started))
            }
            do {
                try await Task.sleep(for: downloadPoll)
            } catch {
                throw .segmentDownloading(assetId: authorization.assetId, path: role.file.path, waited: Self.seconds(since: started))
            }
        }
    }

    /// A file of an online rendition: fetched from the source and decrypted in memory, then served like a playlist
    /// (HEAD, Range and If-Range on the clear bytes). A source that cannot be reached is `502`, a key the key server
    /// will not grant `403`; both go to the error log.
    private func onlineResponse(
        _ role: FileRole,
        rendition: PackageRendition,
        request: Request,
        uri: String,
        started: ContinuousClock.Instant
    ) async -> Response {
        let method = request.method.rawValue
        var initRole: FileRole?
        if case .segment(let initIndex?) = role.kind, rendition.initSections.indices.contains(initIndex) {
            initRole = authorization.files[rendition.initSections[initIndex].path]
        }
        do {
            let bytes = try await onlineFiles.clear(role, initRole: initRole, in: authorization)
            return bufferedResponse(
                ByteBuffer(bytes: bytes),
                contentType: Self.contentType(of: role.file.path, kind: rendition.kind),
                entityTag: nil,
                request: request,
                log: accessLog(method: method, uri: uri, started: started, rendition: rendition.id)
            )
        } catch {
            return refuse(error, method: method, uri: uri, started: started, rendition: rendition.id)
        }
    }

    /// The answer to a file or playlist the session cannot serve: ``status(for:)``, the reason as the body (with
    /// `Retry-After` on a `503`), and a line in the access and error logs.
    private func refuse(
        _ error: PlaybackError,
        method: String,
        uri: String,
        started: ContinuousClock.Instant,
        rendition: String?,
        waited: Double? = nil
    ) -> Response {
        logs.error(uri: uri, error)
        let status = Self.status(for: error)
        logs.request(
            method: method,
            uri: uri,
            status: Int(status.code),
            bytes: nil,
            seconds: Self.seconds(since: started),
            rendition: rendition,
            waited: waited
        )
        var response = Self.text(status, error.description)
        if status == .serviceUnavailable { response.headers[.retryAfter] = "2" }
        return response
    }

    /// The HTTP status of a refusal: the player may ask again (503), the file is not there (404), the source failed
    /// (502), the key is not granted (403), anything else is the session's fault (500).
    static func status(for error: PlaybackError) -> HTTPResponse.Status {
        switch error.reason {
        case .segmentDownloading: .serviceUnavailable
        case .segmentNotDownloaded, .segmentMissing: .notFound
        case .onlineUnavailable: .badGateway
        case .keysPending: .serviceUnavailable
        case .keyMissing, .onlineKeyRefused: .forbidden
        case let lease where LeaseError.reasons.contains(lease): .forbidden
        default: .internalServerError
        }
    }

    /// What the entry request does before it answers, done by the server's own warm-up request (``ServerWarmUp``) so
    /// that the player's first request does not pay for the runtime's first use of it: the lookup of the process at
    /// the other end (here this process), the gate's re-check, and the multivariant playlist made into a response.
    /// Nothing is claimed, logged or sent: the warm-up gets its 404.
    private func rehearseEntry(request: Request, context: Context) {
        _ = context.peer()
        _ = gate.recheck(authorization)
        guard let text = try? playlistText(authorization.manifest.multivariantPlaylist, in: authorization) else { return }
        _ = bufferedResponse(
            ByteBuffer(string: text),
            contentType: "application/vnd.apple.mpegurl",
            entityTag: nil,
            request: request,
            log: { _, _ in }
        )
    }

    /// The access-log line of a response served from memory, once its status and size are known.
    private func accessLog(method: String, uri: String, started: ContinuousClock.Instant, rendition: String?) -> (Int, Int?) -> Void {
        { status, bytes in
            logs.request(method: method, uri: uri, status: status, bytes: bytes, seconds: Self.seconds(since: started), rendition: rendition)
        }
    }

    /// A response from bytes in memory (a playlist, an init section), honouring HEAD, Range and If-Range.
    private func bufferedResponse(
        _ buffer: ByteBuffer,
        contentType: String,
        entityTag: String?,
        request: Request,
        log: (Int, Int?) -> Void
    ) -> Response {
        var headers: HTTPFields = [.contentType: contentType, .cacheControl: "no-store", .acceptRanges: "bytes"]
        if let entityTag { headers[.eTag] = entityTag }
        let length = buffer.readableBytes
        let wanted =
            ByteRangeRequest.ifRange(request.headers[.ifRange], entityTag: entityTag ?? "", lastModified: nil)
            ? ByteRangeRequest(header: request.headers[.range], size: length) : .whole
        var body = buffer
        var status = HTTPResponse.Status.ok
        switch wanted {
        case .whole:
            break
        case .partial(let bytes):
            status = .partialContent
            body = buffer.getSlice(at: buffer.readerIndex + bytes.lowerBound, length: bytes.count) ?? ByteBuffer()
            headers[.contentRange] = "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(length)"
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(length)"
            headers[.contentLength] = "0"
            log(416, 0)
            return Response(status: .rangeNotSatisfiable, headers: headers, body: ResponseBody())
        }
        headers[.contentLength] = String(body.readableBytes)
        if request.method == .head {
            log(Int(status.code), 0)
            return Response(status: status, headers: headers, body: ResponseBody())
        }
        log(Int(status.code), body.readableBytes)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: body))
    }

    /// A strong entity tag for a package file as served: its stored SHA-256 (the served bytes are a function of it).
    private static func entityTag(of file: PackageFile) -> String? {
        file.sha256.map { "\"\($0.prefix(32).lowercased())\"" }
    }

    fileprivate static func text(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(
            status: status,
            headers: [.contentType: "text/plain; charset=utf-8", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body.isEmpty ? "" : body + "\n"))
        )
    }

    fileprivate static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    private static func contentType(of path: String, kind: PackageRendition.Kind) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "ts": "video/mp2t"
        case "mp4", "m4s", "m4v", "cmfv", "cmfa":
            kind == .audio ? "audio/mp4" : "video/mp4"
        case "aac": "audio/aac"
        case "ac3": "audio/ac3"
        case "ec3": "audio/eac3"
        case "vtt", "webvtt": "text/vtt"
        default: "application/octet-stream"
        }
    }
}

/// The request context of the playback server: Hummingbird's basics plus the connection's two ends, so that the entry
/// URL can tell which local process asks (``LoopbackPeer``).
struct PlaybackRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    let localAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        localAddress = source.channel.localAddress
    }

    /// The local process that sent the request, nil when it cannot be told.
    func peer() -> LoopbackPeer? {
        guard let client = remoteAddress, let clientIP = client.ipAddress, let clientPort = client.port,
            let server = localAddress, let serverIP = server.ipAddress, let serverPort = server.port
        else { return nil }
        return LoopbackPeer.find(client: (clientIP, clientPort), server: (serverIP, serverPort))
    }
}

/// How a fetch from the source for a waiting player ended, once it has.
final class SourceFetch: Sendable {
    let outcome = Mutex<Result<Void, PlaybackError>?>(nil)
}

/// When a streamed response sent its first body byte.
final class FirstByte: Sendable {
    private let instant = Mutex<ContinuousClock.Instant?>(nil)

    /// Records now, the first time.
    func mark() {
        instant.withLock { if $0 == nil { $0 = .now } }
    }

    /// Seconds from `start` to the first byte; nil when none was sent (or the body was in memory: then it is the
    /// whole time taken).
    func seconds(since start: ContinuousClock.Instant) -> Double? {
        instant.withLock { $0 }.map { instant in
            let elapsed = instant - start
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
    }
}

/// The authorization a session serves, which a live recording outgrows: its manifest lists segments (and its lease
/// keys) recorded after the session began. A request for a file the authorization does not list renews it through
/// the gate, at most every 250 ms: every rule applies again (package, files landed, lease, keys), and a lease already
/// playing records no new first play, so the playback window stays where it started.
final class RecordingAuthorization: Sendable {
    private let state: Mutex<(authorization: PlaybackAuthorization, renewed: ContinuousClock.Instant?, refusal: PlaybackError?)>

    init(_ authorization: PlaybackAuthorization) {
        state = Mutex((authorization, nil, nil))
    }

    var current: PlaybackAuthorization { state.withLock { $0.authorization } }

    /// What renewing gave.
    enum Renewal {
        case renewed(PlaybackAuthorization)
        /// The gate refused: the recording's new keys are not held yet (`keys_pending`), or their lease refuses.
        case refused(PlaybackError)
    }

    /// The authorization renewed, for a package still recording; nil when it is not one, or was renewed within the
    /// last 250 ms (then the last refusal stands, if the gate refused). `waiting`: a request waiting for a key asks
    /// again every 100 ms, past the throttle.
    func renew(through gate: PlaybackGate, waiting: Bool = false) -> Renewal? {
        let now = ContinuousClock.now
        let (previous, standing): (PlaybackAuthorization?, PlaybackError?) = state.withLock { state in
            guard state.authorization.isDownloading, let recording = state.authorization.manifest.recording, !recording.hasEnded else {
                return (nil, nil)
            }
            if !waiting, let renewed = state.renewed, now - renewed < .milliseconds(250) { return (nil, state.refusal) }
            state.renewed = now
            return (state.authorization, nil)
        }
        if let standing { return .refused(standing) }
        guard let previous else { return nil }
        var renewed: PlaybackAuthorization
        do {
            renewed = try gate.authorize(assetId: previous.assetId, download: previous.download)
        } catch {
            state.withLock { $0.refusal = error }
            return .refused(error)
        }
        if let online = previous.online { renewed = renewed.addingOnline(online) }
        state.withLock {
            $0.authorization = renewed
            $0.refusal = nil
        }
        return .renewed(renewed)
    }
}
