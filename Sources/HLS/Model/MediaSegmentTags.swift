public import Foundation

/// EXT-X-DATERANGE (RFC 8216bis 4.4.5.1).
public struct DateRange: Hashable, Sendable, Codable {
    public var id: String
    public var classAttribute: String?
    public var startDate: String?
    public var cue: String?
    public var endDate: String?
    public var duration: Double?
    public var plannedDuration: Double?
    public var endOnNext: Bool?
    /// SCTE35-CMD, SCTE35-OUT, SCTE35-IN and `X-` client attributes, as written.
    public var otherAttributes: [Attribute]

    public init(
        id: String,
        classAttribute: String? = nil,
        startDate: String? = nil,
        cue: String? = nil,
        endDate: String? = nil,
        duration: Double? = nil,
        plannedDuration: Double? = nil,
        endOnNext: Bool? = nil,
        otherAttributes: [Attribute] = []
    ) {
        self.id = id
        self.classAttribute = classAttribute
        self.startDate = startDate
        self.cue = cue
        self.endDate = endDate
        self.duration = duration
        self.plannedDuration = plannedDuration
        self.endOnNext = endOnNext
        self.otherAttributes = otherAttributes
    }
}

/// EXT-X-PART: a partial segment of a low-latency playlist (RFC 8216bis 4.4.4.9).
public struct PartialSegment: Hashable, Sendable, Codable {
    public var uri: String
    public var duration: Double
    public var independent: Bool?
    public var byteRange: ByteRange?
    public var gap: Bool?
    public var otherAttributes: [Attribute]

    public init(
        uri: String,
        duration: Double,
        independent: Bool? = nil,
        byteRange: ByteRange? = nil,
        gap: Bool? = nil,
        otherAttributes: [Attribute] = []
    ) {
        self.uri = uri
        self.duration = duration
        self.independent = independent
        self.byteRange = byteRange
        self.gap = gap
        self.otherAttributes = otherAttributes
    }
}

/// EXT-X-SERVER-CONTROL (RFC 8216bis 4.4.3.8).
public struct ServerControl: Hashable, Sendable, Codable {
    public var canSkipUntil: Double?
    public var canSkipDateRanges: Bool?
    public var holdBack: Double?
    public var partHoldBack: Double?
    public var canBlockReload: Bool?
    public var otherAttributes: [Attribute]

    public init(
        canSkipUntil: Double? = nil,
        canSkipDateRanges: Bool? = nil,
        holdBack: Double? = nil,
        partHoldBack: Double? = nil,
        canBlockReload: Bool? = nil,
        otherAttributes: [Attribute] = []
    ) {
        self.canSkipUntil = canSkipUntil
        self.canSkipDateRanges = canSkipDateRanges
        self.holdBack = holdBack
        self.partHoldBack = partHoldBack
        self.canBlockReload = canBlockReload
        self.otherAttributes = otherAttributes
    }
}

/// EXT-X-PRELOAD-HINT (RFC 8216bis 4.4.5.3).
public struct PreloadHint: Hashable, Sendable, Codable {
    /// `PART` or `MAP`.
    public var type: String
    public var uri: String
    public var byteRangeStart: Int?
    public var byteRangeLength: Int?
    public var otherAttributes: [Attribute]

    public init(type: String, uri: String, byteRangeStart: Int? = nil, byteRangeLength: Int? = nil, otherAttributes: [Attribute] = []) {
        self.type = type
        self.uri = uri
        self.byteRangeStart = byteRangeStart
        self.byteRangeLength = byteRangeLength
        self.otherAttributes = otherAttributes
    }
}

/// EXT-X-SKIP: segments a delta update left out (RFC 8216bis 4.4.5.2).
public struct Skip: Hashable, Sendable, Codable {
    public var skippedSegments: Int
    public var recentlyRemovedDateRanges: String?

    public init(skippedSegments: Int, recentlyRemovedDateRanges: String? = nil) {
        self.skippedSegments = skippedSegments
        self.recentlyRemovedDateRanges = recentlyRemovedDateRanges
    }
}

/// EXT-X-RENDITION-REPORT (RFC 8216bis 4.4.5.4).
public struct RenditionReport: Hashable, Sendable, Codable {
    public var uri: String?
    public var lastMediaSequence: Int?
    public var lastPart: Int?
    public var otherAttributes: [Attribute]

    public init(uri: String? = nil, lastMediaSequence: Int? = nil, lastPart: Int? = nil, otherAttributes: [Attribute] = []) {
        self.uri = uri
        self.lastMediaSequence = lastMediaSequence
        self.lastPart = lastPart
        self.otherAttributes = otherAttributes
    }
}

/// A tag that stands before a media segment's URI, in playlist order.
///
/// Order matters: an EXT-X-MAP is encrypted with the keys in effect where it appears, so a KEY before a MAP and a
/// KEY after it mean different things.
public enum SegmentTag: Hashable, Sendable {
    case key(EncryptionKey)
    case map(MediaInitializationSection)
    case byteRange(ByteRange)
    case discontinuity
    /// EXT-X-PROGRAM-DATE-TIME as written (ISO 8601); see ``MediaSegment/programDateTime``.
    case programDateTime(String)
    case dateRange(DateRange)
    case gap
    case bitrate(Int)
    case part(PartialSegment)
    /// An unknown tag or a comment, verbatim.
    case other(String)
}

