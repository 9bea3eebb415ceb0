public import Foundation
public import HLS
import KeyDelivery
public import MediaCrypto
public import StowageCore
public import StowageCrypto
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Decrypts a local HLS media playlist into a clear HLS copy: `stowage decrypt PLAYLIST --out DIR`.
///
/// Segments and init sections keep their file names; the written playlist is the original with its EXT-X-KEY tags
/// dropped. Keys come from the caller (one key for every EXT-X-KEY), or from the playlist's own key URIs when they
/// name local files (as with key rotation). Each output file is streamed through the segment's decryptor with one
/// buffer of memory, written under a temporary name and renamed into place when whole (see ``durable``).
///
/// Segments are decrypted by up to ``workers`` threads at once, one segment each, so reading, decrypting and writing
/// of one segment overlap with another's; memory stays at a few buffers per thread whatever the playlist's size. When
/// segments fail, the error reported is the first failing segment's in playlist order, and every other file is whole
/// or absent.
public struct PlaylistDecryption {
    /// What was written.
    public struct Report: Sendable, Hashable {
        public var playlist: URL
        public var segments: Int
        public var initializationSections: Int
        public var bytesRead: Int
        public var bytesWritten: Int
    }

    /// The key for every EXT-X-KEY, or nil to read each key from its local key URI.
    public var key: SecretBytes?
    /// Whether each file is flushed to disk (fsync) before it is renamed into place. Off by default: a clear copy
    /// can be made again, and a flush per file costs more than decrypting it.
    public var durable: Bool

    /// How many segments are decrypted at once: one per core, at most four.
    public var workers: Int

    public init(key: SecretBytes? = nil, durable: Bool = false, workers: Int = min(4, ProcessInfo.processInfo.activeProcessorCount)) {
        self.key = key
        self.durable = durable
        self.workers = max(1, workers)
    }

    /// One segment's work, planned in playlist order and run on any worker.
    private struct Job: Sendable {
        var source: URL
        var range: ResolvedByteRange?
        var output: URL
        var uri: String
        /// nil: the segment is clear and copied as it is.
        var decryption: Decryption?
        /// EXT-X-DISCONTINUITY-SEQUENCE: segments continue each other only within one.
        var discontinuitySequence = 0
        /// SAMPLE-AES MPEG-TS: the segments around it, which its PES packets may span into.
        var neighbours = TransportStreamNeighbours.none

        struct Decryption: Sendable {
            var method: SegmentEncryptionMethod
            var key: SecretBytes
            var iv: [UInt8]
            var protection: CBCSInitSection?
        }
    }

    private var files: FileStreaming { FileStreaming(durable: durable) }

    /// Decrypts the media playlist at `playlistURL` into `directory` (created if needed).
    public func decrypt(playlistAt playlistURL: URL, to directory: URL) throws(PlaylistDecryptionError) -> Report {
        let playlist = try loadMediaPlaylist(playlistURL)
        let segments = playlist.resolvedSegments(baseURL: playlistURL)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw .output(path: directory.path, reason: "cannot create the directory: \(FileErrorText.describe(error))")
        }
        var names = OutputNames()
        var report = Report(
            playlist: directory.appendingPathComponent(playlistURL.lastPathComponent),
            segments: 0,
            initializationSections: 0,
            bytesRead: 0,
            bytesWritten: 0
        )
        var initSections: [String: (name: String, protection: CBCSInitSection?)] = [:]
        var segmentNames: [String] = []
        var jobs: [Job] = []
        var keys: [String: SecretBytes] = [:]

