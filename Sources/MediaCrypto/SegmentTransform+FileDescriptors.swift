#if canImport(Glibc)
public import StowageCore
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why streaming between file descriptors stopped.
public struct SegmentIOError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `read` or `write`.
    public let operation: String
    /// The `errno` value.
    public let errorNumber: Int32

    public init(operation: String, errorNumber: Int32) {
        self.operation = operation
        self.errorNumber = errorNumber
    }

    public var description: String { "\(code): \(message)" }
}

extension SegmentTransform {
    /// Streams a whole segment from one file descriptor through the transform into another, reading
    /// `bufferSize` bytes at a time: memory stays at one buffer whatever the segment's size.
    /// - Returns: the number of bytes read and written.
    @discardableResult
    public func run(from input: Int32, to output: Int32, bufferSize: Int = 1 << 20) throws -> (read: Int, written: Int) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var totalRead = 0
        var totalWritten = 0
        let emit: (UnsafeRawBufferPointer) throws -> Void = { bytes in
            try SegmentIOError.writeAll(bytes, to: output)
            totalWritten += bytes.count
        }
        while true {
            let count = read(input, buffer.baseAddress, bufferSize)
            if count < 0 {
                if errno == EINTR { continue }
                throw SegmentIOError(operation: "read", errorNumber: errno)
            }
            if count == 0 { break }
            totalRead += count
            try process(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), emit: emit)
        }
        try finish(emit: emit)
        return (totalRead, totalWritten)
    }

}

extension SegmentIOError {
    /// Writes all of `bytes` to `output` (``StowageCore/FileDescriptorWrite``).
    static func writeAll(_ bytes: UnsafeRawBufferPointer, to output: Int32) throws {
        if let failure = FileDescriptorWrite.all(bytes, to: output) {
            throw SegmentIOError(operation: "write", errorNumber: failure.errorNumber)
        }
    }
}

extension SegmentIOError: StowageError {
    public var code: ErrorCode { .segmentIOFailed }
    public var message: String {
        "Streaming a segment failed to \(operation): \(String(cString: strerror(errorNumber))). Check the disk (free space, "
            + "permissions) and try again."
    }
}
