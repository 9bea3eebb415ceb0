#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Fast searches over an H.264 Annex B byte stream (ISO/IEC 14496-10 Annex B and 7.4.1).
///
/// Every pattern that matters (a start code `00 00 01`, an emulation prevention byte `00 00 03`, a byte that needs
/// one) begins with two zero bytes, and coded video has few zeros: the searches jump from zero byte to zero byte
/// with `memchr` (vectorized in the C library) and look closer only there.
enum AnnexBScanner {
    /// The index of the first `00 00 01` start code prefix at or after `from` that ends before `end`, or nil.
    /// Appends to `emulationPrevention` the index of every emulation prevention byte (the `03` of `00 00 03`, its
    /// zeros counted from `from` or after the previous one) before it.
    @inline(__always)
    static func startCode(in p: UnsafePointer<UInt8>, from: Int, end: Int, emulationPrevention: inout [Int]) -> Int? {
        var index = from
        while let zero = nextZeroPair(in: p, from: index, end: end) {
            guard zero + 2 < end else { return nil }
            switch p[zero + 2] {
            case 1:
                return zero
            case 3:
                emulationPrevention.append(zero + 2)
                index = zero + 3
            case 0:
                index = zero + 1
            default:
                index = zero + 3
            }
        }
        return nil
    }

    /// The index of the first `00 00 01` start code prefix at or after `from` that ends before `end`, or nil.
    @inline(__always)
    static func startCode(in p: UnsafePointer<UInt8>, from: Int, end: Int) -> Int? {
        var index = from
        while let zero = nextZeroPair(in: p, from: index, end: end) {
            guard zero + 2 < end else { return nil }
            let byte = p[zero + 2]
            if byte == 1 { return zero }
            index = byte == 0 ? zero + 1 : zero + 3
        }
        return nil
    }

    /// The index of the first byte at or after `from + 2` that 7.4.1 requires an emulation prevention byte before
    /// (a byte of 0 to 3 after two zeros, counting zeros from `from`), or nil.
    @inline(__always)
    static func byteNeedingEscape(in p: UnsafePointer<UInt8>, from: Int, end: Int) -> Int? {
        var index = from
        while let zero = nextZeroPair(in: p, from: index, end: end) {
            guard zero + 2 < end else { return nil }
            if p[zero + 2] <= 3 { return zero + 2 }
            index = zero + 3
        }
        return nil
    }

    /// The index of the first of two consecutive zero bytes at or after `from`, both before `end`, or nil.
    @inline(__always)
    static func nextZeroPair(in p: UnsafePointer<UInt8>, from: Int, end: Int) -> Int? {
        var index = from
        while index + 1 < end {
            guard let found = memchr(p + index, 0, end - index - 1) else { return nil }
            let zero = UnsafePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - p
            if p[zero + 1] == 0 { return zero }
            index = zero + 2
        }
        return nil
    }
}
