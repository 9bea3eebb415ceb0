/// An EXT-X-MEDIA tag: an alternative rendition (RFC 8216bis 4.4.6.1).
public struct Rendition: Hashable, Sendable, Codable {
    public var type: MediaType
    /// The rendition's media playlist; nil when the rendition is carried in the variant's own stream.
    public var uri: String?
    public var groupID: String
    public var language: String?
    public var associatedLanguage: String?
    public var name: String
    public var stableRenditionID: String?
    /// DEFAULT as written (absent means NO).
    public var isDefault: Bool?
    /// AUTOSELECT as written (absent means NO).
    public var autoselect: Bool?
    /// FORCED as written (subtitles only).
    public var forced: Bool?
    public var instreamID: String?
    public var bitDepth: Int?
    public var sampleRate: Int?
    public var characteristics: String?
    public var channels: String?
    public var otherAttributes: [Attribute]

    public init(
        type: MediaType,
        uri: String? = nil,
        groupID: String,
        language: String? = nil,
        associatedLanguage: String? = nil,
        name: String,
        stableRenditionID: String? = nil,
        isDefault: Bool? = nil,
        autoselect: Bool? = nil,
        forced: Bool? = nil,
        instreamID: String? = nil,
        bitDepth: Int? = nil,
        sampleRate: Int? = nil,
        characteristics: String? = nil,
        channels: String? = nil,
        otherAttributes: [Attribute] = []
    ) {
        self.type = type
        self.uri = uri
        self.groupID = groupID
        self.language = language
        self.associatedLanguage = associatedLanguage
        self.name = name
        self.stableRenditionID = stableRenditionID
        self.isDefault = isDefault
        self.autoselect = autoselect
        self.forced = forced
        self.instreamID = instreamID
        self.bitDepth = bitDepth
        self.sampleRate = sampleRate
        self.characteristics = characteristics
        self.channels = channels
        self.otherAttributes = otherAttributes
    }
}

/// CLOSED-CAPTIONS on EXT-X-STREAM-INF: a group ID, or NONE.
public enum ClosedCaptionsReference: Hashable, Sendable, Codable {
    /// `CLOSED-CAPTIONS=NONE`: no closed captions in any variant.
    case noClosedCaptions
    case group(String)
}

/// An EXT-X-STREAM-INF tag with its URI line, or an EXT-X-I-FRAME-STREAM-INF tag (RFC 8216bis 4.4.6.2, 4.4.6.3).
public struct VariantStream: Hashable, Sendable, Codable {
    public var uri: String
    public var bandwidth: Int
    public var averageBandwidth: Int?
    public var score: Double?
    public var codecs: String?
    public var supplementalCodecs: String?
    public var resolution: Resolution?
    public var frameRate: Double?
    public var hdcpLevel: String?
    public var allowedCPC: String?
    public var videoRange: String?
    public var requiredVideoLayout: String?
    public var stableVariantID: String?
    public var audio: String?
    public var video: String?
    public var subtitles: String?
    public var closedCaptions: ClosedCaptionsReference?
    public var pathwayID: String?
    /// PROGRAM-ID, removed in protocol version 6 but still written by old packagers.
    public var programID: Int?
    public var otherAttributes: [Attribute]

    public init(
        uri: String,
        bandwidth: Int,
        averageBandwidth: Int? = nil,
        score: Double? = nil,
        codecs: String? = nil,
        supplementalCodecs: String? = nil,
        resolution: Resolution? = nil,
        frameRate: Double? = nil,
        hdcpLevel: String? = nil,
        allowedCPC: String? = nil,
        videoRange: String? = nil,
        requiredVideoLayout: String? = nil,
        stableVariantID: String? = nil,
        audio: String? = nil,
        video: String? = nil,
        subtitles: String? = nil,
        closedCaptions: ClosedCaptionsReference? = nil,
        pathwayID: String? = nil,
        programID: Int? = nil,
        otherAttributes: [Attribute] = []
    ) {
        self.uri = uri
        self.bandwidth = bandwidth
        self.averageBandwidth = averageBandwidth
        self.score = score
        self.codecs = codecs
        self.supplementalCodecs = supplementalCodecs
        self.resolution = resolution
        self.frameRate = frameRate
        self.hdcpLevel = hdcpLevel
        self.allowedCPC = allowedCPC
        self.videoRange = videoRange
        self.requiredVideoLayout = requiredVideoLayout
        self.stableVariantID = stableVariantID
        self.audio = audio
        self.video = video
        self.subtitles = subtitles
        self.closedCaptions = closedCaptions
        self.pathwayID = pathwayID
        self.programID = programID
        self.otherAttributes = otherAttributes
    }
}

/// EXT-X-SESSION-DATA (RFC 8216bis 4.4.6.4).
public struct SessionData: Hashable, Sendable, Codable {
    public var dataID: String
    public var value: String?
    public var uri: String?
    public var format: String?
    public var language: String?
    public var otherAttributes: [Attribute]

    public init(
        dataID: String,
        value: String? = nil,
        uri: String? = nil,
        format: String? = nil,
        language: String? = nil,
        otherAttributes: [Attribute] = []
    ) {
        self.dataID = dataID
        self.value = value
        self.uri = uri
        self.format = format
        self.language = language
        self.otherAttributes = otherAttributes
    }
}

/// EXT-X-CONTENT-STEERING (RFC 8216bis 4.4.6.6).
public struct ContentSteering: Hashable, Sendable, Codable {
    public var serverURI: String
    public var pathwayID: String?
    public var otherAttributes: [Attribute]

    public init(serverURI: String, pathwayID: String? = nil, otherAttributes: [Attribute] = []) {
        self.serverURI = serverURI
        self.pathwayID = pathwayID
        self.otherAttributes = otherAttributes
    }
}

/// EXT-X-DEFINE (RFC 8216bis 4.4.2.3), with the value it resolved to.
public struct VariableDefinition: Hashable, Sendable, Codable {
    /// How the variable gets its value.
    public enum Source: String, Hashable, Sendable, Codable {
        /// `NAME=...,VALUE=...`
        case value
        /// `IMPORT=...`: from the multivariant playlist that loaded this media playlist.
        case `import`
        /// `QUERYPARAM=...`: from the query string of the playlist's URI.
        case queryParameter
    }

    public var source: Source
    public var name: String
    /// The value in effect (for `value`, as written).
    public var value: String

    public init(source: Source, name: String, value: String) {
        self.source = source
        self.name = name
        self.value = value
    }
}

/// EXT-X-START (RFC 8216bis 4.4.2.2).
public struct StartPoint: Hashable, Sendable, Codable {
    /// Seconds from the start (negative: from the end).
    public var timeOffset: Double
    public var precise: Bool?

    public init(timeOffset: Double, precise: Bool? = nil) {
        self.timeOffset = timeOffset
        self.precise = precise
    }
}
