import Foundation
import Hummingbird
import MediaCrypto
import NIOCore
import OfflinePackage
import StowageCore
import StowageCrypto
import Synchronization

/// How one file of the package is decrypted on its way to the player.
struct Decryption: Sendable {
    var method: SegmentEncryptionMethod
    var container: SegmentContainer
    var key: SecretBytes
    var iv: [UInt8]
    /// The rendition's cbcs init section, for SAMPLE-AES fMP4 segments.
    var initSection: CBCSInitSection?
    /// SAMPLE-AES MPEG-TS: the stored segments around this one, which its PES packets may span into.
    var neighbours = TransportStreamNeighbours.none

    /// The streaming decryptor of the file `path`, from `iv` (the file's own when nil).
    func decryptor(path: String, iv: [UInt8]? = nil, promptOutput: Bool = false) throws(SegmentCryptoError) -> any SegmentTransform {
        try SegmentCryptography.decryptor(
            method: method,
            container: container,
            key: key,
            iv: iv ?? self.iv,
            initSection: initSection,
            segment: path,
            promptOutput: promptOutput,
            neighbours: neighbours
        )
    }

    /// The whole file `path`, held in memory, decrypted.
    /// - Throws: ``PlaybackError`` `decryption_failed`.
    func clear(_ bytes: [UInt8], path: String, assetId: String) throws(PlaybackError) -> [UInt8] {
        do {
            return try decryptor(path: path).transform(bytes)
        } catch {
            throw .decryptionFailed(assetId: assetId, path: path, detail: "\(error)")
        }
    }
}

/// Files whose SHA-256 was checked, by path, with the identity they had then: in this session, or before it by the
/// download that wrote them or by `verify --deep` (``OfflinePackage/VerifiedFileRecords``). Such a file is served, whole or a byte range,
/// without hashing it again, as long as its identity (device, inode, size, change time) holds.
final class VerifiedFiles: Sendable {
    private let checked: Mutex<[String: FileIdentity]>

    /// - Parameter trusted: identities checked before the session (``OfflinePackage/VerifiedFileRecords/identities(for:)``).
    init(trusted: [String: FileIdentity] = [:]) {
        checked = Mutex(trusted)
    }

    func isVerified(_ path: String, as identity: FileIdentity) -> Bool {
        checked.withLock { $0[path] == identity }
    }

    func record(_ path: String, as identity: FileIdentity) {
        checked.withLock { $0[path] = identity }
    }
}

/// One segment to stream: read from disk a chunk at a time, hashed, decrypted and written to the response.
struct SegmentStream: Sendable {
    var assetId: String
    var url: URL
    var file: PackageFile
    var decryption: Decryption?

    /// The length of the segment as the player receives it, known before a byte is produced: the file's size for a
    /// clear file, AES-CTR and sample encryption (SAMPLE-AES TS and cbcs keep every byte count; docs/media-crypto.md),
    /// and for AES-CBC the size less the PKCS#7 padding, read from the last block alone.
    /// - Throws: ``PlaybackError`` `segment_missing`, `segment_modified` or `decryption_failed` (bad padding).
    func servedLength() throws(PlaybackError) -> Int64 {
        let path = file.path
        guard let handle = try? ChunkedFile(url), let size = handle.size else { throw .segmentMissing(assetId: assetId, path: path) }
        if let expected = file.size, size != expected {
            throw .segmentModified(assetId: assetId, path: path, expected: expected, found: size)
        }
        guard let decryption, decryption.method == .aes128 || decryption.method == .aes256 else { return size }
        guard size >= 16, size % 16 == 0 else {
            throw .decryptionFailed(assetId: assetId, path: path, detail: "\(size) bytes is not a whole number of AES blocks")
        }
        // The last block, decrypted with the block before it as its IV, tells the padding.
        let tail: [UInt8]
        do {
            tail = try handle.read(count: size >= 32 ? 32 : 16, at: size >= 32 ? size - 32 : 0)
        } catch {
            throw .segmentMissing(assetId: assetId, path: path)
        }
        let iv = tail.count == 32 ? Array(tail[0..<16]) : decryption.iv
        do {
            let cipher = try WholeSegmentCipher(
                method: decryption.method == .aes128 ? .aes128 : .aes256,
                key: decryption.key,
                iv: iv,
                direction: .decrypt,
                segment: path
            )
            var last = 0
            try tail.suffix(16).withUnsafeBytes { block in try cipher.process(block) { last += $0.count } }
            try cipher.finish { last += $0.count }
            return size - 16 + Int64(last)
        } catch {
            throw .decryptionFailed(assetId: assetId, path: path, detail: "\(error)")
        }
    }

