/// A streaming transform of one segment (decryption or encryption): feed the segment's bytes in chunks of any size
/// as they arrive, receive output through `emit`, then call `finish` once.
///
/// Implementations hold at most a bounded amount of the segment (a chunk, a PES packet, a `moof`), never the whole
/// segment, and report damage as ``SegmentCryptoError`` naming the segment.
public protocol SegmentTransform: AnyObject {
    /// Transforms the next chunk; output may lag behind input.
    func process(_ chunk: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws
    /// Ends the segment, emitting what is left; throws when the segment is truncated or damaged.
    func finish(emit: (UnsafeRawBufferPointer) throws -> Void) throws
}

extension SegmentTransform {
    /// Transforms the next chunk; output may lag behind input.
    public func process(_ chunk: [UInt8], emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try chunk.withUnsafeBytes { try process($0, emit: emit) }
    }

    /// Transforms a whole segment held in memory (tests and small init sections; streaming callers use `process`).
    public func transform(_ segment: [UInt8]) throws -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(segment.count)
        try process(segment) { output.append(contentsOf: $0) }
        try finish { output.append(contentsOf: $0) }
        return output
    }
}
