/// The `tenc` defaults (ISO/IEC 23001-7 8.2) or a `seig` sample group entry (ISO/IEC 23001-7 6): the same fields.
struct EncryptionParameters: Sendable, Hashable {
    var isProtected: Bool
    var perSampleIVSize: Int
    var keyID: [UInt8]
    var constantIV: [UInt8]?
    var cryptByteBlock: Int
    var skipByteBlock: Int

    /// Reads the fields shared by `tenc` (after its version and flags) and `seig` (ISO/IEC 23001-7 6.1 and 8.2.2):
    /// reserved(8), crypt(4) skip(4) (zero in version 0), isProtected(8), Per_Sample_IV_Size(8), KID(128),
    /// then constant_IV_size(8) and constant_IV when protected with no per-sample IV.
    static func read(from reader: inout MP4Reader) throws(SegmentCryptoError) -> EncryptionParameters {
        _ = try reader.uint8()
        let pattern = try reader.uint8()
        let protectedFlag = try reader.uint8()
        let ivSize = Int(try reader.uint8())
        let keyID = try reader.bytes(16)
        guard protectedFlag <= 1 else { throw reader.fail("isProtected is \(protectedFlag), must be 0 or 1") }
        guard [0, 8, 16].contains(ivSize) else { throw reader.fail("per-sample IV size \(ivSize), must be 0, 8 or 16") }
        var constantIV: [UInt8]?
        if protectedFlag == 1 && ivSize == 0 {
            // A constant IV size of 0 leaves the IV to the caller (an HLS EXT-X-KEY IV attribute).
            let constantSize = Int(try reader.uint8())
            guard [0, 8, 16].contains(constantSize) else { throw reader.fail("constant IV size \(constantSize), must be 8 or 16") }
            if constantSize > 0 {
                // ISO/IEC 23001-7 9.1: an 8-byte IV is the upper half of the 16-byte IV, the rest zero.
                constantIV = try reader.bytes(constantSize) + [UInt8](repeating: 0, count: 16 - constantSize)
            }
        }
        return EncryptionParameters(
            isProtected: protectedFlag == 1,
            perSampleIVSize: ivSize,
            keyID: keyID,
            constantIV: constantIV,
            cryptByteBlock: Int(pattern >> 4),
            skipByteBlock: Int(pattern & 0x0F)
        )
    }

    /// The fields as `tenc` version 1 or `seig` write them.
    func serialized() -> [UInt8] {
        var bytes: [UInt8] = [0, UInt8(cryptByteBlock << 4 | skipByteBlock), isProtected ? 1 : 0, UInt8(perSampleIVSize)]
        bytes += keyID
        if isProtected && perSampleIVSize == 0 {
            bytes.append(UInt8(constantIV?.count ?? 0))
            bytes += constantIV ?? []
        }
        return bytes
    }
}