    /// Which neighbouring segments, not stored yet, the segment can be decrypted only with: a SAMPLE-AES MPEG-TS segment
    /// cut inside PES packets, beside segments a running download has not stored yet. Reads and decrypts the whole file
    /// once, dropping the output; (false, false) at once for any other segment, and for one that fails otherwise (its
    /// own failure is reported when it is served).
    func neighboursNeeded() -> (previous: Bool, next: Bool) {
        guard let decryption, decryption.neighbours.nextPending || decryption.neighbours.previousPending,
            let decryptor = try? makeTransform(iv: decryption.iv) as? SampleAESTransportStreamDecryptor,
            let file = try? ChunkedFile(url)
        else {
            return (false, false)
        }
        do {
            try file.forEachChunk { chunk in try decryptor.process(chunk) { _ in } }
        } catch {
            return (false, false)
        }
        return (decryptor.needsPreviousSegment, decryptor.needsNextSegment)
    }

    /// Streams the whole file into `writer` and returns the bytes written.
    ///
    /// Memory stays at two chunks plus what the decryptor holds (a PES packet, a `moof`): each chunk's output is held
    /// back until the next chunk is read, and the last one until the file's SHA-256 has been checked, so a file
    /// modified on disk never reaches the player whole: the response is cut short instead (the connection is closed
    /// without the final chunk), and the caller logs why. Output that would not have the `length` promised in the
    /// headers is cut short the same way.
    ///
    /// - Throws: ``PlaybackError`` `segment_missing`, `segment_modified`, `segment_checksum_mismatch`,
    ///   `decryption_failed`; or the writer's error when the player went away.
    func stream(
        into writer: inout any ResponseBodyWriter,
        length: Int64,
        verified: VerifiedFiles,
        chunkSize: Int,
        firstByte: @Sendable () -> Void = {}
    ) async throws -> Int {
        let path = file.path
        guard let handle = try? ChunkedFile(url) else { throw PlaybackError.segmentMissing(assetId: assetId, path: path) }
        if let expected = file.size, let size = handle.size, size != expected {
            throw PlaybackError.segmentModified(assetId: assetId, path: path, expected: expected, found: size)
        }
        let identity = FileIdentity(descriptor: handle.descriptor)
        // A file checked before and unchanged since is not hashed again; any other is, every byte of it.
        let vouched = identity.map { verified.isVerified(path, as: $0) } ?? false
        var output = HeldBackOutput(transform: try makeTransform(iv: decryption?.iv), hashing: !vouched)
        var offset: Int64 = 0
        var readSize = Self.firstReadSize(chunkSize)
        while true {
            let chunk = try read(handle, count: readSize, at: offset)
            readSize = min(chunkSize, readSize * 2)
            if chunk.isEmpty { break }
            offset += Int64(chunk.count)
            try await feed(chunk, to: &output, into: &writer, firstByte: firstByte)
        }
        let sha256 = try finish(&output)
        guard vouched || sha256 == file.sha256?.lowercased() else {
            throw PlaybackError.segmentChecksumMismatch(assetId: assetId, path: path)
        }
        // What was read must be what was vouched for: a file changed while it was read has another identity now.
        guard !vouched || FileIdentity(descriptor: handle.descriptor) == identity else {
            throw PlaybackError.segmentChecksumMismatch(assetId: assetId, path: path)
        }
        guard Int64(output.length) == length else {
            throw PlaybackError.decryptionFailed(
                assetId: assetId,
                path: path,
                detail: "the decrypted segment has \(output.length) bytes where \(length) were announced"
            )
        }
        if let identity { verified.record(path, as: identity) }
        return try await output.release(into: &writer, firstByte: firstByte)
    }

