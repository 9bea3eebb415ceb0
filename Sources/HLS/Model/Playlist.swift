/// A parsed playlist: either a multivariant playlist or a media playlist (RFC 8216bis 4.1).
public enum Playlist: Hashable, Sendable {
    case multivariant(MultivariantPlaylist)
    case media(MediaPlaylist)

    /// The variables this playlist defines, for the media playlists it loads (EXT-X-DEFINE IMPORT).
    public var variables: [String: String] {
        let definitions: [VariableDefinition]
        switch self {
        case .multivariant(let playlist): definitions = playlist.definitions
        case .media(let playlist): definitions = playlist.definitions
        }
        return Dictionary(definitions.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
    }
}

extension Playlist: Codable {
    private enum CodingKeys: String, CodingKey { case kind, multivariant, media }

    /// JSON: `{"kind": "multivariant", "multivariant": {...}}` or `{"kind": "media", "media": {...}}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .multivariant(let playlist):
            try container.encode("multivariant", forKey: .kind)
            try container.encode(playlist, forKey: .multivariant)
        case .media(let playlist):
            try container.encode("media", forKey: .kind)
            try container.encode(playlist, forKey: .media)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if try container.decode(String.self, forKey: .kind) == "media" {
            self = .media(try container.decode(MediaPlaylist.self, forKey: .media))
        } else {
            self = .multivariant(try container.decode(MultivariantPlaylist.self, forKey: .multivariant))
        }
    }
}

/// A multivariant playlist: variant streams, renditions and session-level tags (RFC 8216bis 4.4.6).
public struct MultivariantPlaylist: Hashable, Sendable, Codable {
    public var version: Int?
    public var independentSegments: Bool
    public var start: StartPoint?
    public var definitions: [VariableDefinition]
    public var renditions: [Rendition]
    public var variants: [VariantStream]
    public var iFrameVariants: [VariantStream]
    public var sessionData: [SessionData]
    public var sessionKeys: [EncryptionKey]
    public var contentSteering: ContentSteering?
    /// Unknown tags and comments, verbatim and in order.
    public var otherTags: [String]

    public init(
        version: Int? = nil,
        independentSegments: Bool = false,
        start: StartPoint? = nil,
        definitions: [VariableDefinition] = [],
        renditions: [Rendition] = [],
        variants: [VariantStream] = [],
        iFrameVariants: [VariantStream] = [],
        sessionData: [SessionData] = [],
        sessionKeys: [EncryptionKey] = [],
        contentSteering: ContentSteering? = nil,
        otherTags: [String] = []
    ) {
        self.version = version
        self.independentSegments = independentSegments
        self.start = start
        self.definitions = definitions
        self.renditions = renditions
        self.variants = variants
        self.iFrameVariants = iFrameVariants
        self.sessionData = sessionData
        self.sessionKeys = sessionKeys
        self.contentSteering = contentSteering
        self.otherTags = otherTags
    }

    /// The renditions of one group, in playlist order.
    public func renditions(ofType type: MediaType, inGroup groupID: String) -> [Rendition] {
        renditions.filter { $0.type == type && $0.groupID == groupID }
    }
}

/// A media playlist: the segments of one rendition (RFC 8216bis 4.4.3-4.4.5).
public struct MediaPlaylist: Hashable, Sendable, Codable {
    public var version: Int?
    public var targetDuration: Int
    /// EXT-X-MEDIA-SEQUENCE as written (absent means 0).
    public var mediaSequence: Int?
    /// EXT-X-DISCONTINUITY-SEQUENCE as written (absent means 0).
    public var discontinuitySequence: Int?
    public var playlistType: PlaylistType?
    public var iFramesOnly: Bool
    public var independentSegments: Bool
    public var start: StartPoint?
    public var definitions: [VariableDefinition]
    public var serverControl: ServerControl?
    /// EXT-X-PART-INF PART-TARGET.
    public var partTarget: Double?
    /// EXT-X-SKIP, when this is a delta update.
    public var skip: Skip?
    public var segments: [MediaSegment]
    /// Tags after the last segment's URI (the parts of a segment still being written, keys, unknown tags).
    public var trailingTags: [SegmentTag]
    public var preloadHints: [PreloadHint]
    public var renditionReports: [RenditionReport]
    /// EXT-X-ENDLIST: no more segments will be added.
    public var endList: Bool

    public init(
        version: Int? = nil,
        targetDuration: Int,
        mediaSequence: Int? = nil,
        discontinuitySequence: Int? = nil,
        playlistType: PlaylistType? = nil,
        iFramesOnly: Bool = false,
        independentSegments: Bool = false,
        start: StartPoint? = nil,
        definitions: [VariableDefinition] = [],
        serverControl: ServerControl? = nil,
        partTarget: Double? = nil,
        skip: Skip? = nil,
        segments: [MediaSegment] = [],
        trailingTags: [SegmentTag] = [],
        preloadHints: [PreloadHint] = [],
        renditionReports: [RenditionReport] = [],
        endList: Bool = false
    ) {
        self.version = version
        self.targetDuration = targetDuration
        self.mediaSequence = mediaSequence
        self.discontinuitySequence = discontinuitySequence
        self.playlistType = playlistType
        self.iFramesOnly = iFramesOnly
        self.independentSegments = independentSegments
        self.start = start
        self.definitions = definitions
        self.serverControl = serverControl
        self.partTarget = partTarget
        self.skip = skip
        self.segments = segments
        self.trailingTags = trailingTags
        self.preloadHints = preloadHints
        self.renditionReports = renditionReports
        self.endList = endList
    }

    /// The sum of the segments' EXTINF durations.
    public var totalDuration: Double { segments.reduce(0) { $0 + $1.duration } }

    /// Whether the playlist describes a finished presentation (EXT-X-ENDLIST, or PLAYLIST-TYPE VOD).
    public var isComplete: Bool { endList || playlistType == .vod }
}
