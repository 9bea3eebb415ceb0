/// A bounded big-endian cursor over one box's payload: every read checks the bound and reports a short box as
/// ``SegmentCryptoError/malformedContainer(segment:detail:)`` naming the box, so hostile sizes never trap.
struct MP4Reader {
    private let bytes: [UInt8]
    private(set) var position: Int
    let end: Int
    private let context: String
    private let segment: String

    init(_ bytes: [UInt8], range: Range<Int>, context: String, segment: String) {
        self.bytes = bytes
        self.position = range.lowerBound
        self.end = range.upperBound
        self.context = context
        self.segment = segment
    }

    init(_ bytes: [UInt8], box: MP4Box, segment: String) {
        self.init(bytes, range: box.payload, context: "'\(box.type)' at byte \(box.start)", segment: segment)
    }

    var remaining: Int { end - position }

    private mutating func claim(_ count: Int) throws(SegmentCryptoError) -> Int {
        guard count >= 0, count <= end - position else {
            throw .malformedContainer(
                segment: segment,
                detail: "\(context) is too short: needs \(count) more bytes at byte \(position), has \(end - position)"
            )
        }
        defer { position += count }
        return position
    }

    mutating func uint8() throws(SegmentCryptoError) -> UInt8 { bytes[try claim(1)] }
    mutating func uint16() throws(SegmentCryptoError) -> UInt16 { bytes.mp4UInt16(at: try claim(2)) }
    mutating func uint32() throws(SegmentCryptoError) -> UInt32 { bytes.mp4UInt32(at: try claim(4)) }
    mutating func uint64() throws(SegmentCryptoError) -> UInt64 { bytes.mp4UInt64(at: try claim(8)) }
    mutating func bytes(_ count: Int) throws(SegmentCryptoError) -> [UInt8] {
        let at = try claim(count)
        return Array(bytes[at..<(at + count)])
    }
    mutating func skip(_ count: Int) throws(SegmentCryptoError) { _ = try claim(count) }

    /// A full box's version (8 bits) and flags (24 bits) (ISO/IEC 14496-12 4.2).
    mutating func versionAndFlags() throws(SegmentCryptoError) -> (version: UInt8, flags: UInt32) {
        let word = try uint32()
        return (UInt8(word >> 24), word & 0xFF_FFFF)
    }

    /// Throws a container error about this box.
    func fail(_ detail: String) -> SegmentCryptoError {
        .malformedContainer(segment: segment, detail: "\(context): \(detail)")
    }
}
