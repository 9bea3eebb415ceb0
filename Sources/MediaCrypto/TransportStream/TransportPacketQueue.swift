/// The output of a transport stream rewrite, in input order: one 188-byte slot per input packet that produces
/// output, some of them reserved for a PES packet (or PMT) that is not complete yet.
///
/// A repacketized PES goes back into the slots its input packets occupied, so the interleaving of PIDs and the
/// position of each PCR stay as they were; the queue is emitted up to the first slot still waiting for its PES.
/// A PES that needs fewer packets than it had leaves slots empty (skipped on output); one that needs more (the
/// encryptor adds emulation prevention bytes) puts the extra packets after its last slot.
final class TransportPacketQueue {
    private let storage = TransportStreamBuffer(capacity: 256 * 1024)
    /// Where the first slot not yet emitted starts in `storage`: emitted slots before it are dropped only once they
    /// outweigh the slots still held, so that holding a large PES packet does not mean moving it at every emit.
    @exclusivity(unchecked) private var head = 0
    /// The sequence number of the slot at `head`.
    @exclusivity(unchecked) private(set) var firstSequence = 0
    /// Extra packets to emit after a slot, keyed by the slot's sequence number (rare: a PES that grew).
    @exclusivity(unchecked) private var overflow: [Int: [UInt8]] = [:]

    private static let size = TransportPacketHeader.size
    /// Byte 0 of a slot that holds no packet (never the sync byte of a real one).
    private static let emptyMarker: UInt8 = 0

    /// The sequence number the next slot will get.
    var nextSequence: Int { firstSequence + (storage.count - head) / Self.size }

    /// Bytes held, for the safety limit on held-back output.
    var heldByteCount: Int { storage.count - head }

    /// Appends a copy of `packet` and returns its slot.
    @discardableResult
    func appendCopy(of packet: UnsafePointer<UInt8>) -> Int {
        let sequence = nextSequence
        storage.append(packet, count: Self.size)
        return sequence
    }

    /// Reserves an empty slot to fill later and returns it.
    func reserve() -> Int {
        let sequence = nextSequence
        storage.reserveCapacity(storage.count + Self.size)
        storage.base[storage.count] = Self.emptyMarker
        storage.count += Self.size
        return sequence
    }

    /// The 188 bytes of a slot that has not been emitted yet.
    func slot(_ sequence: Int) -> UnsafeMutablePointer<UInt8> {
        precondition(sequence >= firstSequence && sequence < nextSequence)
        return storage.base + head + (sequence - firstSequence) * Self.size
    }

    /// Leaves a reserved slot without a packet.
    func markEmpty(_ sequence: Int) {
        slot(sequence)[0] = Self.emptyMarker
    }

    /// Adds a packet to emit right after the packet in slot `sequence` (and after extras added before).
    func appendExtra(after sequence: Int, packet: UnsafePointer<UInt8>) {
        overflow[sequence, default: []].append(contentsOf: UnsafeBufferPointer(start: packet, count: Self.size))
    }

    /// Emits the slots before `limit` (skipping empty ones) and forgets them.
    func emit(before limit: Int, _ emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        let count = limit - firstSequence
        guard count > 0 else { return }
        let base = storage.base + head
        var runStart = 0
        var index = 0
        while index < count {
            let packet = base + index * Self.size
            if packet[0] == Self.emptyMarker {
                try emitRun(from: runStart, to: index, emit)
                runStart = index + 1
            } else if !overflow.isEmpty, let extra = overflow.removeValue(forKey: firstSequence + index) {
                try emitRun(from: runStart, to: index + 1, emit)
                try extra.withUnsafeBytes { try emit($0) }
                runStart = index + 1
            }
            index += 1
        }
        try emitRun(from: runStart, to: count, emit)
        head += count * Self.size
        firstSequence = limit
        if head == storage.count {
            storage.removeAll()
            head = 0
        } else if head >= storage.count - head {
            storage.removeFirst(head)
            head = 0
        }
    }

    private func emitRun(from start: Int, to end: Int, _ emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard end > start else { return }
        try emit(UnsafeRawBufferPointer(start: storage.base + head + start * Self.size, count: (end - start) * Self.size))
    }
}
