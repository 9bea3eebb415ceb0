/// Writes playlists as text; parsing the output gives back an equal model.
///
/// ```swift
/// let text = PlaylistWriter.write(.media(playlist))
/// ```
public enum PlaylistWriter {
    /// Choices for the written text.
    public struct Options: Sendable {
        /// Leave out EXT-X-DEFINE tags. The model already holds substituted values, so the output stays complete;
        /// offline packages are written this way ("EXT-X-DEFINE resolved").
        public var omitDefinitions: Bool

        public init(omitDefinitions: Bool = false) {
            self.omitDefinitions = omitDefinitions
        }
    }

    /// The playlist as text, with LF line ends and a final newline.
    public static func write(_ playlist: Playlist, options: Options = Options()) -> String {
        var lines = ["#EXTM3U"]
        switch playlist {
        case .multivariant(let playlist): write(playlist, options: options, into: &lines)
        case .media(let playlist): write(playlist, options: options, into: &lines)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func write(_ playlist: MultivariantPlaylist, options: Options, into lines: inout [String]) {
        if let version = playlist.version { lines.append("#EXT-X-VERSION:\(version)") }
        if playlist.independentSegments { lines.append("#EXT-X-INDEPENDENT-SEGMENTS") }
        if let start = playlist.start { lines.append(tag("EXT-X-START", startAttributes(start))) }
        if !options.omitDefinitions { lines += playlist.definitions.map(define) }
        lines += playlist.otherTags
        if let steering = playlist.contentSteering {
            var attributes = AttributeWriter()
            attributes.quoted("SERVER-URI", steering.serverURI)
            attributes.quoted("PATHWAY-ID", steering.pathwayID)
            attributes.append(steering.otherAttributes)
            lines.append(tag("EXT-X-CONTENT-STEERING", attributes))
        }
        for data in playlist.sessionData {
            var attributes = AttributeWriter()
            attributes.quoted("DATA-ID", data.dataID)
            attributes.quoted("VALUE", data.value)
            attributes.quoted("URI", data.uri)
            attributes.enumerated("FORMAT", data.format)
            attributes.quoted("LANGUAGE", data.language)
            attributes.append(data.otherAttributes)
            lines.append(tag("EXT-X-SESSION-DATA", attributes))
        }
        lines += playlist.sessionKeys.map { tag("EXT-X-SESSION-KEY", keyAttributes($0)) }
        for rendition in playlist.renditions {
            var attributes = AttributeWriter()
            attributes.enumerated("TYPE", rendition.type.rawValue)
            attributes.quoted("URI", rendition.uri)
            attributes.quoted("GROUP-ID", rendition.groupID)
            attributes.quoted("LANGUAGE", rendition.language)
            attributes.quoted("ASSOC-LANGUAGE", rendition.associatedLanguage)
            attributes.quoted("NAME", rendition.name)
            attributes.quoted("STABLE-RENDITION-ID", rendition.stableRenditionID)
            attributes.boolean("DEFAULT", rendition.isDefault)
            attributes.boolean("AUTOSELECT", rendition.autoselect)
            attributes.boolean("FORCED", rendition.forced)
            attributes.quoted("INSTREAM-ID", rendition.instreamID)
            attributes.integer("BIT-DEPTH", rendition.bitDepth)
            attributes.integer("SAMPLE-RATE", rendition.sampleRate)
            attributes.quoted("CHARACTERISTICS", rendition.characteristics)
            attributes.quoted("CHANNELS", rendition.channels)
            attributes.append(rendition.otherAttributes)
            lines.append(tag("EXT-X-MEDIA", attributes))
        }
        for variant in playlist.variants {
            lines.append(tag("EXT-X-STREAM-INF", variantAttributes(variant, includeURI: false)))
            lines.append(variant.uri)
        }
        lines += playlist.iFrameVariants.map { tag("EXT-X-I-FRAME-STREAM-INF", variantAttributes($0, includeURI: true)) }
    }

    private static func write(_ playlist: MediaPlaylist, options: Options, into lines: inout [String]) {
        if let version = playlist.version { lines.append("#EXT-X-VERSION:\(version)") }
        lines.append("#EXT-X-TARGETDURATION:\(playlist.targetDuration)")
        if let sequence = playlist.mediaSequence { lines.append("#EXT-X-MEDIA-SEQUENCE:\(sequence)") }
        if let sequence = playlist.discontinuitySequence { lines.append("#EXT-X-DISCONTINUITY-SEQUENCE:\(sequence)") }
        if let type = playlist.playlistType { lines.append("#EXT-X-PLAYLIST-TYPE:\(type.rawValue)") }
        if playlist.iFramesOnly { lines.append("#EXT-X-I-FRAMES-ONLY") }
        if playlist.independentSegments { lines.append("#EXT-X-INDEPENDENT-SEGMENTS") }
        if let start = playlist.start { lines.append(tag("EXT-X-START", startAttributes(start))) }
        if !options.omitDefinitions { lines += playlist.definitions.map(define) }
        if let control = playlist.serverControl {
            var attributes = AttributeWriter()
            attributes.decimal("CAN-SKIP-UNTIL", control.canSkipUntil)
            attributes.boolean("CAN-SKIP-DATERANGES", control.canSkipDateRanges)
            attributes.decimal("HOLD-BACK", control.holdBack)
            attributes.decimal("PART-HOLD-BACK", control.partHoldBack)
            attributes.boolean("CAN-BLOCK-RELOAD", control.canBlockReload)
            attributes.append(control.otherAttributes)
            lines.append(tag("EXT-X-SERVER-CONTROL", attributes))
        }
        if let target = playlist.partTarget { lines.append("#EXT-X-PART-INF:PART-TARGET=\(decimal(target))") }
        if let skip = playlist.skip {
            var attributes = AttributeWriter()
            attributes.integer("SKIPPED-SEGMENTS", skip.skippedSegments)
            attributes.quoted("RECENTLY-REMOVED-DATERANGES", skip.recentlyRemovedDateRanges)
            lines.append(tag("EXT-X-SKIP", attributes))
        }
        for segment in playlist.segments {
            lines += segment.tags.map(segmentTag)
            lines.append("#EXTINF:\(decimal(segment.duration)),\(segment.title ?? "")")
            lines.append(segment.uri)
        }
        lines += playlist.trailingTags.map(segmentTag)
        for hint in playlist.preloadHints {
            var attributes = AttributeWriter()
            attributes.enumerated("TYPE", hint.type)
            attributes.quoted("URI", hint.uri)
            attributes.integer("BYTERANGE-START", hint.byteRangeStart)
            attributes.integer("BYTERANGE-LENGTH", hint.byteRangeLength)
            attributes.append(hint.otherAttributes)
            lines.append(tag("EXT-X-PRELOAD-HINT", attributes))
        }
        for report in playlist.renditionReports {
            var attributes = AttributeWriter()
            attributes.quoted("URI", report.uri)
            attributes.integer("LAST-MSN", report.lastMediaSequence)
            attributes.integer("LAST-PART", report.lastPart)
            attributes.append(report.otherAttributes)
            lines.append(tag("EXT-X-RENDITION-REPORT", attributes))
        }
        if playlist.endList { lines.append("#EXT-X-ENDLIST") }
    }

    /// One segment tag as a line; used for local playlists too.
    public static func segmentTag(_ segmentTag: SegmentTag) -> String {
        switch segmentTag {
        case .key(let key): return tag("EXT-X-KEY", keyAttributes(key))
        case .map(let map):
            var attributes = AttributeWriter()
            attributes.quoted("URI", map.uri)
            attributes.quoted("BYTERANGE", map.byteRange?.description)
            attributes.append(map.otherAttributes)
            return tag("EXT-X-MAP", attributes)
        case .byteRange(let range): return "#EXT-X-BYTERANGE:\(range)"
        case .discontinuity: return "#EXT-X-DISCONTINUITY"
        case .programDateTime(let text): return "#EXT-X-PROGRAM-DATE-TIME:\(text)"
        case .dateRange(let range):
            var attributes = AttributeWriter()
            attributes.quoted("ID", range.id)
            attributes.quoted("CLASS", range.classAttribute)
            attributes.quoted("START-DATE", range.startDate)
            attributes.quoted("CUE", range.cue)
            attributes.quoted("END-DATE", range.endDate)
            attributes.decimal("DURATION", range.duration)
            attributes.decimal("PLANNED-DURATION", range.plannedDuration)
            attributes.boolean("END-ON-NEXT", range.endOnNext)
            attributes.append(range.otherAttributes)
            return tag("EXT-X-DATERANGE", attributes)
        case .gap: return "#EXT-X-GAP"
        case .bitrate(let bitrate): return "#EXT-X-BITRATE:\(bitrate)"
        case .part(let part):
            var attributes = AttributeWriter()
            attributes.decimal("DURATION", part.duration)
            attributes.quoted("URI", part.uri)
            attributes.boolean("INDEPENDENT", part.independent)
            attributes.quoted("BYTERANGE", part.byteRange?.description)
            attributes.boolean("GAP", part.gap)
            attributes.append(part.otherAttributes)
            return tag("EXT-X-PART", attributes)
        case .other(let text): return text
        }
    }

    private static func tag(_ name: String, _ attributes: AttributeWriter) -> String {
        "#\(name):\(attributes.rendered)"
    }

    private static func define(_ definition: VariableDefinition) -> String {
        switch definition.source {
        case .value: "#EXT-X-DEFINE:NAME=\"\(definition.name)\",VALUE=\"\(definition.value)\""
        case .import: "#EXT-X-DEFINE:IMPORT=\"\(definition.name)\""
        case .queryParameter: "#EXT-X-DEFINE:QUERYPARAM=\"\(definition.name)\""
        }
    }

    private static func startAttributes(_ start: StartPoint) -> AttributeWriter {
        var attributes = AttributeWriter()
        attributes.decimal("TIME-OFFSET", start.timeOffset)
        attributes.boolean("PRECISE", start.precise)
        return attributes
    }

    private static func keyAttributes(_ key: EncryptionKey) -> AttributeWriter {
        var attributes = AttributeWriter()
        attributes.enumerated("METHOD", key.method.rawValue)
        attributes.quoted("URI", key.uri)
        attributes.enumerated("IV", key.iv.map { "0x\($0)" })
        attributes.quoted("KEYFORMAT", key.keyFormat)
        attributes.quoted("KEYFORMATVERSIONS", key.keyFormatVersions)
        attributes.append(key.otherAttributes)
        return attributes
    }

    private static func variantAttributes(_ variant: VariantStream, includeURI: Bool) -> AttributeWriter {
        var attributes = AttributeWriter()
        attributes.integer("BANDWIDTH", variant.bandwidth)
        attributes.integer("AVERAGE-BANDWIDTH", variant.averageBandwidth)
        attributes.decimal("SCORE", variant.score)
        attributes.quoted("CODECS", variant.codecs)
        attributes.quoted("SUPPLEMENTAL-CODECS", variant.supplementalCodecs)
        attributes.enumerated("RESOLUTION", variant.resolution?.description)
        attributes.decimal("FRAME-RATE", variant.frameRate)
        attributes.enumerated("HDCP-LEVEL", variant.hdcpLevel)
        attributes.quoted("ALLOWED-CPC", variant.allowedCPC)
        attributes.enumerated("VIDEO-RANGE", variant.videoRange)
        attributes.quoted("REQ-VIDEO-LAYOUT", variant.requiredVideoLayout)
        attributes.quoted("STABLE-VARIANT-ID", variant.stableVariantID)
        attributes.quoted("AUDIO", variant.audio)
        attributes.quoted("VIDEO", variant.video)
        attributes.quoted("SUBTITLES", variant.subtitles)
        switch variant.closedCaptions {
        case .none: break
        case .some(.noClosedCaptions): attributes.enumerated("CLOSED-CAPTIONS", "NONE")
        case .some(.group(let group)): attributes.quoted("CLOSED-CAPTIONS", group)
        }
        attributes.quoted("PATHWAY-ID", variant.pathwayID)
        attributes.integer("PROGRAM-ID", variant.programID)
        if includeURI { attributes.quoted("URI", variant.uri) }
        attributes.append(variant.otherAttributes)
        return attributes
    }

    /// The shortest decimal text that reads back as the same Double (`10`, `9.009`).
    public static func decimal(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int(value)) }
        return "\(value)"
    }
}