/// A media segment: its URI, EXTINF, and the tags before it.
public struct MediaSegment: Hashable, Sendable, Codable {
    public var uri: String
    public var duration: Double
    public var title: String?
    public var tags: [SegmentTag]

    public init(uri: String, duration: Double, title: String? = nil, tags: [SegmentTag] = []) {
        self.uri = uri
        self.duration = duration
        self.title = title
        self.tags = tags
    }

    /// EXT-X-BYTERANGE as written.
    public var byteRange: ByteRange? {
        tags.lazy.compactMap { if case .byteRange(let range) = $0 { range } else { nil } }.last
    }

    public var isDiscontinuity: Bool { tags.contains(.discontinuity) }
    public var isGap: Bool { tags.contains(.gap) }

    /// EXT-X-PROGRAM-DATE-TIME as a date.
    public var programDateTime: Date? {
        tags.lazy.compactMap { if case .programDateTime(let text) = $0 { ProgramDateTime.parse(text) } else { nil } }.last
    }

    /// The EXT-X-KEY tags written before this segment (not the keys in effect; see ``ResolvedSegment``).
    public var keyTags: [EncryptionKey] { tags.compactMap { if case .key(let key) = $0 { key } else { nil } } }

    /// The EXT-X-MAP written before this segment, if any.
    public var mapTag: MediaInitializationSection? {
        tags.lazy.compactMap { if case .map(let map) = $0 { map } else { nil } }.last
    }

    public var dateRanges: [DateRange] { tags.compactMap { if case .dateRange(let range) = $0 { range } else { nil } } }
    public var parts: [PartialSegment] { tags.compactMap { if case .part(let part) = $0 { part } else { nil } } }
}

/// Reads EXT-X-PROGRAM-DATE-TIME values (ISO 8601 with a time zone, optional fractional seconds).
enum ProgramDateTime {
    static func parse(_ text: String) -> Date? {
        // Only this shape reaches the date parser: a date, `T`, a time, a fraction, a zone. ICU's parser traps (SIGFPE)
        // on some hostile forms, a fraction of hundreds of digits among them (fuzz finding, 2026-12-08).
        let shape = /([0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]{1,1000}))?([Zz]|[+-][0-9]{2}:?[0-9]{2})/
        guard text.utf8.count <= 1_100, let match = text.wholeMatch(of: shape) else { return nil }
        // Nine fraction digits are a nanosecond, past what a date holds; more say nothing more.
        let text = String(match.output.1) + (match.output.2.map { "." + $0.prefix(9) } ?? "") + String(match.output.3)
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = withFraction.date(from: text) { return date }
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        return plain.date(from: text)
    }
}

extension SegmentTag: Codable {
    private enum CodingKeys: String, CodingKey {
        case type, key, map, byteRange, programDateTime, dateRange, bitrate, part, text
    }

    /// JSON: `{"type": "key", "key": {...}}`, `{"type": "discontinuity"}`, `{"type": "other", "text": "..."}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .key(let key):
            try container.encode("key", forKey: .type)
            try container.encode(key, forKey: .key)
        case .map(let map):
            try container.encode("map", forKey: .type)
            try container.encode(map, forKey: .map)
        case .byteRange(let range):
            try container.encode("byteRange", forKey: .type)
            try container.encode(range, forKey: .byteRange)
        case .discontinuity:
            try container.encode("discontinuity", forKey: .type)
        case .programDateTime(let text):
            try container.encode("programDateTime", forKey: .type)
            try container.encode(text, forKey: .programDateTime)
        case .dateRange(let range):
            try container.encode("dateRange", forKey: .type)
            try container.encode(range, forKey: .dateRange)
        case .gap:
            try container.encode("gap", forKey: .type)
        case .bitrate(let bitrate):
            try container.encode("bitrate", forKey: .type)
            try container.encode(bitrate, forKey: .bitrate)
        case .part(let part):
            try container.encode("part", forKey: .type)
            try container.encode(part, forKey: .part)
        case .other(let text):
            try container.encode("other", forKey: .type)
            try container.encode(text, forKey: .text)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(String.self, forKey: .type) {
        case "key": self = .key(try container.decode(EncryptionKey.self, forKey: .key))
        case "map": self = .map(try container.decode(MediaInitializationSection.self, forKey: .map))
        case "byteRange": self = .byteRange(try container.decode(ByteRange.self, forKey: .byteRange))
        case "discontinuity": self = .discontinuity
        case "programDateTime": self = .programDateTime(try container.decode(String.self, forKey: .programDateTime))
        case "dateRange": self = .dateRange(try container.decode(DateRange.self, forKey: .dateRange))
        case "gap": self = .gap
        case "bitrate": self = .bitrate(try container.decode(Int.self, forKey: .bitrate))
        case "part": self = .part(try container.decode(PartialSegment.self, forKey: .part))
        case "other": self = .other(try container.decode(String.self, forKey: .text))
        case let type:
            throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "unknown segment tag \(type)")
        }
    }
}
