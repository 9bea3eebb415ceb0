/// An EXT-X-KEY or EXT-X-SESSION-KEY tag (RFC 8216bis 4.4.4.4, 4.4.6.5).
public struct EncryptionKey: Hashable, Sendable, Codable {
    /// The KEYFORMAT a key has when the attribute is absent.
    public static let identityKeyFormat = "identity"

    public var method: EncryptionMethod
    /// The key URI as written (after variable substitution), nil for METHOD=NONE.
    public var uri: String?
    /// The IV attribute's hex digits as written, without `0x`; nil when absent.
    public var iv: String?
    /// KEYFORMAT as written; nil means `identity`.
    public var keyFormat: String?
    public var keyFormatVersions: String?
    /// Attributes this model does not name, kept for round trips.
    public var otherAttributes: [Attribute]

    public init(
        method: EncryptionMethod,
        uri: String? = nil,
        iv: String? = nil,
        keyFormat: String? = nil,
        keyFormatVersions: String? = nil,
        otherAttributes: [Attribute] = []
    ) {
        self.method = method
        self.uri = uri
        self.iv = iv
        self.keyFormat = keyFormat
        self.keyFormatVersions = keyFormatVersions
        self.otherAttributes = otherAttributes
    }

    /// KEYFORMAT, with the default `identity` filled in.
    public var effectiveKeyFormat: String { keyFormat ?? Self.identityKeyFormat }

    /// The explicit IV as 16 bytes, or nil when the tag has none.
    ///
    /// Fewer than 32 hex digits are read as the leading bytes of the IV followed by zero bytes: Shaka Packager
    /// writes an 8-byte IV as `IV=0x3334353637383930` and encrypts with those bytes then eight zeros, and ffmpeg
    /// decrypts it the same way. The parser warns when it meets one.
    public var ivBytes: [UInt8]? {
        guard let iv else { return nil }
        return Self.ivBytes(fromHexDigits: iv)
    }

    static func ivBytes(fromHexDigits digits: String) -> [UInt8]? {
        var hex = Array(digits.utf8)
        guard hex.count <= 32, !hex.isEmpty else { return nil }
        if hex.count % 2 == 1 { hex.insert(UInt8(ascii: "0"), at: 0) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        var index = 0
        while index < hex.count {
            guard let high = hexValue(hex[index]), let low = hexValue(hex[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes + [UInt8](repeating: 0, count: 16 - bytes.count)
    }

    private static func hexValue(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// RFC 8216bis 5.2: without an IV attribute, the IV is the Media Sequence Number as a 128-bit big-endian integer.
    public static func iv(forMediaSequence sequence: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 16)
        var value = UInt64(truncatingIfNeeded: sequence)
        for index in stride(from: 15, through: 8, by: -1) {
            bytes[index] = UInt8(truncatingIfNeeded: value)
            value >>= 8
        }
        return bytes
    }
}

/// An EXT-X-MAP tag: the Media Initialization Section for the segments that follow it (RFC 8216bis 4.4.4.5).
public struct MediaInitializationSection: Hashable, Sendable, Codable {
    public var uri: String
    /// BYTERANGE; a missing offset means 0 for EXT-X-MAP.
    public var byteRange: ByteRange?
    public var otherAttributes: [Attribute]

    public init(uri: String, byteRange: ByteRange? = nil, otherAttributes: [Attribute] = []) {
        self.uri = uri
        self.byteRange = byteRange
        self.otherAttributes = otherAttributes
    }
}