        for segment in segments {
            // The init section in effect: decrypted (AES-128 EXT-X-MAP) and/or made clear (cbcs) once.
            var protection: CBCSInitSection?
            if let section = segment.initializationSection {
                let identity = "\(section.uri)|\(section.byteRange?.description ?? "")"
                if let done = initSections[identity] {
                    protection = done.protection
                } else {
                    let processed = try processInitSection(section, forSegmentMethod: segment.method, names: &names, into: directory, report: &report)
                    initSections[identity] = processed
                    protection = processed.protection
                }
            }
            let name = names.claim(for: segment.url, uri: segment.uri, byteRange: segment.byteRange)
            let output = directory.appendingPathComponent(name)
            guard let source = segment.url, source.isFileURL else {
                throw .notLocal(uri: segment.uri)
            }
            var job = Job(source: source, range: segment.byteRange, output: output, uri: segment.uri)
            job.discontinuitySequence = segment.discontinuitySequence
            if !segment.keys.isEmpty {
                let resolvedKey = try primaryKey(of: segment.keys, uri: segment.uri)
                let method = try supportedMethod(resolvedKey.method, segment: segment.uri)
                // Read once per key, not once per segment.
                let keyIdentity = "\(method.rawValue)|\(resolvedKey.uri)"
                let content: SecretBytes
                if let known = keys[keyIdentity] {
                    content = known
                } else {
                    content = try contentKey(for: resolvedKey, method: method)
                    keys[keyIdentity] = content
                }
                job.decryption = Job.Decryption(method: method, key: content, iv: resolvedKey.iv, protection: protection)
            }
            jobs.append(job)
            segmentNames.append(name)
        }
        Self.linkNeighbours(&jobs)
        try run(jobs, report: &report)
        let clear = rewrite(playlist, segmentNames: segmentNames, initNames: initSections.mapValues(\.name))
        let text = PlaylistWriter.write(.media(clear))
        do {
            try Data(text.utf8).write(to: report.playlist, options: .atomic)
        } catch {
            throw .output(path: report.playlist.path, reason: FileErrorText.describe(error))
        }
        return report
    }

    /// Gives each SAMPLE-AES segment the SAMPLE-AES segments before and after it in the same discontinuity sequence:
    /// a byte-count segmenter may have split a PES packet between them.
    private static func linkNeighbours(_ jobs: inout [Job]) {
        func neighbour(_ job: Job) -> TransportStreamNeighbour? {
            guard let decryption = job.decryption, decryption.method == .sampleAES else { return nil }
            return .file(
                job.source,
                offset: Int64(job.range?.offset ?? 0),
                length: job.range.map { Int64($0.length) },
                name: job.uri,
                key: decryption.key,
                iv: decryption.iv
            )
        }
        for index in jobs.indices where jobs[index].decryption?.method == .sampleAES {
            let sequence = jobs[index].discontinuitySequence
            if index > 0, jobs[index - 1].discontinuitySequence == sequence {
                jobs[index].neighbours.previous = neighbour(jobs[index - 1])
            }
            if index + 1 < jobs.count, jobs[index + 1].discontinuitySequence == sequence {
                jobs[index].neighbours.next = neighbour(jobs[index + 1])
            }
        }
    }

    /// Runs the jobs on up to ``workers`` threads, each taking the next job in playlist order. After a failure no
    /// new job starts; the failure of the earliest job is thrown.
    private func run(_ jobs: [Job], report: inout Report) throws(PlaylistDecryptionError) {
        struct Progress {
            var next = 0
            var read = 0
            var written = 0
            var done = 0
            var failure: (index: Int, error: PlaylistDecryptionError)?
        }
        let progress = Mutex(Progress())
        let files = self.files
        let workers = min(self.workers, jobs.count)
        let work: @Sendable (Int) -> Void = { _ in
            while true {
                let index: Int? = progress.withLock { state in
                    guard state.failure == nil, state.next < jobs.count else { return nil }
                    defer { state.next += 1 }
                    return state.next
                }
                guard let index else { return }
                do throws(PlaylistDecryptionError) {
                    let counts = try Self.perform(jobs[index], files: files)
                    progress.withLock { state in
                        state.read += counts.read
                        state.written += counts.written
                        state.done += 1
                    }
                } catch {
                    progress.withLock { state in
                        if state.failure.map({ index < $0.index }) ?? true { state.failure = (index, error) }
                    }
                }
            }
        }
        if workers <= 1 {
            work(0)
        } else {
            DispatchQueue.concurrentPerform(iterations: workers, execute: work)
        }
        let outcome = progress.withLock { $0 }
        if let failure = outcome.failure { throw failure.error }
        report.bytesRead += outcome.read
        report.bytesWritten += outcome.written
        report.segments += outcome.done
    }

    /// Decrypts (or copies) one segment into its output file.
    private static func perform(_ job: Job, files: FileStreaming) throws(PlaylistDecryptionError) -> (read: Int, written: Int) {
        var counts = Report(playlist: job.output, segments: 0, initializationSections: 0, bytesRead: 0, bytesWritten: 0)
        guard let decryption = job.decryption else {
            try mapping(job.output) { try files.copy(from: job.source, range: job.range, to: job.output, report: &counts) }
            return (counts.bytesRead, counts.bytesWritten)
        }
        let container = try mapping(job.source) { try files.detectContainer(of: job.source, range: job.range) }
        let transform: any SegmentTransform
        do {
            transform = try SegmentCryptography.decryptor(
                method: decryption.method,
                container: container,
                key: decryption.key,
                iv: decryption.iv,
                initSection: decryption.protection,
                segment: job.uri,
                neighbours: job.neighbours
            )
        } catch {
            throw .segment(error)
        }
        try mapping(job.output) {
            try files.transform(from: job.source, range: job.range, through: transform, to: job.output, report: &counts)
        }
        return (counts.bytesRead, counts.bytesWritten)
    }

    /// Runs file work and gives its failure the decryption's error type.
    private static func mapping<T>(_ file: URL, _ body: () throws -> T) throws(PlaylistDecryptionError) -> T {
        do {
            return try body()
        } catch let error as PlaylistDecryptionError {
            throw error
        } catch let error as SegmentCryptoError {
            throw .segment(error)
        } catch {
            throw .output(path: file.path, reason: "\(error)")
        }
    }

    private func loadMediaPlaylist(_ url: URL) throws(PlaylistDecryptionError) -> MediaPlaylist {
        let bytes: Data
        do {
            bytes = try Data(contentsOf: url)
        } catch {
            throw .unreadable(path: url.path, reason: FileErrorText.describe(error))
        }
        let parsed: ParsedPlaylist
        do {
            parsed = try PlaylistParser.parse(Array(bytes), url: url)
        } catch {
            throw .invalidPlaylist(error)
        }
        guard case .media(let playlist) = parsed.playlist else { throw .notAMediaPlaylist(path: url.path) }
        return playlist
    }

    private func processInitSection(
        _ section: ResolvedInitializationSection,
        forSegmentMethod method: EncryptionMethod?,
        names: inout OutputNames,
        into directory: URL,
        report: inout Report
    ) throws(PlaylistDecryptionError) -> (name: String, protection: CBCSInitSection?) {
        guard let source = section.url, source.isFileURL else { throw .notLocal(uri: section.uri) }
        let name = names.claim(for: source, uri: section.uri, byteRange: section.byteRange)
        let output = directory.appendingPathComponent(name)
        // RFC 8216bis 4.4.4.5: an EXT-X-MAP under an AES-128 key is itself encrypted with that key.
        var bytes: [UInt8]
        if let key = section.keys.first, [.aes128, .aes256, .aes256CTR].contains(key.method) {
            let whole = try supportedMethod(key.method, segment: section.uri)
            let cipher: any SegmentTransform
            do {
                cipher = try SegmentCryptography.decryptor(
                    method: whole,
                    container: .other,
                    key: try contentKey(for: key, method: whole),
                    iv: key.iv,
                    segment: section.uri
                )
                bytes = try cipher.transform(try files.read(source, range: section.byteRange))
            } catch let error as SegmentCryptoError {
                throw .segment(error)
            } catch let error as PlaylistDecryptionError {
                throw error
            } catch {
                throw .unreadable(path: source.path, reason: "\(error)")
            }
        } else {
            bytes = try Self.mapping(source) { try files.read(source, range: section.byteRange) }
        }
        report.bytesRead += bytes.count
        var protection: CBCSInitSection?
        if method == .sampleAES || method == .sampleAESCTR,
            SegmentContainer.detect(Array(bytes.prefix(SegmentContainer.detectionLength))) == .fragmentedMP4
        {
            do {
                let parsed = try CBCSInitSection.parse(bytes, segment: section.uri)
                bytes = try parsed.clearInitSection()
                protection = parsed
            } catch {
                throw .segment(error)
            }
        }
        do {
            try Data(bytes).write(to: output, options: .atomic)
        } catch {
            throw .output(path: output.path, reason: FileErrorText.describe(error))
        }
        report.bytesWritten += bytes.count
        report.initializationSections += 1
        return (name, protection)
    }

    /// The key to decrypt with: the first KEYFORMAT whose key this tool can obtain (identity before others).
    private func primaryKey(of keys: [ResolvedKey], uri: String) throws(PlaylistDecryptionError) -> ResolvedKey {
        if let identity = keys.first(where: { $0.keyFormat == EncryptionKey.identityKeyFormat }) { return identity }
        guard let first = keys.first else { throw .missingKey(uri: uri) }
        return first
    }

    private func supportedMethod(_ method: EncryptionMethod, segment: String) throws(PlaylistDecryptionError) -> SegmentEncryptionMethod {
        guard let supported = SegmentEncryptionMethod(name: method.rawValue) else {
            throw .unsupportedMethod(method.rawValue, segment: segment)
        }
        return supported
    }

    private func contentKey(for key: ResolvedKey, method: SegmentEncryptionMethod) throws(PlaylistDecryptionError) -> SecretBytes {
        if let explicit = self.key {
            guard explicit.count == method.keyLength else { throw .keyLength(uri: key.uri, expected: method.keyLength, found: explicit.count) }
            return explicit
        }
        if InlineKeyURI.isInline(key.uri) {
            // The playlist carries the key itself; errors name it only as an inline key.
            do {
                return try InlineKeyURI.decode(key.uri, allowedLengths: [method.keyLength])
            } catch {
                throw .inlineKey(error.message)
            }
        }
        guard let url = key.url, url.isFileURL else { throw .missingKey(uri: key.uri) }
        let raw: Data
        do {
            raw = try Data(contentsOf: url)
        } catch {
            throw .missingKey(uri: key.uri)
        }
        // A key file holds the raw key bytes, as players fetch them; a hex text file is accepted too.
        if raw.count == method.keyLength { return SecretBytes(raw) }
        let text = String(decoding: raw, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if let bytes = Hex.decode(text), bytes.count == method.keyLength { return SecretBytes(bytes) }
        throw .keyLength(uri: key.uri, expected: method.keyLength, found: raw.count)
    }

    /// The playlist as written for the clear copy: key tags dropped, URIs pointing at the written files, byte ranges
    /// dropped where a range became a file of its own.
    private func rewrite(_ playlist: MediaPlaylist, segmentNames: [String], initNames: [String: String]) -> MediaPlaylist {
        var clear = playlist
        var currentMapIdentity: String?
        for index in clear.segments.indices {
            var tags: [SegmentTag] = []
            for tag in clear.segments[index].tags {
                switch tag {
                case .key:
                    continue
                case .byteRange:
                    continue
                case .map(var map):
                    currentMapIdentity =
                        "\(map.uri)|\(map.byteRange.map { ResolvedByteRange(offset: $0.offset ?? 0, length: $0.length).description } ?? "")"
                    if let identity = currentMapIdentity, let name = initNames[identity] {
                        map.uri = OutputNames.uriText(name)
                        map.byteRange = nil
                    }
                    tags.append(.map(map))
                default:
                    tags.append(tag)
                }
            }
            clear.segments[index].tags = tags
            clear.segments[index].uri = OutputNames.uriText(segmentNames[index])
        }
        clear.trailingTags.removeAll { if case .key = $0 { true } else { false } }
        return clear
    }
}

