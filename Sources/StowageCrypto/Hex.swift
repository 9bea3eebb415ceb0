/// Lowercase hexadecimal text for bytes, as used in key IDs, digests and test vectors.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Encodes `bytes` as lowercase hex, two digits per byte, with no prefix or separators.
    ///
    /// ```swift
    /// Hex.encode([0xde, 0xad, 0xbe, 0xef])  // "deadbeef"
    /// ```
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var utf8: [UInt8] = []
        utf8.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            utf8.append(digits[Int(byte >> 4)])
            utf8.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    /// Decodes hex text (upper or lower case, even length, no `0x` prefix, no whitespace).
    ///
    /// - Returns: The bytes, or `nil` if the text has an odd length or a character that is not a hex digit.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        decode(utf8: text.utf8)
    }

    /// ``decode(_:)`` of a `String`, the usual case: without the generic `StringProtocol` path, whose first calls in a
    /// process went through the runtime's type look-ups (145 samples in a profile of 10 first segments served by
    /// `stowage play`, which decodes each key's IV).
    public static func decode(_ text: String) -> [UInt8]? {
        decode(utf8: text.utf8)
    }

    private static func decode(utf8: some Collection<UInt8>) -> [UInt8]? {
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var high: UInt8?
        for character in utf8 {
            guard let nibble = nibble(character) else { return nil }
            if let pending = high {
                bytes.append(pending << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
