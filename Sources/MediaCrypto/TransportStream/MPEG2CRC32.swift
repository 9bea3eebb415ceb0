/// The CRC-32 of MPEG-2 PSI sections (ISO/IEC 13818-1 Annex A): polynomial 0x04C11DB7, initial value 0xFFFFFFFF,
/// no reflection, no final XOR. Over a whole section including its CRC_32 field the result is 0.
enum MPEG2CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var crc = UInt32(index) << 24
        for _ in 0..<8 {
            crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04C1_1DB7 : crc << 1
        }
        return crc
    }

    /// The CRC of `bytes`.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        table.withUnsafeBufferPointer { table in
            for byte in bytes {
                crc = table[Int((crc >> 24) ^ UInt32(byte))] ^ (crc << 8)
            }
        }
        return crc
    }
}
