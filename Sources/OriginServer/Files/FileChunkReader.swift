import Foundation
import NIOCore
import NIOPosix
import StowageCore

/// Reads a byte range of a file in chunks on NIO's blocking thread pool, so no chunk larger than asked is ever in
/// memory and no event loop or cooperative thread blocks on the disk. The reading itself is ``StowageCore/ChunkedFile``'s,
/// straight into the response's buffer.
struct FileChunkReader: Sendable {
    /// The file could not be opened or read (it may have been removed or shrunk since it was looked up).
    struct ReadError: Error, Hashable {
        var path: String
        var errno: Int32
    }

    private let file: ChunkedFile
    private let threadPool: NIOThreadPool
    private let allocator = ByteBufferAllocator()

    private init(file: ChunkedFile, threadPool: NIOThreadPool) {
        self.file = file
        self.threadPool = threadPool
    }

    /// Opens `path`, runs `body` with a reader and closes the file once `body` has ended and the reader is released.
    static func withReader<Result: Sendable>(
        path: String,
        threadPool: NIOThreadPool = .singleton,
        _ body: (FileChunkReader) async throws -> Result
    ) async throws -> Result {
        let file = try await threadPool.runIfActive {
            do throws(FileReadError) {
                return try ChunkedFile(URL(fileURLWithPath: path))
            } catch {
                throw ReadError(path: path, errno: error.code)
            }
        }
        return try await body(FileChunkReader(file: file, threadPool: threadPool))
    }

    /// Reads exactly `length` bytes at `offset`.
    /// - Throws: ``ReadError`` on an I/O error or when the file ends early.
    func read(offset: Int, length: Int) async throws -> ByteBuffer {
        let (file, allocator) = (self.file, self.allocator)
        return try await threadPool.runIfActive {
            var buffer = allocator.buffer(capacity: length)
            var failure: FileReadError?
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { pointer in
                do throws(FileReadError) {
                    return try file.read(into: UnsafeMutableRawBufferPointer(rebasing: pointer[0..<length]), at: Int64(offset))
                } catch {
                    failure = error
                    return 0
                }
            }
            if let failure { throw ReadError(path: file.url.path, errno: failure.code) }
            // The file ended early (it shrank since it was looked up).
            guard buffer.readableBytes == length else { throw ReadError(path: file.url.path, errno: 0) }
            return buffer
        }
    }
}