    /// Streams the segment while a transfer is still writing it: `url` is the transfer's part file, read as it grows
    /// and decrypted on the way, until the transfer has put the file in place (`landed` gives its size and SHA-256)
    /// and every byte of it has been read. Returns the bytes written.
    ///
    /// The response has no `Content-Length` (the player gets it chunked): AES-CBC's length is known only at the last
    /// block. As in ``stream(into:length:verified:chunkSize:firstByte:)``, the last chunk is held back until the
    /// SHA-256 of every byte read equals the one the transfer recorded, so a player never gets a whole segment that is
    /// not the file that landed: a part file that shrinks (the transfer started over), stalls for `stall`, or ends
    /// other than as recorded cuts the response short.
    ///
    /// - Throws: ``PlaybackError`` `segment_downloading` (stalled), `segment_modified`, `segment_checksum_mismatch`,
    ///   `decryption_failed`; or the writer's error when the player went away.
    ///
    /// A SAMPLE-AES MPEG-TS segment cut inside PES packets (a byte-count segmenter) needs its neighbours: packets that
    /// continue a PES packet of the previous segment wait until `neighbours` gives that segment (it has landed), and
    /// once the file is read, a PES packet left open waits for the next; each wait at most `stall`.
    func streamArriving(
        into writer: inout any ResponseBodyWriter,
        landed: @Sendable () -> (size: Int64, sha256: String)?,
        neighbours: @Sendable () -> TransportStreamNeighbours = { .none },
        poll: Duration,
        stall: Duration,
        chunkSize: Int,
        firstByte: @Sendable () -> Void = {}
    ) async throws -> Int {
        let path = file.path
        // The descriptor keeps the part file's inode: the rename into place does not change what is read.
        guard let handle = try? ChunkedFile(url) else { throw PlaybackError.segmentMissing(assetId: assetId, path: path) }
        var output = HeldBackOutput(transform: try makeTransform(iv: decryption?.iv, promptOutput: true))
        var offset: Int64 = 0
        var progressed = ContinuousClock.now
        let started = ContinuousClock.now
        var done: (size: Int64, sha256: String)?
        var readSize = Self.firstReadSize(chunkSize)
        while true {
            let chunk = try read(handle, count: readSize, at: offset)
            if !chunk.isEmpty { readSize = min(chunkSize, readSize * 2) }
            if chunk.isEmpty {
                if let size = handle.size, size < offset {
                    throw PlaybackError.segmentModified(assetId: assetId, path: path, expected: offset, found: size)
                }
                if let landed = done ?? landed() {
                    done = landed
                    if offset == landed.size { break }
                    if offset > landed.size {
                        throw PlaybackError.segmentModified(assetId: assetId, path: path, expected: landed.size, found: offset)
                    }
                }
                guard ContinuousClock.now - progressed < stall else {
                    let waited = ContinuousClock.now - started
                    throw PlaybackError.segmentDownloading(
                        assetId: assetId,
                        path: path,
                        waited: Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18
                    )
                }
                try await Task.sleep(for: poll)
                continue
            }
            progressed = ContinuousClock.now
            offset += Int64(chunk.count)
            try await feed(chunk, to: &output, into: &writer, firstByte: firstByte)
            if let decryptor = output.transform as? SampleAESTransportStreamDecryptor, decryptor.needsPreviousSegment,
                let previous = neighbours().previous
            {
                try supply { try decryptor.supplyPrevious(previous) }
            }
        }
        if let decryptor = output.transform as? SampleAESTransportStreamDecryptor {
            let waitStarted = ContinuousClock.now
            while decryptor.needsPreviousSegment || decryptor.needsNextSegment {
                let now = neighbours()
                if decryptor.needsPreviousSegment, let previous = now.previous {
                    try supply { try decryptor.supplyPrevious(previous) }
                } else if !decryptor.needsPreviousSegment, decryptor.needsNextSegment, let next = now.next {
                    decryptor.supplyNext(next)
                } else {
                    guard ContinuousClock.now - waitStarted < stall else {
                        throw PlaybackError.segmentDownloading(assetId: assetId, path: path, waited: Self.seconds(since: started))
                    }
                    try await Task.sleep(for: poll)
                }
            }
        }
        guard try finish(&output) == done?.sha256.lowercased() else {
            throw PlaybackError.segmentChecksumMismatch(assetId: assetId, path: path)
        }
        return try await output.release(into: &writer, firstByte: firstByte)
    }

