/// Reads the bits of an H.264 NAL unit's payload (ITU-T H.264 7.2), dropping emulation_prevention_three_byte
/// (a 0x03 after two zero bytes, 7.4.1) and counting the raw bytes consumed, which is what a slice header's size in
/// the stored sample is.
struct NALBitReader {
    private let bytes: [UInt8]
    private let start: Int
    private let end: Int
    private var index: Int
    private var current: UInt8 = 0
    private var bitsLeft = 0
    private var zeroRun = 0
    private let segment: String

    /// Reads `bytes[range]`, the NAL unit without its header byte.
    init(_ bytes: [UInt8], range: Range<Int>, segment: String) {
        self.bytes = bytes
        self.start = range.lowerBound
        self.end = range.upperBound
        self.index = range.lowerBound
        self.segment = segment
    }

    /// Raw bytes read so far, counting a partly read byte: the clear bytes a header needs.
    var consumedBytes: Int { index - start }

    private func truncated() -> SegmentCryptoError {
        .malformedContainer(segment: segment, detail: "an H.264 NAL unit ends inside its header or parameter set")
    }

    private mutating func loadByte() throws(SegmentCryptoError) {
        guard index < end else { throw truncated() }
        var byte = bytes[index]
        index += 1
        if zeroRun >= 2 && byte == 0x03 {
            guard index < end else { throw truncated() }
            byte = bytes[index]
            index += 1
            zeroRun = 0
        }
        zeroRun = byte == 0 ? zeroRun + 1 : 0
        current = byte
        bitsLeft = 8
    }

    mutating func bit() throws(SegmentCryptoError) -> UInt32 {
        if bitsLeft == 0 { try loadByte() }
        bitsLeft -= 1
        return UInt32(current >> UInt8(bitsLeft)) & 1
    }

    mutating func flag() throws(SegmentCryptoError) -> Bool { try bit() == 1 }

    /// u(n), n at most 32.
    mutating func bits(_ count: Int) throws(SegmentCryptoError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<count { value = value << 1 | (try bit()) }
        return value
    }

    mutating func skipBits(_ count: Int) throws(SegmentCryptoError) {
        for _ in 0..<count { _ = try bit() }
    }

    /// ue(v), Exp-Golomb (ITU-T H.264 9.1); values past 2^32 - 2 are refused.
    mutating func unsignedExpGolomb() throws(SegmentCryptoError) -> UInt32 {
        var leadingZeros = 0
        while try bit() == 0 {
            leadingZeros += 1
            guard leadingZeros < 32 else {
                throw .malformedContainer(segment: segment, detail: "an H.264 Exp-Golomb code has more than 31 leading zero bits")
            }
        }
        return (UInt32(1) << UInt32(leadingZeros)) - 1 + (try bits(leadingZeros))
    }

    /// se(v) (ITU-T H.264 9.1.1).
    mutating func signedExpGolomb() throws(SegmentCryptoError) -> Int {
        let code = Int(try unsignedExpGolomb())
        return code % 2 == 1 ? (code + 1) / 2 : -(code / 2)
    }

    /// ue(v) that must not exceed `maximum`, so hostile values cannot drive loops or indexes.
    mutating func unsignedExpGolomb(max maximum: UInt32, _ name: String) throws(SegmentCryptoError) -> Int {
        let value = try unsignedExpGolomb()
        guard value <= maximum else {
            throw .malformedContainer(segment: segment, detail: "H.264 \(name) is \(value), more than \(maximum)")
        }
        return Int(value)
    }
}
