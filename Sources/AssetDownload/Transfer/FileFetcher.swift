import AsyncHTTPClient
import Foundation
import KeyDelivery
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflinePackage
import StowageCore
import StowageCrypto

#if canImport(Glibc)
import Glibc
#endif

/// What one transfer attempt did.
struct TransferOutcome: Sendable {
    var status: Int
    var bytes: Int64
    /// Size and SHA-256 of the whole part file, hashed as it was written; nil when `check` has to read it back.
    var whole: CompletedFile? = nil
}

/// A file whose bytes are all in `NAME.part`, checked and hashed, waiting for ``FileFetcher/place(_:)``.
struct StagedFile: Sendable {
    var part: URL
    var destination: URL
    var done: CompletedFile
}

/// Why one attempt failed, and whether another may succeed.
struct TransferFailure: Error, Sendable {
    enum Kind: Sendable { case retryable, networkDown, fatalStatus, diskFull, local, tooLarge }
    var kind: Kind
    var status: Int?
    var retryAfter: Double?
    var domain: String
    var code: String
    var comment: String
    /// Bytes written by the attempt before it failed (progress resets the error count).
    var advanced: Int64 = 0

    /// More announced or sent than the file may hold (``FileFetcher/maximumBytes(estimate:)``): never retried.
    static func tooLarge(status: Int, _ comment: String, advanced: Int64 = 0) -> TransferFailure {
        TransferFailure(kind: .tooLarge, status: status, domain: "transfer", code: "too_large", comment: comment, advanced: advanced)
    }
}

/// Streams one package file from the network into place: appended to `NAME.part` as bytes arrive (SHA-256 computed on
/// the way, over what a partial file already held first), resumed with an HTTP Range request where a partial file
/// exists, then (``place(_:)``) fsynced and renamed when whole. Never holds more than one network chunk in memory.
struct FileFetcher: Sendable {
    struct Configuration: Sendable {
        /// Extra headers, sent only to the hosts they are scoped to.
        var headers: ScopedHeaders
        /// Bound on waiting for the response head.
        var headTimeout: TimeAmount
        /// Bound on the whole transfer of one file.
        var transferTimeout: Duration
        var retry: RetryPolicy
        /// The rate shared with every other transfer (``DownloadSession/Configuration/bandwidth``).
        var link: TokenBucket? = nil
        /// The most bytes of one file, replacing ``FileFetcher/maximumBytes(estimate:)`` (tests).
        var maximumFileBytes: Int64? = nil
    }

    /// The rendition's average file as far as known (``OfflinePackage/PackageRendition/expectedBytes``): the estimate
    /// ``fetch(_:to:part:estimate:log:)`` bounds a file by, and the space a download waits for.
    static func averageFileBytes(of rendition: PackageRendition) -> Int64 {
        rendition.files.isEmpty ? 0 : rendition.expectedBytes / Int64(rendition.files.count)
    }

    /// The most bytes one file without a byte range may have: 16 times the rendition's average file as its BANDWIDTH
    /// gives it (a segment can be several times the average; 16 times is not a segment), at least 256 MiB and at most
    /// 4 GiB. A server that announces more in Content-Length, or sends more, is refused (`segment_too_large`): without a
    /// bound, a hostile server could send bytes without end into the package until the disk is full.
    static func maximumBytes(estimate: Int64) -> Int64 {
        let (scaled, overflow) = max(0, estimate).multipliedReportingOverflow(by: 16)
        return min(4 << 30, max(256 << 20, overflow ? Int64.max : scaled))
    }

    /// The clients, chosen per URL (a proxy, or direct).
    let client: HTTPRoutes
    let configuration: Configuration

    /// Buffer size for reading a part file back.
    static let readSize = 1 << 20