    /// The first read of a streamed file; each next read doubles, up to `chunkSize`. Output is sent one read behind
    /// (``HeldBackOutput``), so the first byte leaves once two reads are hashed and decrypted: two 256 KiB reads put
    /// the first segment's time to first byte at 3.6 ms against nginx's 1.6 ms; two of 16 KiB take a few microseconds.
    static func firstReadSize(_ chunkSize: Int) -> Int {
        min(chunkSize, 16 << 10)
    }

    /// Runs a neighbour's supply to the decryptor, its failure a `decryption_failed`.
    private func supply(_ body: () throws -> Void) throws(PlaybackError) {
        do {
            try body()
        } catch {
            throw .decryptionFailed(assetId: assetId, path: file.path, detail: "\(error)")
        }
    }

    private static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Hashes and decrypts the next chunk of the file into `output`, and sends what the previous chunk gave.
    private func feed(
        _ chunk: [UInt8],
        to output: inout HeldBackOutput,
        into writer: inout any ResponseBodyWriter,
        firstByte: @Sendable () -> Void
    ) async throws {
        if output.hashing { output.hasher.update(chunk) }
        var next = ByteBuffer()
        next.reserveCapacity(chunk.count + 1024)
        try process(chunk, with: output.transform) { next.writeBytes($0) }
        _ = try await output.release(into: &writer, firstByte: firstByte)
        output.held = next
    }

    /// Ends the decryption (the padding, the last PES packets) into what is held back; returns the file's SHA-256.
    private func finish(_ output: inout HeldBackOutput) throws(PlaybackError) -> String {
        if let transform = output.transform {
            do {
                try transform.finish { output.held.writeBytes($0) }
            } catch {
                throw .decryptionFailed(assetId: assetId, path: file.path, detail: "\(error)")
            }
        }
        return Hex.encode(output.hasher.finalize())
    }

