#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A growable byte buffer that keeps its memory between uses, so the per-packet and per-PES work of the transport
/// stream transforms allocates nothing once the buffers have grown to the segment's largest PES packet.
///
/// A class rather than an array: the transforms work on its bytes in place through pointers (EPB removal, AES),
/// and copy-on-write checks in those loops would cost more than they protect.
final class TransportStreamBuffer {
    @exclusivity(unchecked) private(set) var base: UnsafeMutablePointer<UInt8>
    @exclusivity(unchecked) private(set) var capacity: Int
    /// The number of bytes in use, from `base`.
    @exclusivity(unchecked) var count = 0

    init(capacity: Int = 4096) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit {
        // Decrypted media passes through these buffers; do not leave it in freed memory.
        base.update(repeating: 0, count: capacity)
        base.deallocate()
    }

    /// Grows the buffer so that it holds at least `needed` bytes; keeps the bytes in use.
    func reserveCapacity(_ needed: Int) {
        guard needed > capacity else { return }
        var newCapacity = capacity
        while newCapacity < needed { newCapacity *= 2 }
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: count)
        base.update(repeating: 0, count: capacity)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    /// Appends `byteCount` bytes read from `source`.
    func append(_ source: UnsafePointer<UInt8>, count byteCount: Int) {
        guard byteCount > 0 else { return }
        reserveCapacity(count + byteCount)
        (base + count).update(from: source, count: byteCount)
        count += byteCount
    }

    /// Appends one byte.
    func append(_ byte: UInt8) {
        reserveCapacity(count + 1)
        base[count] = byte
        count += 1
    }

    /// Empties the buffer, keeping its memory.
    func removeAll() {
        count = 0
    }

    /// Removes the first `byteCount` bytes, moving the rest to the front.
    func removeFirst(_ byteCount: Int) {
        precondition(byteCount <= count)
        let rest = count - byteCount
        if rest > 0 { memmove(base, base + byteCount, rest) }
        count = rest
    }

    /// `memmove` on typed pointers: the regions may overlap (in-place compaction after removing emulation
    /// prevention bytes).
    @inline(__always)
    static func move(_ destination: UnsafeMutablePointer<UInt8>, _ source: UnsafePointer<UInt8>, _ count: Int) {
        guard count > 0, UnsafePointer(destination) != source else { return }
        memmove(destination, source, count)
    }
}
