import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a byte range of a file in chunks on NIO's blocking thread pool, so no chunk larger than asked is ever in
/// memory and no event loop or cooperative thread blocks on the disk.
struct FileChunkReader: Sendable {
    /// The file could not be opened or read (it may have been removed or shrunk since it was looked up).
    struct ReadError: Error, Hashable {
        var path: String
        var errno: Int32
    }

    private let descriptor: Int32
    private let path: String
    private let threadPool: NIOThreadPool
    private let allocator = ByteBufferAllocator()

    private init(descriptor: Int32, path: String, threadPool: NIOThreadPool) {
        self.descriptor = descriptor
        self.path = path
        self.threadPool = threadPool
    }

    /// Opens `path`, runs `body` with a reader and closes the file however `body` ends.
    static func withReader<Result: Sendable>(
        path: String,
        threadPool: NIOThreadPool = .singleton,
        _ body: (FileChunkReader) async throws -> Result
    ) async throws -> Result {
        let descriptor = try await threadPool.runIfActive {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw ReadError(path: path, errno: errno) }
            return descriptor
        }
        let reader = FileChunkReader(descriptor: descriptor, path: path, threadPool: threadPool)
        do {
            let result = try await body(reader)
            _ = close(descriptor)
            return result
        } catch {
            _ = close(descriptor)
            throw error
        }
    }

    /// Reads exactly `length` bytes at `offset`.
    /// - Throws: ``ReadError`` on an I/O error or when the file ends early.
    func read(offset: Int, length: Int) async throws -> ByteBuffer {
        let descriptor = self.descriptor
        let path = self.path
        let allocator = self.allocator
        return try await threadPool.runIfActive {
            var buffer = allocator.buffer(capacity: length)
            while buffer.readableBytes < length {
                let wanted = length - buffer.readableBytes
                let position = off_t(offset + buffer.readableBytes)
                var result = 0
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: wanted) { pointer in
                    result = pread(descriptor, pointer.baseAddress, wanted, position)
                    return max(0, result)
                }
                if result < 0 {
                    if errno == EINTR { continue }
                    throw ReadError(path: path, errno: errno)
                }
                if result == 0 { throw ReadError(path: path, errno: 0) }
            }
            return buffer
        }
    }
}
