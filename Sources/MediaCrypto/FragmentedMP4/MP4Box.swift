/// One box located inside a byte buffer (ISO/IEC 14496-12 4.2): its type and where its header and payload lie.
struct MP4Box {
    let type: FourCC
    /// Offset of the box's first byte in the buffer it was found in.
    let start: Int
    /// 8, 16 with a 64-bit `largesize`, plus 16 for a `uuid` box's extended type.
    let headerSize: Int
    /// Offset just past the box's last byte.
    let end: Int

    var size: Int { end - start }
    var payload: Range<Int> { (start + headerSize)..<end }

    /// The boxes laid end to end in `range` of `bytes`, checking that none claims more room than its parent has.
    ///
    /// - Parameter context: the parent's name for error details (`moof`, `traf`...).
    /// - Parameter isFile: `range` is a whole file, whose last box may have size 0 ("to the end of the file").
    static func children(
        of bytes: [UInt8],
        in range: Range<Int>,
        context: String,
        isFile: Bool = false,
        segment: String
    ) throws(SegmentCryptoError) -> [MP4Box] {
        var boxes: [MP4Box] = []
        var offset = range.lowerBound
        while offset < range.upperBound {
            let box = try MP4Box.at(offset, in: bytes, limit: range.upperBound, context: context, allowsSizeZero: isFile, segment: segment)
            boxes.append(box)
            offset = box.end
        }
        return boxes
    }

    /// The box starting at `offset`, which must end by `limit`.
    static func at(
        _ offset: Int,
        in bytes: [UInt8],
        limit: Int,
        context: String,
        allowsSizeZero: Bool = false,
        segment: String
    ) throws(SegmentCryptoError) -> MP4Box {
        // ISO/IEC 14496-12 4.2: size(32) type(32) [largesize(64) if size == 1] [usertype(128) if type == 'uuid'].
        guard limit - offset >= 8 else {
            throw .malformedContainer(
                segment: segment,
                detail: "\(context): \(limit - offset) stray bytes at byte \(offset) where a box header should be"
            )
        }
        let size32 = bytes.mp4UInt32(at: offset)
        let type = FourCC(rawValue: bytes.mp4UInt32(at: offset + 4))
        var headerSize = 8
        var size: Int
        switch size32 {
        case 0:
            // ISO/IEC 14496-12 4.2: size 0 means "to the end of the file", for the last top-level box only.
            guard allowsSizeZero else {
                throw .malformedContainer(
                    segment: segment,
                    detail: "\(context): box '\(type)' at byte \(offset) has size 0, allowed only at the top level"
                )
            }
            size = limit - offset
        case 1:
            guard limit - offset >= 16 else {
                throw .malformedContainer(segment: segment, detail: "\(context): box '\(type)' at byte \(offset) is cut inside its 64-bit size")
            }
            let large = bytes.mp4UInt64(at: offset + 8)
            guard large <= UInt64(Int.max) else {
                throw .malformedContainer(segment: segment, detail: "\(context): box '\(type)' at byte \(offset) claims \(large) bytes")
            }
            size = Int(large)
            headerSize = 16
        default:
            size = Int(size32)
        }
        if type == .uuid { headerSize += 16 }
        guard size >= headerSize else {
            throw .malformedContainer(
                segment: segment,
                detail: "\(context): box '\(type)' at byte \(offset) claims \(size) bytes, less than its header"
            )
        }
        guard size <= limit - offset else {
            throw .malformedContainer(
                segment: segment,
                detail: "\(context): box '\(type)' at byte \(offset) claims \(size) bytes but only \(limit - offset) remain in its parent"
            )
        }
        return MP4Box(type: type, start: offset, headerSize: headerSize, end: offset + size)
    }
}

extension [UInt8] {
    /// Big-endian box fields (ISO/IEC 14496-12 4.2) at offsets the caller has bounds-checked; named for MP4 so they
    /// stay apart from other byte helpers in the module.
    func mp4UInt16(at offset: Int) -> UInt16 { UInt16(self[offset]) << 8 | UInt16(self[offset + 1]) }
    func mp4UInt32(at offset: Int) -> UInt32 {
        UInt32(self[offset]) << 24 | UInt32(self[offset + 1]) << 16 | UInt32(self[offset + 2]) << 8 | UInt32(self[offset + 3])
    }
    func mp4UInt64(at offset: Int) -> UInt64 { UInt64(mp4UInt32(at: offset)) << 32 | UInt64(mp4UInt32(at: offset + 4)) }

    mutating func setMP4UInt32(_ value: UInt32, at offset: Int) {
        for index in 0..<4 { self[offset + index] = UInt8(truncatingIfNeeded: value >> (24 - 8 * index)) }
    }
    mutating func setMP4UInt64(_ value: UInt64, at offset: Int) {
        setMP4UInt32(UInt32(truncatingIfNeeded: value >> 32), at: offset)
        setMP4UInt32(UInt32(truncatingIfNeeded: value), at: offset + 4)
    }

    mutating func appendMP4UInt8(_ value: UInt8) { append(value) }
    mutating func appendMP4UInt16(_ value: UInt16) { append(contentsOf: [UInt8(value >> 8), UInt8(truncatingIfNeeded: value)]) }
    mutating func appendMP4UInt32(_ value: UInt32) {
        append(contentsOf: [
            UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value),
        ])
    }
    mutating func appendMP4UInt64(_ value: UInt64) {
        appendMP4UInt32(UInt32(truncatingIfNeeded: value >> 32))
        appendMP4UInt32(UInt32(truncatingIfNeeded: value))
    }
}
