import StowageCrypto

/// Decodes a hex test vector as printed in its source document, ignoring the spaces and line breaks
/// used there to group bytes. A malformed literal is a bug in the test file itself.
func hex(_ text: String) -> [UInt8] {
    let compact = String(text.filter { !$0.isWhitespace })
    guard let bytes = Hex.decode(compact) else { preconditionFailure("malformed hex in test vector: \(text)") }
    return bytes
}

/// `count` bytes counting up from `first`, as RFC 5869 A.2 writes its inputs (0x00...0x4f, ...).
func byteRange(_ first: UInt8, through last: UInt8) -> [UInt8] {
    Array(first...last)
}

/// The same bytes with one bit flipped, for tamper tests.
func flippingBit(_ bit: Int, of bytes: [UInt8]) -> [UInt8] {
    var copy = bytes
    copy[bit / 8] ^= 1 << UInt8(bit % 8)
    return copy
}