    /// Streams bytes `range` of the segment as the player receives it (of `length` bytes in all) and returns the bytes
    /// written.
    ///
    /// The file's SHA-256 is checked first unless it was checked in this session and the file has not changed since.
    /// Then only what the range needs is read and decrypted: for AES-CBC from the block holding the range's first byte
    /// (the block before it is the IV) to one block past its last (the last block only when the range reaches the
    /// end, for the padding); for AES-CTR from that block with the counter advanced; clear files exactly the range.
    /// Sample encryption (SAMPLE-AES TS, cbcs) is decrypted from the start of the file, since a PES packet or a
    /// fragment's first sample may begin anywhere before the range, and stops once the range is complete.
    func stream(
        range: ClosedRange<Int64>,
        length: Int64,
        into writer: inout any ResponseBodyWriter,
        verified: VerifiedFiles,
        chunkSize: Int,
        firstByte: @Sendable () -> Void = {}
    ) async throws -> Int {
        let path = file.path
        guard let handle = try? ChunkedFile(url), let size = handle.size else {
            throw PlaybackError.segmentMissing(assetId: assetId, path: path)
        }
        if let expected = file.size, size != expected {
            throw PlaybackError.segmentModified(assetId: assetId, path: path, expected: expected, found: size)
        }
        let identity = FileIdentity(descriptor: handle.descriptor)
        if identity.map({ !verified.isVerified(path, as: $0) }) ?? true {
            var hasher = SHA256Hasher()
            var offset: Int64 = 0
            while true {
                let chunk = try read(handle, count: chunkSize, at: offset)
                if chunk.isEmpty { break }
                offset += Int64(chunk.count)
                hasher.update(chunk)
            }
            guard Hex.encode(hasher.finalize()) == file.sha256?.lowercased() else {
                throw PlaybackError.segmentChecksumMismatch(assetId: assetId, path: path)
            }
            if let identity { verified.record(path, as: identity) }
        }

        // Where reading starts and ends in the file, where the first output byte sits in the served bytes, and
        // whether the cipher is finished (the padding checked) at the end.
        var inputStart: Int64 = 0
        var inputEnd = size
        var outputStart: Int64 = 0
        var finish = true
        var iv = decryption?.iv
        switch decryption?.method {
        case nil:
            inputStart = range.lowerBound
            inputEnd = range.upperBound + 1
            outputStart = range.lowerBound
            finish = false
        case .aes128?, .aes256?:
            let first = range.lowerBound / 16
            let last = range.upperBound / 16
            inputStart = first * 16
            outputStart = inputStart
            if first > 0 { iv = try read(handle, count: 16, at: inputStart - 16) }
            if (last + 1) * 16 < size {
                // One block more than the range needs: the cipher holds the last block it is given back for padding.
                inputEnd = min(size, (last + 2) * 16)
                finish = false
            }
        case .aes256CTR?:
            let first = range.lowerBound / 16
            inputStart = first * 16
            outputStart = inputStart
            inputEnd = min(size, (range.upperBound / 16 + 1) * 16)
            iv = decryption.map { Self.counter($0.iv, advancedBy: first) }
            finish = false
        case .sampleAES?, .sampleAESCTR?:
            break
        }
        let transform = try makeTransform(iv: iv)
        var position = outputStart
        var written = 0
        var offset = inputStart
        while offset < inputEnd, position <= range.upperBound {
            let chunk = try read(handle, count: Int(min(Int64(chunkSize), inputEnd - offset)), at: offset)
            if chunk.isEmpty { break }
            offset += Int64(chunk.count)
            var output = ByteBuffer()
            try process(chunk, with: transform) { Self.clip($0, at: &position, to: range, into: &output) }
            if offset >= inputEnd, finish, let transform {
                do {
                    try transform.finish { Self.clip($0, at: &position, to: range, into: &output) }
                } catch {
                    throw PlaybackError.decryptionFailed(assetId: assetId, path: path, detail: "\(error)")
                }
            }
            if output.readableBytes > 0 {
                firstByte()
                written += output.readableBytes
                try await writer.write(output)
            }
        }
        guard Int64(written) == Int64(range.count), FileIdentity(descriptor: handle.descriptor) == identity else {
            throw PlaybackError.segmentModified(assetId: assetId, path: path, expected: length, found: Int64(written))
        }
        return written
    }