/// Output file names: the source's file name, made unique when two sources share one or a byte range is split out.
struct OutputNames {
    private var used: Set<String> = []
    private var bySource: [String: String] = [:]

    mutating func claim(for url: URL?, uri: String, byteRange: ResolvedByteRange?) -> String {
        let sourceKey = "\(url?.absoluteString ?? uri)|\(byteRange?.description ?? "")"
        if let name = bySource[sourceKey] { return name }
        var base = url?.lastPathComponent ?? "segment"
        if base.isEmpty || base == "/" || base == "." || base == ".." { base = "segment" }
        var candidate = base
        if let byteRange {
            let stem = (base as NSString).deletingPathExtension
            let ext = (base as NSString).pathExtension
            candidate = "\(stem)-\(byteRange.offset)" + (ext.isEmpty ? "" : ".\(ext)")
        }
        var counter = 1
        let unique = candidate
        while used.contains(candidate) {
            counter += 1
            let stem = (unique as NSString).deletingPathExtension
            let ext = (unique as NSString).pathExtension
            candidate = "\(stem)-\(counter)" + (ext.isEmpty ? "" : ".\(ext)")
        }
        used.insert(candidate)
        bySource[sourceKey] = candidate
        return candidate
    }

    /// A file name as a relative URI.
    static func uriText(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/;"))) ?? name
    }
}

