import Foundation
import HLS
import MediaCrypto
import StowageCore

#if canImport(Glibc)
import Glibc
#endif

/// Streams (part of) a file through a segment transform into another file: one buffer of memory, the output written
/// under a temporary name and renamed into place only when whole (fsynced first when `durable`).
struct FileStreaming {
    static let bufferSize = 1 << 20

    /// Flush each file to disk before renaming it into place: one disk flush per file, which on ordinary disks costs
    /// more than the decryption itself.
    var durable: Bool

    func read(_ url: URL, range: ResolvedByteRange?) throws -> [UInt8] {
        var bytes: [UInt8] = []
        try forEachChunk(of: url, range: range) { bytes.append(contentsOf: $0) }
        return bytes
    }

    func detectContainer(of url: URL, range: ResolvedByteRange?) throws -> SegmentContainer {
        let limited =
            range.map { ResolvedByteRange(offset: $0.offset, length: min($0.length, SegmentContainer.detectionLength)) }
            ?? ResolvedByteRange(offset: 0, length: SegmentContainer.detectionLength)
        var prefix: [UInt8] = []
        try forEachChunk(of: url, range: limited, allowShort: true) { prefix.append(contentsOf: $0) }
        return SegmentContainer.detect(prefix)
    }

    func copy(
        from source: URL,
        range: ResolvedByteRange?,
        to output: URL,
        report: inout PlaylistDecryption.Report
    )
        throws
    {
        var read = 0
        report.bytesWritten += try write(to: output) { emit in
            try forEachChunk(of: source, range: range) { chunk in
                read += chunk.count
                try emit(chunk)
            }
        }
        report.bytesRead += read
    }

    func transform(
        from source: URL,
        range: ResolvedByteRange?,
        through transform: any SegmentTransform,
        to output: URL,
        report: inout PlaylistDecryption.Report
    ) throws {
        var read = 0
        report.bytesWritten += try write(to: output) { emit in
            try forEachChunk(of: source, range: range) { chunk in
                read += chunk.count
                try transform.process(chunk) { try emit($0) }
            }
            try transform.finish { try emit($0) }
        }
        report.bytesRead += read
    }

    /// Calls `body` with consecutive chunks of the file (or of the byte range).
    private func forEachChunk(
        of url: URL,
        range: ResolvedByteRange?,
        allowShort: Bool = false,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let read: Int64
        do {
            read = try ChunkedFile(url).forEachChunk(
                from: Int64(range?.offset ?? 0),
                length: range.map { Int64($0.length) },
                chunkSize: Self.bufferSize,
                body
            )
        } catch let error as FileReadError {
            throw PlaylistDecryptionError.unreadable(path: url.path, reason: error.reason)
        }
        if let range, !allowShort, read < Int64(range.length) {
            throw PlaylistDecryptionError.unreadable(path: url.path, reason: "the file ends before the byte range \(range) does")
        }
    }

    /// Writes through `produce` into an ``AtomicFile`` replacing `output`, committed (and synced when `durable`) once
    /// `produce` returns.
    /// - Returns: the number of bytes written.
    private func write(
        to output: URL,
        _ produce: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void
    ) throws -> Int {
        let file: AtomicFile
        do {
            file = try AtomicFile(replacing: output.path)
        } catch {
            throw PlaylistDecryptionError.output(path: error.path, reason: error.reason)
        }
        var written = 0
        // Output is gathered into one buffer and written a megabyte at a time: a SAMPLE-AES transport stream is
        // emitted packet by packet, and a system call per 188 bytes would cost more than the decryption.
        let pending = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 16)
        defer { pending.deallocate() }
        var pendingCount = 0
        func flush() throws {
            try file.write(UnsafeRawBufferPointer(rebasing: pending[0..<pendingCount]))
            pendingCount = 0
        }
        do {
            try produce { bytes in
                var offset = 0
                while offset < bytes.count {
                    let count = min(bytes.count - offset, Self.bufferSize - pendingCount)
                    UnsafeMutableRawBufferPointer(rebasing: pending[pendingCount..<pendingCount + count])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count]))
                    pendingCount += count
                    offset += count
                    if pendingCount == Self.bufferSize { try flush() }
                }
                written += bytes.count
            }
            try flush()
            try file.commit(durable: durable)
        } catch let error as AtomicFile.Failure {
            file.discard()
            throw PlaylistDecryptionError.output(path: error.path, reason: error.reason)
        } catch {
            file.discard()
            throw error
        }
        return written
    }
}