    /// Appends the part of `bytes` (which sit at `position` in the served bytes) that falls inside `range`.
    private static func clip(_ bytes: UnsafeRawBufferPointer, at position: inout Int64, to range: ClosedRange<Int64>, into output: inout ByteBuffer) {
        let start = max(position, range.lowerBound)
        let end = min(position + Int64(bytes.count), range.upperBound + 1)
        if start < end {
            output.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[Int(start - position)..<Int(end - position)]))
        }
        position += Int64(bytes.count)
    }

    /// The AES-CTR counter block `blocks` blocks after `iv` (a 128-bit big-endian counter, as OpenSSL increments it).
    static func counter(_ iv: [UInt8], advancedBy blocks: Int64) -> [UInt8] {
        var counter = iv
        var carry = UInt64(blocks)
        var index = counter.count - 1
        while carry > 0, index >= 0 {
            let sum = UInt64(counter[index]) + (carry & 0xFF)
            counter[index] = UInt8(sum & 0xFF)
            carry = (carry >> 8) + (sum >> 8)
            index -= 1
        }
        return counter
    }

    private func makeTransform(iv: [UInt8]?, promptOutput: Bool = false) throws(PlaybackError) -> (any SegmentTransform)? {
        guard let decryption else { return nil }
        do {
            return try decryption.decryptor(path: file.path, iv: iv, promptOutput: promptOutput)
        } catch {
            throw .unsupportedEncryption(assetId: assetId, path: file.path, detail: "\(error)")
        }
    }

    private func read(_ handle: ChunkedFile, count: Int, at offset: Int64) throws(PlaybackError) -> [UInt8] {
        do {
            return try handle.read(count: count, at: offset)
        } catch {
            throw .segmentMissing(assetId: assetId, path: file.path)
        }
    }

    private func process(
        _ chunk: [UInt8],
        with transform: (any SegmentTransform)?,
        emit: (UnsafeRawBufferPointer) -> Void
    ) throws(PlaybackError) {
        guard let transform else {
            chunk.withUnsafeBytes { emit($0) }
            return
        }
        do {
            try chunk.withUnsafeBytes { bytes in try transform.process(bytes) { emit($0) } }
        } catch {
            throw .decryptionFailed(assetId: assetId, path: file.path, detail: "\(error)")
        }
    }
}

/// A file decrypted into a response one chunk behind (``SegmentStream``): each chunk's output is sent when the next
/// chunk has been read, and the last only once the caller has checked the whole file (its SHA-256, its length), so a
/// file that fails the check never reaches the player whole.
struct HeldBackOutput {
    var transform: (any SegmentTransform)?
    var hasher = SHA256Hasher()
    /// Whether the input is hashed (not when the file was checked before and has not changed since).
    var hashing: Bool
    /// Output not sent yet.
    var held = ByteBuffer()
    /// Output sent so far.
    var written = 0

    init(transform: (any SegmentTransform)?, hashing: Bool = true) {
        self.transform = transform
        self.hashing = hashing
    }

    /// Every byte of output: sent and held back.
    var length: Int { written + held.readableBytes }

    /// Sends what is held back; returns the bytes sent in all.
    mutating func release(into writer: inout any ResponseBodyWriter, firstByte: @Sendable () -> Void) async throws -> Int {
        if held.readableBytes > 0 {
            firstByte()
            written += held.readableBytes
            try await writer.write(held)
            held = ByteBuffer()
        }
        return written
    }
}

/// Init sections as the player gets them (decrypted when AES-128, made clear when cbcs), prepared once per session.
///
/// Init sections are small (a few KB: `moov` without samples), so they are read whole, checked against their
/// SHA-256, and kept.
final class InitSectionCache: Sendable {
    /// What a prepared init section is.
    struct Prepared: Sendable {
        /// The bytes to send.
        var bytes: [UInt8]
        /// The parsed protection, for decrypting the rendition's cbcs segments.
        var protection: CBCSInitSection?
    }

    /// The largest init section accepted.
    static let maximumSize: Int64 = 8 << 20

    private let prepared = Mutex<[String: Prepared]>([:])

