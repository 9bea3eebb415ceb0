/// Cuts a byte stream arriving in chunks of any size into whole 188-byte transport stream packets.
///
/// Whole packets inside a chunk are handed out in place; only a packet split across chunks is copied, into a
/// 188-byte carry buffer.
struct TransportPacketFramer: ~Copyable {
    private let carry = UnsafeMutablePointer<UInt8>.allocate(capacity: TransportPacketHeader.size)
    /// Bytes of an incomplete packet waiting in `carry`.
    private(set) var carriedCount = 0

    deinit {
        carry.update(repeating: 0, count: TransportPacketHeader.size)
        carry.deallocate()
    }

    /// Calls `body` with each whole packet completed by `chunk`, in order.
    mutating func feed<Failure: Error>(
        _ chunk: UnsafeRawBufferPointer,
        _ body: (UnsafePointer<UInt8>) throws(Failure) -> Void
    ) throws(Failure) {
        guard let start = chunk.baseAddress?.assumingMemoryBound(to: UInt8.self), !chunk.isEmpty else { return }
        let size = TransportPacketHeader.size
        var offset = 0
        if carriedCount > 0 {
            let taken = min(size - carriedCount, chunk.count)
            (carry + carriedCount).update(from: start, count: taken)
            carriedCount += taken
            offset = taken
            guard carriedCount == size else { return }
            carriedCount = 0
            try body(carry)
        }
        while chunk.count - offset >= size {
            try body(start + offset)
            offset += size
        }
        let rest = chunk.count - offset
        if rest > 0 {
            carry.update(from: start + offset, count: rest)
            carriedCount = rest
        }
    }
}
