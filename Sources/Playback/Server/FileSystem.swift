import Foundation
import StowageCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The few file operations playback needs, on plain descriptors: bounded reads, never a whole segment in memory.
enum FileSystem {
    /// The read size when streaming or hashing a file.
    static let chunkSize = 256 * 1024

    static func exists(_ url: URL) -> Bool {
        var info = stat()
        return stat(url.path, &info) == 0
    }

    /// The size of a regular file, nil when there is none.
    static func size(of url: URL) -> Int64? {
        var info = stat()
        guard stat(url.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// The lowercase hex SHA-256 of a file, read a chunk at a time; nil when it cannot be read.
    static func sha256(of url: URL) -> String? {
        guard let file = ReadableFile(url) else { return nil }
        var hasher = SHA256Hasher()
        let complete = (try? file.forEachChunk(size: chunkSize) { hasher.update($0) }) != nil
        return complete ? Hex.encode(hasher.finalize()) : nil
    }
}

/// A file open for reading; closed when released.
final class ReadableFile {
    let descriptor: Int32
    let url: URL

    init?(_ url: URL) {
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
        self.url = url
    }

    deinit { close(descriptor) }

    /// The file's size now.
    var size: Int64? {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? Int64(info.st_size) : nil
    }

    /// Up to `count` bytes from `offset`.
    func read(count: Int, at offset: Int64) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { raw in
                pread(descriptor, raw.baseAddress! + filled, count - filled, off_t(offset) + off_t(filled))
            }
            if got < 0 {
                if errno == EINTR { continue }
                throw FileReadError(path: url.path, code: errno)
            }
            if got == 0 { break }
            filled += got
        }
        return Array(bytes.prefix(filled))
    }

    /// Calls `body` with consecutive chunks of the whole file.
    func forEachChunk(size: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        var offset: off_t = 0
        while true {
            let got = pread(descriptor, buffer.baseAddress, size, offset)
            if got < 0 {
                if errno == EINTR { continue }
                throw FileReadError(path: url.path, code: errno)
            }
            if got == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            offset += off_t(got)
        }
    }
}

/// A failed read.
struct FileReadError: Error, CustomStringConvertible {
    var path: String
    var code: Int32

    var description: String { "cannot read \(path): \(String(cString: strerror(code)))" }
}
