/// A video resolution, `WIDTHxHEIGHT` in a playlist.
public struct Resolution: Hashable, Sendable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    public var description: String { "\(width)x\(height)" }
}

/// A byte range as written (`n[@o]`, RFC 8216bis 4.4.4.2): a length and, optionally, the offset of its first byte.
///
/// Without an offset the range continues the previous sub-range of the same resource; ``ResolvedSegment``
/// carries the absolute offset.
public struct ByteRange: Hashable, Sendable, Codable, CustomStringConvertible {
    public var length: Int
    public var offset: Int?

    public init(length: Int, offset: Int? = nil) {
        self.length = length
        self.offset = offset
    }

    /// Reads `n[@o]`; nil when it is not two non-negative decimal integers.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2, let length = Int(parts[0]), length >= 0 else { return nil }
        var offset: Int?
        if parts.count == 2 {
            guard let value = Int(parts[1]), value >= 0 else { return nil }
            offset = value
        }
        self.init(length: length, offset: offset)
    }

    public var description: String { offset.map { "\(length)@\($0)" } ?? "\(length)" }
}

/// A byte range with its offset made absolute.
public struct ResolvedByteRange: Hashable, Sendable, Codable, CustomStringConvertible {
    public var offset: Int
    public var length: Int

    public init(offset: Int, length: Int) {
        self.offset = offset
        self.length = length
    }

    /// The HTTP `Range` header value for this range (RFC 9110 14.1.2), e.g. `bytes=100-199`.
    public var httpRangeHeader: String { "bytes=\(offset)-\(offset + length - 1)" }

    public var description: String { "\(length)@\(offset)" }
}

/// The encryption method of an EXT-X-KEY or EXT-X-SESSION-KEY tag.
///
/// A struct rather than an enum so a method from a later draft is kept as written instead of failing the parse.
/// JSON holds the raw value (the standard library's Codable for `RawRepresentable` with a `String` raw value).
public struct EncryptionMethod: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let none = EncryptionMethod(rawValue: "NONE")
    /// Whole-segment AES-128-CBC with PKCS7 padding (RFC 8216bis 5.2).
    public static let aes128 = EncryptionMethod(rawValue: "AES-128")
    /// Whole-segment AES-256-CBC, as hls.js and Shaka Player accept it.
    public static let aes256 = EncryptionMethod(rawValue: "AES-256")
    /// AES-256 in counter mode, as Shaka Player accepts it.
    public static let aes256CTR = EncryptionMethod(rawValue: "AES-256-CTR")
    /// Apple's sample encryption (MPEG-TS) or `cbcs` (fMP4).
    public static let sampleAES = EncryptionMethod(rawValue: "SAMPLE-AES")
    /// Sample encryption in counter mode (`cenc`).
    public static let sampleAESCTR = EncryptionMethod(rawValue: "SAMPLE-AES-CTR")

    public var description: String { rawValue }

    /// The bytes of the key this method takes: 32 for AES-256 and AES-256-CTR, else 16.
    public var keyLength: Int { self == .aes256 || self == .aes256CTR ? 32 : 16 }
}

/// The media type of an EXT-X-MEDIA rendition.
public struct MediaType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let audio = MediaType(rawValue: "AUDIO")
    public static let video = MediaType(rawValue: "VIDEO")
    public static let subtitles = MediaType(rawValue: "SUBTITLES")
    public static let closedCaptions = MediaType(rawValue: "CLOSED-CAPTIONS")

    public var description: String { rawValue }
}

/// EXT-X-PLAYLIST-TYPE.
public enum PlaylistType: String, Hashable, Sendable, Codable {
    case event = "EVENT"
    case vod = "VOD"
}
