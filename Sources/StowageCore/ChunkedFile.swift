public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A file read a chunk at a time with `pread`: the one file reader of every module (verification, decryption, playback,
/// the downloader's checks and local copies, the test origin), so that none holds a whole segment in memory or keeps
/// its own read loop. `ChunkedFile.sha256(of:)` is in StowageCrypto.
///
/// ```swift
/// let file = try ChunkedFile(url)
/// try file.forEachChunk { chunk in hasher.update(chunk) }
/// let (size, sha256) = try ChunkedFile.sha256(of: url)
/// ```
public final class ChunkedFile: @unchecked Sendable {
    /// The read size when streaming or hashing a file.
    public static let defaultChunkSize = 1 << 20

    public let url: URL
    /// The open descriptor, closed when the value is released.
    public let descriptor: Int32

    /// Opens `url` for reading.
    /// - Throws: ``FileReadError`` (`ENOENT` when there is no such file).
    public init(_ url: URL) throws(FileReadError) {
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileReadError(path: url.path, code: errno) }
        self.url = url
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// The file's size now; nil when it cannot be told.
    public var size: Int64? {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? Int64(info.st_size) : nil
    }

    /// Fills `buffer` from `offset`, stopping early only at the end of the file: the one `pread` loop.
    /// - Returns: the bytes read (fewer than `buffer.count` at the end of the file).
    /// - Throws: ``FileReadError`` for a failed read.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileReadError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let got = pread(descriptor, buffer.baseAddress! + filled, buffer.count - filled, off_t(offset) + off_t(filled))
            if got < 0 {
                if errno == EINTR { continue }
                throw FileReadError(path: url.path, code: errno)
            }
            if got == 0 { break }
            filled += got
        }
        return filled
    }

    /// Up to `count` bytes from `offset` (fewer at the end of the file).
    public func read(count: Int, at offset: Int64) throws(FileReadError) -> [UInt8] {
        // Read straight into the array's storage: no zeroing first and no copy after (a streaming server reads every
        // byte it sends through here; both showed in its profile).
        // Never for 0 bytes: that would write the count of the standard library's shared empty array, a race between
        // threads (docs/RELIABILITY.md, ThreadSanitizer).
        guard count > 0 else { return [] }
        var failure: FileReadError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            do throws(FileReadError) {
                initialized = try read(into: UnsafeMutableRawBufferPointer(buffer), at: offset)
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Calls `body` with consecutive chunks of the file, or of `length` bytes from `offset`. Each chunk but the last is
    /// `chunkSize` bytes long, so the first holds enough to detect a container.
    ///
    /// - Parameters:
    ///   - offset: where to start.
    ///   - length: how much to read; nil: to the end of the file.
    ///   - chunkSize: the buffer, allocated once.
    /// - Returns: the bytes read (fewer than `length` when the file ends first).
    /// - Throws: ``FileReadError`` for a failed read; whatever `body` throws.
    @discardableResult
    public func forEachChunk(
        from offset: Int64 = 0,
        length: Int64? = nil,
        chunkSize: Int = ChunkedFile.defaultChunkSize,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int64 {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var position = offset
        var remaining = length ?? .max
        while remaining > 0 {
            let want = Int(min(Int64(chunkSize), remaining))
            let filled = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: position)
            if filled == 0 { break }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<filled]))
            position += Int64(filled)
            remaining -= Int64(filled)
            if filled < want { break }
        }
        return position - offset
    }
}

/// A file that could not be opened or read: the path and the `errno`.
public struct FileReadError: Error, Hashable, Sendable, CustomStringConvertible {
    public var path: String
    public var code: Int32

    public init(path: String, code: Int32) {
        self.path = path
        self.code = code
    }

    /// `errno`'s words ("no such file or directory").
    public var reason: String { FileErrorText.describe(errno: code) }

    public var description: String { "cannot read \(path): \(reason)" }
}