    /// Fetches `file` into `destination`'s part file (`NAME.part`, or `part` when given) with retries. Returns it
    /// checked and hashed, for ``place(_:)``.
    ///
    /// `estimate` is the rendition's average file size (``maximumBytes(estimate:)``).
    func fetch(
        _ file: PackageFile,
        to destination: URL,
        part: URL? = nil,
        estimate: Int64,
        log: @escaping @Sendable (_ status: Int?, _ bytes: Int64, _ seconds: Double, _ retries: Int, _ failure: TransferFailure?) -> Void
    ) async throws -> StagedFile {
        let maximumBytes = file.byteRange?.length ?? configuration.maximumFileBytes ?? Self.maximumBytes(estimate: estimate)
        guard let url = URL(string: file.sourceURL) else { throw DownloadError.unsupportedURI(file.sourceURL) }
        let part = part ?? DownloadSession.partFile(of: destination, forPlayer: false)
        var failures = 0
        var networkDownSince: ContinuousClock.Instant?
        while true {
            try Task.checkCancellation()
            let started = ContinuousClock.now
            do {
                let outcome = try await attempt(url: url, file: file, part: part, maximumBytes: maximumBytes)
                log(outcome.status, outcome.bytes, Self.seconds(since: started), failures, nil)
                let done = try check(
                    part: part,
                    file: file.path,
                    sourceURL: file.sourceURL,
                    expectedLength: file.byteRange?.length,
                    whole: outcome.whole
                )
                return StagedFile(part: part, destination: destination, done: done)
            } catch let failure as TransferFailure {
                log(failure.status, failure.advanced, Self.seconds(since: started), failures, failure)
                switch failure.kind {
                case .fatalStatus:
                    throw DownloadError.segmentHTTPStatus(path: file.path, url: file.sourceURL, status: failure.status ?? 0)
                case .tooLarge:
                    // Nothing of it is kept: what a server sends past any segment's size is not worth resuming.
                    try? FileManager.default.removeItem(at: part)
                    throw DownloadError.segmentTooLarge(path: file.path, url: file.sourceURL, limit: maximumBytes)
                case .diskFull:
                    throw DownloadError.insufficientStorage(needed: file.byteRange?.length ?? 0, available: 0)
                case .local:
                    throw DownloadError.segmentFailed(path: file.path, url: file.sourceURL, reason: failure.comment)
                case .networkDown:
                    let since = networkDownSince ?? ContinuousClock.now
                    networkDownSince = since
                    if Self.seconds(since: since) > configuration.retry.networkDownGrace {
                        throw DownloadError.segmentFailed(path: file.path, url: file.sourceURL, reason: failure.comment)
                    }
                    failures = min(failures + 1, 6)
                case .retryable:
                    networkDownSince = nil
                    failures = failure.advanced > 0 ? 1 : failures + 1
                    if failures >= configuration.retry.maximumAttempts {
                        throw DownloadError.segmentFailed(
                            path: file.path,
                            url: file.sourceURL,
                            reason: "\(failure.comment) (after \(failures) attempts)"
                        )
                    }
                }
                try await Task.sleep(for: .seconds(configuration.retry.delay(afterFailures: failures, retryAfter: failure.retryAfter)))
            }
        }
    }

    static func seconds(since instant: ContinuousClock.Instant) -> Double {
        (ContinuousClock.now - instant).inSeconds
    }