/// Why `stowage decrypt` stopped.
public enum PlaylistDecryptionError: Error, Sendable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case invalidPlaylist(PlaylistError)
    case notAMediaPlaylist(path: String)
    case notLocal(uri: String)
    case missingKey(uri: String)
    case keyLength(uri: String, expected: Int, found: Int)
    case inlineKey(String)
    case unsupportedMethod(String, segment: String)
    case segment(SegmentCryptoError)
    case output(path: String, reason: String)

    /// A stable snake_case code.
    public var code: ErrorCode {
        switch self {
        case .unreadable: .unreadable
        case .invalidPlaylist(let error): error.code
        case .notAMediaPlaylist: .notAMediaPlaylist
        case .notLocal: .notLocal
        case .missingKey: .missingKey
        case .keyLength: .wrongKeyLength
        case .inlineKey: .invalidInlineKey
        case .unsupportedMethod: .unsupportedMethod
        case .segment(let error): error.code
        case .output: .outputFailed
        }
    }

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read \(path): \(reason)"
        case .invalidPlaylist(let error): "the playlist is invalid: \(error)"
        case .notAMediaPlaylist(let path): "\(path) is a multivariant playlist; give one of its media playlists"
        case .notLocal(let uri): "\(uri) is not a local file; `stowage decrypt` works on a playlist and segments on disk"
        case .missingKey(let uri): "no key for \(uri): pass --key-file FILE or --key - (standard input), or put the key file where the URI points"
        case .keyLength(let uri, let expected, let found):
            "the key for \(InlineKeyURI.isInline(uri) ? "the playlist's inline (data:) key" : uri) has \(found) bytes; this method needs \(expected)"
        case .inlineKey(let message): message
        case .unsupportedMethod(let method, let segment): "segment \(segment) uses METHOD=\(method), which Stowage does not decrypt"
        case .segment(let error): error.description
        case .output(let path, let reason): "cannot write \(path): \(reason)"
        }
    }
}

extension PlaylistDecryptionError: StowageError {
    public var message: String { description }
}