    /// The prepared init section at `path`.
    func prepare(_ role: FileRole, in authorization: PlaybackAuthorization) throws(PlaybackError) -> Prepared {
        let file = role.file
        if let done = prepared.withLock({ $0[file.path] }) { return done }
        let assetId = authorization.assetId
        guard let url = try? authorization.package.url(forRelativePath: file.path), let handle = try? ChunkedFile(url) else {
            throw .segmentMissing(assetId: assetId, path: file.path)
        }
        guard let size = handle.size, size <= Self.maximumSize else {
            throw .unsupportedEncryption(assetId: assetId, path: file.path, detail: "an init section over \(Self.maximumSize >> 20) MiB")
        }
        if let expected = file.size, expected != size {
            throw .segmentModified(assetId: assetId, path: file.path, expected: expected, found: size)
        }
        guard let bytes = try? handle.read(count: Int(size), at: 0), bytes.count == Int(size) else {
            throw .segmentMissing(assetId: assetId, path: file.path)
        }
        guard Hex.encode(SHA256Hasher.hash(bytes)) == file.sha256?.lowercased() else {
            throw .segmentChecksumMismatch(assetId: assetId, path: file.path)
        }
        let decryption = try file.key.map { key throws(PlaybackError) in try Decryptions.wholeFile(key, path: file.path, in: authorization) }
        let result = try Self.clear(bytes, role: role, decryption: decryption, assetId: assetId)
        prepared.withLock { $0[file.path] = result }
        return result
    }

    /// An init section as the player gets it, from its bytes as stored: decrypted whole when `decryption` is given
    /// (an AES-128 EXT-X-MAP), made clear when its segments are sample-encrypted fMP4 (cbcs).
    static func clear(_ stored: [UInt8], role: FileRole, decryption: Decryption?, assetId: String) throws(PlaybackError) -> Prepared {
        let file = role.file
        var bytes = stored
        // RFC 8216bis 4.4.4.5: an EXT-X-MAP under AES-128 is encrypted whole with the key in effect.
        if let decryption { bytes = try decryption.clear(bytes, path: file.path, assetId: assetId) }
        var protection: CBCSInitSection?
        if case .initSection(let sampleEncrypted) = role.kind, sampleEncrypted,
            SegmentContainer.detect(Array(bytes.prefix(SegmentContainer.detectionLength))) == .fragmentedMP4
        {
            do {
                let parsed = try CBCSInitSection.parse(bytes, segment: file.path)
                bytes = try parsed.clearInitSection()
                protection = parsed
            } catch {
                throw .decryptionFailed(assetId: assetId, path: file.path, detail: "\(error)")
            }
        }
        return Prepared(bytes: bytes, protection: protection)
    }
}

/// Turns a manifest's per-file key into what the decryptors take.
enum Decryptions {
    /// The key, method and IV of a file encrypted whole or sample by sample.
    /// - Parameter content: the content key when it does not come from the authorization (an online rendition's).
    static func wholeFile(
        _ key: PackageSegmentKey,
        path: String,
        in authorization: PlaybackAuthorization,
        content: SecretBytes? = nil
    ) throws(PlaybackError) -> Decryption {
        let assetId = authorization.assetId
        guard let method = SegmentEncryptionMethod(name: key.method) else {
            throw .unsupportedEncryption(assetId: assetId, path: path, detail: "METHOD=\(key.method) is not one Stowage decrypts")
        }
        guard let content = content ?? authorization.keys[key.keyId] else {
            throw .keyMissing(
                assetId: assetId,
                keyId: key.keyId,
                detail: "the key \(key.keyId) was not read at authorization. Download the asset again."
            )
        }
        guard content.count == method.keyLength else {
            throw .unsupportedEncryption(
                assetId: assetId,
                path: path,
                detail: "the key \(key.keyId) has \(content.count) bytes, \(key.method) needs \(method.keyLength)"
            )
        }
        guard let iv = Hex.decode(key.iv), iv.count == 16 else {
            throw .invalidManifest(assetId: assetId, reason: "the IV of \(path) is not 32 hex digits")
        }
        return Decryption(method: method, container: .other, key: content, iv: iv, initSection: nil)
    }
}