    /// One request: from what `part` already holds to the end of the file (or range).
    private func attempt(url: URL, file: PackageFile, part: URL, maximumBytes: Int64) async throws -> TransferOutcome {
        if url.isFileURL { return try copyLocal(url: url, file: file, part: part, maximumBytes: maximumBytes) }
        let have = Self.size(of: part)
        let rangeStart = (file.byteRange?.offset ?? 0) + have
        let rangeEnd = file.byteRange.map { $0.offset + $0.length - 1 }
        if let length = file.byteRange?.length, have >= length {
            return TransferOutcome(status: 0, bytes: 0)
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        for (name, value) in configuration.headers.for(url) { request.headers.add(name: name, value: value) }
        if rangeStart > 0 || rangeEnd != nil {
            request.headers.replaceOrAdd(name: "Range", value: "bytes=\(rangeStart)-\(rangeEnd.map(String.init) ?? "")")
        }
        let transferTimeout = configuration.transferTimeout
        let prepared = request
        return try await withThrowingTaskGroup(of: TransferOutcome?.self) { group in
            group.addTask {
                try await self.stream(
                    request: prepared,
                    url: url,
                    file: file,
                    part: part,
                    have: have,
                    rangeStart: rangeStart,
                    maximumBytes: maximumBytes
                )
            }
            group.addTask {
                try await Task.sleep(for: transferTimeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let outcome = first else {
                throw TransferFailure(
                    kind: .retryable,
                    domain: "transfer",
                    code: "transfer_timeout",
                    comment: "the transfer took longer than \(transferTimeout)"
                )
            }
            return outcome
        }
    }

    private func stream(
        request: HTTPClientRequest,
        url: URL,
        file: PackageFile,
        part: URL,
        have: Int64,
        rangeStart: Int64,
        maximumBytes: Int64
    ) async throws -> TransferOutcome {
        let response: HTTPClientResponse
        do {
            response = try await client.client(for: url).execute(request, deadline: .now() + configuration.headTimeout)
        } catch {
            throw Self.classify(error)
        }
        let status = Int(response.status.code)
        if try Self.isWholeAlready(status: status, headers: response.headers, file: file, have: have) {
            return TransferOutcome(status: status, bytes: 0)
        }
        // Where the body starts relative to what we need: a 200 to a range request starts at byte 0.
        var skip: Int64 = 0
        var keep = have
        if status == 206 {
            guard let start = Self.contentRangeStart(response.headers.first(name: "Content-Range")), start == rangeStart else {
                try? FileManager.default.removeItem(at: part)
                throw TransferFailure(
                    kind: .retryable,
                    status: status,
                    domain: "http",
                    code: "bad_content_range",
                    comment: "unexpected Content-Range"
                )
            }
        } else if rangeStart > 0 {
            if file.byteRange == nil {
                keep = 0  // no range support: start the file again
            } else {
                skip = file.byteRange!.offset + have
            }
        }
        let limit = file.byteRange.map { $0.length - keep }
        let announced = response.headers.first(name: "Content-Length")
        let expected: Int64? = limit ?? (status == 200 ? announced.flatMap(Int64.init) : nil)
        // More announced than the file may hold (digits past Int64 too): refused before a byte is written.
        if limit == nil, let announced, !announced.isEmpty, announced.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            Int64(announced).map({ keep + $0 > maximumBytes }) ?? true
        {
            throw TransferFailure.tooLarge(status: status, "Content-Length \(announced)")
        }
        let fd = open(part.path, O_RDWR | O_CREAT | O_CLOEXEC | (keep == 0 ? O_TRUNC : O_APPEND), 0o600)
        guard fd >= 0 else {
            throw TransferFailure(
                kind: errno == ENOSPC ? .diskFull : .local,
                domain: "storage",
                code: "open_failed",
                comment: String(cString: strerror(errno))
            )
        }
        defer { close(fd) }
        // The digest covers the whole file: what an earlier attempt left comes first.
        var hasher = SHA256Hasher()
        if keep > 0 { try Self.hash(part, into: &hasher) }
        var written: Int64 = 0
        do {
            for try await var chunk in response.body {
                if skip > 0 {
                    let drop = Int(min(Int64(chunk.readableBytes), skip))
                    chunk.moveReaderIndex(forwardBy: drop)
                    skip -= Int64(drop)
                    if chunk.readableBytes == 0 { continue }
                }
                if let limit, written + Int64(chunk.readableBytes) > limit {
                    chunk = chunk.getSlice(at: chunk.readerIndex, length: Int(limit - written)) ?? chunk
                }
                if limit == nil, keep + written + Int64(chunk.readableBytes) > maximumBytes {
                    throw TransferFailure.tooLarge(status: status, "more than \(maximumBytes) bytes", advanced: written)
                }
                try Self.writeAll(fd, chunk, advanced: written)
                chunk.withUnsafeReadableBytes { hasher.update($0) }
                written += Int64(chunk.readableBytes)
                if let limit, written >= limit { break }
                // Under a shared rate the next read waits its turn; the socket fills meanwhile and TCP slows the sender.
                if let wait = configuration.link?.reserve(chunk.readableBytes), wait > .zero { try await Task.sleep(for: wait) }
            }
        } catch let failure as TransferFailure {
            throw failure
        } catch {
            var failure = Self.classify(error)
            failure.advanced = written
            throw failure
        }
        if let expected, written < expected {
            throw TransferFailure(
                kind: .retryable,
                status: status,
                domain: "transfer",
                code: "truncated_body",
                comment: "the body ended after \(written) of \(expected) bytes",
                advanced: written
            )
        }
        return TransferOutcome(
            status: status,
            bytes: written,
            whole: CompletedFile(size: keep + written, sha256: Hex.encode(hasher.finalize()))
        )
    }

    /// Whether a response's status says the part file already holds the whole resource; throws a ``TransferFailure``
    /// (retryable or not) for any status but 200 and 206.
    private static func isWholeAlready(status: Int, headers: HTTPHeaders, file: PackageFile, have: Int64) throws(TransferFailure) -> Bool {
        switch status {
        case 200, 206: return false
        case 416 where file.byteRange == nil && have > 0:
            // The partial file is already the whole resource (killed between the last byte and the rename).
            return true
        case 408, 429, 500...599:
            let retryAfter = headers.first(name: "Retry-After").flatMap(Double.init)
            throw TransferFailure(
                kind: .retryable,
                status: status,
                retryAfter: retryAfter,
                domain: "http",
                code: "http_\(status)",
                comment: "HTTP \(status)"
            )
        default:
            throw TransferFailure(kind: .fatalStatus, status: status, domain: "http", code: "http_\(status)", comment: "HTTP \(status)")
        }
    }

    private func copyLocal(url: URL, file: PackageFile, part: URL, maximumBytes: Int64) throws -> TransferOutcome {
        // Only regular files: a device or a FIFO named by a local playlist (/dev/zero) would be read forever or block
        // at open.
        guard (try? FileManager.default.attributesOfItem(atPath: url.path)[.type] as? FileAttributeType) == .typeRegular else {
            throw TransferFailure(kind: .fatalStatus, status: 404, domain: "file", code: "not_regular", comment: "\(url.path) is not a regular file")
        }
        guard let source = try? ChunkedFile(url) else {
            throw TransferFailure(kind: .fatalStatus, status: 404, domain: "file", code: "not_found", comment: "\(url.path) cannot be read")
        }
        let fd = open(part.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw TransferFailure(kind: .local, domain: "storage", code: "open_failed", comment: String(cString: strerror(errno))) }
        defer { close(fd) }
        // One byte past the bound tells a file that is too large.
        let length = file.byteRange?.length ?? (maximumBytes == .max ? .max : maximumBytes + 1)
        var written: Int64 = 0
        do {
            try source.forEachChunk(from: file.byteRange?.offset ?? 0, length: length) { chunk in
                try Self.writeAll(fd, chunk, advanced: written)
                written += Int64(chunk.count)
            }
        } catch let error as FileReadError {
            throw TransferFailure(kind: .fatalStatus, status: 404, domain: "file", code: "not_found", comment: error.description)
        }
        if file.byteRange == nil, written > maximumBytes {
            throw TransferFailure.tooLarge(status: 200, "more than \(maximumBytes) bytes", advanced: written)
        }
        return TransferOutcome(status: 200, bytes: written)
    }

    private static func writeAll(_ fd: Int32, _ buffer: ByteBuffer, advanced: Int64) throws {
        try buffer.withUnsafeReadableBytes { raw in try writeAll(fd, raw, advanced: advanced) }
    }

    private static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer, advanced: Int64) throws {
        guard let failure = FileDescriptorWrite.all(raw, to: fd) else { return }
        let code = failure.errorNumber
        throw TransferFailure(
            kind: code == ENOSPC || code == EDQUOT ? .diskFull : .local,
            domain: "storage",
            code: code == ENOSPC ? "no_space" : "write_failed",
            comment: String(cString: strerror(code)),
            advanced: advanced + Int64(failure.written)
        )
    }

    /// Checks the part file's length. Returns its size and SHA-256: `whole` when the transfer hashed the file as it
    /// wrote it, else read back from the file.
    private func check(part: URL, file: String, sourceURL: String, expectedLength: Int64?, whole: CompletedFile?) throws -> CompletedFile {
        var done: CompletedFile
        if let whole {
            done = whole
        } else {
            do {
                let (size, sha256) = try ChunkedFile.sha256(of: part)
                done = CompletedFile(size: size, sha256: sha256)
            } catch {
                let reason = error.code == ENOENT ? "the partial file vanished" : error.reason
                throw DownloadError.segmentFailed(path: file, url: sourceURL, reason: reason)
            }
        }
        if let expectedLength, done.size != expectedLength {
            try? FileManager.default.removeItem(at: part)
            throw DownloadError.segmentFailed(path: file, url: sourceURL, reason: "got \(done.size) bytes, expected \(expectedLength)")
        }
        return done
    }

    /// Flushes a staged file to disk and renames it into place, so that a file under its final name is whole on disk.
    /// The flush waits for the disk: it runs on NIO's blocking-I/O pool, not on the few threads that run tasks.
    /// - Returns: the file's identity once in place (the rename changes its change time), for
    ///   ``OfflinePackage/VerifiedFileRecords``; nil when it cannot be told.
    @discardableResult
    func place(_ staged: StagedFile) async throws -> FileIdentity? {
        let part = staged.part.path
        let destination = staged.destination.path
        let (code, identity) = try await NIOThreadPool.singleton.runIfActive { () -> (Int32, FileIdentity?) in
            let fd = open(part, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return (errno, nil) }
            defer { close(fd) }
            guard fsync(fd) == 0, rename(part, destination) == 0 else { return (errno, nil) }
            return (0, FileIdentity(descriptor: fd))
        }
        guard code == 0 else {
            throw DownloadError.segmentFailed(path: staged.destination.lastPathComponent, url: part, reason: String(cString: strerror(code)))
        }
        return identity
    }

    /// Feeds the file at `url` (``ChunkedFile``) from its start to its end into `hasher`; returns the bytes read.
    @discardableResult
    private static func hash(_ url: URL, into hasher: inout SHA256Hasher) throws(TransferFailure) -> Int64 {
        do {
            return try ChunkedFile(url).forEachChunk(chunkSize: readSize) { hasher.update($0) }
        } catch {
            let reason = (error as? FileReadError)?.reason ?? "\(error)"
            throw TransferFailure(kind: .local, domain: "storage", code: "read_failed", comment: reason)
        }
    }

    static func size(of url: URL) -> Int64 {
        var info = stat()
        return stat(url.path, &info) == 0 ? Int64(info.st_size) : 0
    }

    static func contentRangeStart(_ header: String?) -> Int64? {
        guard let header, header.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = header.dropFirst(6)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        return Int64(spec[..<dash].trimmingCharacters(in: .whitespaces))
    }

    static func classify(_ error: any Error) -> TransferFailure {
        if let failure = error as? TransferFailure { return failure }
        let text = NetworkErrorText.describe(error)
        if NetworkErrorText.isNetworkDown(error) {
            return TransferFailure(kind: .networkDown, domain: "network", code: "network_down", comment: text)
        }
        if error is CancellationError { return TransferFailure(kind: .retryable, domain: "transfer", code: "cancelled", comment: text) }
        // A certificate this machine does not trust stays untrusted: fail at once rather than retry.
        if NetworkErrorText.isUntrustedCertificate(error) {
            return TransferFailure(kind: .local, domain: "tls", code: "untrusted_certificate", comment: text)
        }
        return TransferFailure(kind: .retryable, domain: "network", code: "network_error", comment: text)
    }
}