/// Collects `NAME=VALUE` pairs, skipping absent values.
private struct AttributeWriter {
    private var parts: [String] = []

    var rendered: String { parts.joined(separator: ",") }

    mutating func quoted(_ name: String, _ value: String?) {
        if let value { parts.append("\(name)=\"\(value)\"") }
    }

    /// An enumerated string. The parser also accepts one in quotes, so a value read that way may hold a comma or
    /// surrounding blanks; it is quoted again, or it would not read back the same.
    mutating func enumerated(_ name: String, _ value: String?) {
        guard let value else { return }
        let needsQuotes =
            value.contains(",") || value.first?.isWhitespace == true || value.last?.isWhitespace == true
        if needsQuotes, !value.contains("\"") {
            parts.append("\(name)=\"\(value)\"")
        } else {
            parts.append("\(name)=\(value)")
        }
    }

    mutating func integer(_ name: String, _ value: Int?) {
        if let value { parts.append("\(name)=\(value)") }
    }

    mutating func decimal(_ name: String, _ value: Double?) {
        if let value { parts.append("\(name)=\(PlaylistWriter.decimal(value))") }
    }

    mutating func boolean(_ name: String, _ value: Bool?) {
        if let value { parts.append("\(name)=\(value ? "YES" : "NO")") }
    }

    mutating func append(_ attributes: [Attribute]) {
        parts += attributes.map(\.rendered)
    }
}
