/// Splits a segment arriving in chunks into its top-level boxes (ISO/IEC 14496-12 4.2) without holding more than a
/// box header, unless the consumer asks for a whole box (a `moof`) with ``bufferBox(limit:)``.
///
/// Pull events with ``next(_:offset:)`` until it returns `nil` (the chunk is used up): a box's `header`, then either
/// its payload in `payload` pieces and `end`, or, when buffered, the whole box in `box`.
struct TopLevelBoxScanner {
    /// A top-level box header: type, position and size.
    struct Header {
        var type: FourCC
        /// Position of the box's first byte in the segment.
        var start: Int
        var headerSize: Int
        /// `nil` for size 0: the box runs to the end of the segment (ISO/IEC 14496-12 4.2).
        var size: Int?
        /// The header's bytes as read.
        var raw: [UInt8]

        var payloadStart: Int { start + headerSize }
        var end: Int? { size.map { start + $0 } }
    }

    enum Event {
        case header(Header)
        /// A piece of a streamed box's payload, pointing into the chunk.
        case payload(UnsafeRawBufferPointer)
        /// A streamed box's last byte has passed.
        case end(Header)
        /// A buffered box, header included.
        case box(Header, [UInt8])
    }

    private enum State {
        case header
        case payload(Header, remaining: Int?)
        case buffering(Header, remaining: Int)
    }

    /// Boxes of a movie fragment (ISO/IEC 14496-12 8.8, ISO/IEC 23001-7 7).
    private static let movieFragmentParts: Set<FourCC> = [.mfhd, .traf, .tfhd, .tfdt, .trun, .senc, .saiz, .saio, .sbgp, .sgpd]

    private let segment: String
    private var state = State.header
    private var headerBytes: [UInt8] = []
    private var buffer: [UInt8] = []
    /// Bytes consumed so far: the position of the next byte.
    private(set) var position = 0

    init(segment: String) {
        self.segment = segment
        headerBytes.reserveCapacity(16)
    }

    /// Asks for the box whose header was just returned to be delivered whole in a `box` event.
    ///
    /// - Throws: ``SegmentCryptoError/limitExceeded(segment:detail:)`` when it is larger than `limit` or runs to the
    ///   end of the segment.
    mutating func bufferBox(limit: Int) throws(SegmentCryptoError) {
        guard case .payload(let header, let remaining) = state, buffer.isEmpty else {
            preconditionFailure("bufferBox must follow a header event")
        }
        guard let size = header.size, let remaining, size <= limit else {
            throw .limitExceeded(
                segment: segment,
                detail:
                    "the '\(header.type)' at byte \(header.start) claims \(header.size.map(String.init) ?? "the rest of the segment"); the limit is \(limit) bytes"
            )
        }
        buffer.reserveCapacity(size)
        buffer += header.raw
        state = .buffering(header, remaining: remaining)
    }

    mutating func next(_ chunk: UnsafeRawBufferPointer, offset: inout Int) throws(SegmentCryptoError) -> Event? {
        switch state {
        case .header:
            while headerBytes.count < 8 || (headerBytes.count < 16 && headerBytes.mp4UInt32(at: 0) == 1) {
                guard offset < chunk.count else { return nil }
                headerBytes.append(chunk[offset])
                offset += 1
                position += 1
            }
            let start = position - headerBytes.count
            let size32 = headerBytes.mp4UInt32(at: 0)
            let type = FourCC(rawValue: headerBytes.mp4UInt32(at: 4))
            var size: Int?
            switch size32 {
            case 0:
                size = nil
            case 1:
                let large = headerBytes.mp4UInt64(at: 8)
                guard large >= 16, large < 1 << 62 else {
                    throw .malformedContainer(segment: segment, detail: "box '\(type)' at byte \(start) claims \(large) bytes")
                }
                size = Int(large)
            default:
                guard size32 >= 8 else {
                    throw .malformedContainer(segment: segment, detail: "box '\(type)' at byte \(start) claims \(size32) bytes, less than its header")
                }
                size = Int(size32)
            }
            // A box that lives inside a moof cannot stand at the top level: a moof that lies about its size left it here.
            guard !Self.movieFragmentParts.contains(type) else {
                throw .malformedContainer(segment: segment, detail: "a '\(type)' at byte \(start) outside any moof")
            }
            // A top-level uuid box's extended type stays in its payload: nothing here needs it.
            let header = Header(type: type, start: start, headerSize: headerBytes.count, size: size, raw: headerBytes)
            headerBytes.removeAll(keepingCapacity: true)
            state = .payload(header, remaining: size.map { $0 - header.headerSize })
            return .header(header)

        case .payload(let header, let remaining):
            if remaining == 0 {
                state = .header
                return .end(header)
            }
            guard offset < chunk.count else { return nil }
            let count = min(chunk.count - offset, remaining ?? Int.max)
            let piece = UnsafeRawBufferPointer(rebasing: chunk[offset..<(offset + count)])
            offset += count
            position += count
            state = .payload(header, remaining: remaining.map { $0 - count })
            return .payload(piece)

        case .buffering(let header, let remaining):
            let count = min(chunk.count - offset, remaining)
            buffer += chunk[offset..<(offset + count)]
            offset += count
            position += count
            guard remaining == count else {
                state = .buffering(header, remaining: remaining - count)
                return nil
            }
            state = .header
            let box = buffer
            buffer = []
            return .box(header, box)
        }
    }

    /// Checks that the segment did not stop inside a box; returns the open-ended box that the end closes, if any.
    func finish() throws(SegmentCryptoError) -> Header? {
        switch state {
        case .header:
            guard headerBytes.isEmpty else {
                throw .malformedContainer(segment: segment, detail: "the segment ends inside a box header at byte \(position - headerBytes.count)")
            }
            return nil
        case .payload(let header, let remaining):
            guard let remaining else { return header }
            // A zero remainder here means the end event was not pulled yet; callers always drain events first.
            guard remaining == 0 else {
                throw .malformedContainer(
                    segment: segment,
                    detail: "the segment ends \(remaining) bytes before the end of the '\(header.type)' at byte \(header.start)"
                )
            }
            return nil
        case .buffering(let header, let remaining):
            throw .malformedContainer(
                segment: segment,
                detail: "the segment ends \(remaining) bytes before the end of the '\(header.type)' at byte \(header.start)"
            )
        }
    }
}
