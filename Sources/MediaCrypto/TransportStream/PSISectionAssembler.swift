/// Reassembles the PSI sections (ISO/IEC 13818-1 2.4.4: PAT, PMT) carried on one PID from its packets' payloads,
/// following pointer_field, sections spanning packets, several sections in one packet and 0xFF stuffing.
struct PSISectionAssembler {
    /// 2.4.4.3 and 2.4.4.8: section_length of a PAT or PMT is at most 1021, so a section is at most 1024 bytes.
    static let maximumSectionSize = 1024

    private var buffer: [UInt8] = []
    private var inProgress = false

    /// Whether a section has started and not ended.
    var hasIncompleteSection: Bool { inProgress }

    /// Feeds one packet's payload; calls `onSection` with each section it completes.
    mutating func feed(
        _ payload: UnsafeRawBufferPointer,
        unitStart: Bool,
        packetIndex: Int,
        segment: String,
        onSection: (UnsafeRawBufferPointer) throws(SegmentCryptoError) -> Void
    ) throws(SegmentCryptoError) {
        var rest = payload[...]
        if unitStart {
            guard let pointer = rest.first.map(Int.init), pointer < rest.count else {
                throw .malformedContainer(segment: segment, detail: "packet \(packetIndex): pointer_field points past the end of the packet")
            }
            rest = rest.dropFirst()
            let tail = rest.prefix(pointer)
            rest = rest.dropFirst(pointer)
            if inProgress {
                try consume(tail, segment: segment, packetIndex: packetIndex, onSection: onSection)
                guard !inProgress else {
                    throw .malformedContainer(
                        segment: segment,
                        detail: "packet \(packetIndex): a new section starts before the previous one reached its section_length"
                    )
                }
            }
            // Bytes before the pointer with no section in progress end a section that began before this segment.
            while let first = rest.first, first != 0xFF {
                inProgress = true
                buffer.removeAll(keepingCapacity: true)
                rest = try consume(rest, segment: segment, packetIndex: packetIndex, onSection: onSection)
                if inProgress { break }
            }
        } else if inProgress {
            try consume(rest, segment: segment, packetIndex: packetIndex, onSection: onSection)
        }
    }

    /// Appends bytes to the section in progress up to its end; returns the bytes left over.
    @discardableResult
    private mutating func consume(
        _ bytes: Slice<UnsafeRawBufferPointer>,
        segment: String,
        packetIndex: Int,
        onSection: (UnsafeRawBufferPointer) throws(SegmentCryptoError) -> Void
    ) throws(SegmentCryptoError) -> Slice<UnsafeRawBufferPointer> {
        var rest = bytes
        if buffer.count < 3 {
            let taken = rest.prefix(3 - buffer.count)
            buffer.append(contentsOf: taken)
            rest = rest.dropFirst(taken.count)
            guard buffer.count == 3 else { return rest }
        }
        let sectionLength = Int(buffer[1] & 0x0F) << 8 | Int(buffer[2])
        let total = 3 + sectionLength
        guard total <= Self.maximumSectionSize else {
            throw .malformedContainer(
                segment: segment,
                detail: "packet \(packetIndex): a PSI section claims section_length \(sectionLength), more than the 1021 allowed"
            )
        }
        let taken = rest.prefix(total - buffer.count)
        buffer.append(contentsOf: taken)
        rest = rest.dropFirst(taken.count)
        if buffer.count == total {
            inProgress = false
            // Array.withUnsafeBytes rethrows untyped errors; carry the typed one out by hand.
            var failure: SegmentCryptoError?
            buffer.withUnsafeBytes { section in
                do throws(SegmentCryptoError) { try onSection(section) } catch { failure = error }
            }
            if let failure { throw failure }
        }
        return rest
    }
}
