/// The protocol's base64: the standard alphabet with padding (RFC 4648 section 4), decoded strictly.
///
/// Every binary value on the wire (keys, nonces, signatures, payloads) uses it (docs/key-protocol.md, "Conventions").
/// Decoding accepts only the canonical form: no whitespace, no URL-safe alphabet, the length a multiple of 4, `=` only
/// as the final padding, and the unused bits of the last character zero (RFC 4648 section 3.5), so every byte string
/// has exactly one accepted text and a signature or a nonce cannot be re-encoded into a second spelling.
///
/// ```swift
/// StrictBase64.encode([0xfb, 0xff])          // "+/8="
/// StrictBase64.decode("+/8=")                // [0xfb, 0xff]
/// StrictBase64.decode("+/9=")                // nil: non-zero unused bits
/// StrictBase64.decode(nonce, byteCount: 16)  // nil unless exactly 16 bytes
/// ```
public enum StrictBase64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let padding = UInt8(ascii: "=")
    /// The 6-bit value of each ASCII character, 0xff for characters outside the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xff, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// Encodes `bytes` as standard, padded base64.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            output.append(alphabet[Int(group >> 18 & 0x3f)])
            output.append(alphabet[Int(group >> 12 & 0x3f)])
            output.append(second == nil ? padding : alphabet[Int(group >> 6 & 0x3f)])
            output.append(third == nil ? padding : alphabet[Int(group & 0x3f)])
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes canonical standard base64 with padding.
    ///
    /// - Returns: The bytes, or `nil` if the text is not canonical padded base64 (see the type's summary).
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count / 4 * 3)
        var index = 0
        while index < input.count {
            let isLast = index + 4 == input.count
            let c0 = values[Int(input[index])]
            let c1 = values[Int(input[index + 1])]
            guard c0 != 0xff, c1 != 0xff else { return nil }
            let p2 = input[index + 2] == padding
            let p3 = input[index + 3] == padding
            // Padding only at the very end, and "=" never followed by a data character.
            guard !p2 && !p3 || isLast, !p2 || p3 else { return nil }
            let c2 = p2 ? 0 : values[Int(input[index + 2])]
            let c3 = p3 ? 0 : values[Int(input[index + 3])]
            guard c2 != 0xff, c3 != 0xff else { return nil }
            let group = UInt32(c0) << 18 | UInt32(c1) << 12 | UInt32(c2) << 6 | UInt32(c3)
            output.append(UInt8(group >> 16 & 0xff))
            if p2 {
                // RFC 4648 section 3.5: the bits that do not form a whole byte must be zero.
                guard c1 & 0x0f == 0 else { return nil }
            } else if p3 {
                guard c2 & 0x03 == 0 else { return nil }
                output.append(UInt8(group >> 8 & 0xff))
            } else {
                output.append(UInt8(group >> 8 & 0xff))
                output.append(UInt8(group & 0xff))
            }
            index += 4
        }
        return output
    }

    /// Decodes canonical base64 that must hold exactly `byteCount` bytes (a 32-byte key, a 16-byte nonce...).
    ///
    /// - Returns: The bytes, or `nil` if the text is not canonical or decodes to another length.
    public static func decode(_ text: some StringProtocol, byteCount: Int) -> [UInt8]? {
        // Checked before decoding so an oversized value costs nothing.
        guard text.utf8.count == (byteCount + 2) / 3 * 4, let bytes = decode(text), bytes.count == byteCount else { return nil }
        return bytes
    }
}
