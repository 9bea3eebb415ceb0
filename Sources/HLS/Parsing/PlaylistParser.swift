public import Foundation
import StowageCore

/// A parsed playlist with the warnings the parser raised.
public struct ParsedPlaylist: Hashable, Sendable {
    public var playlist: Playlist
    public var warnings: [PlaylistWarning]
}

/// Reads multivariant and media playlists (RFC 8216 and draft-pantos-hls-rfc8216bis).
///
/// The parser is a single pass over the lines with no backtracking, so its time is linear in the input; it never
/// traps on any input (every failure is a ``PlaylistError`` naming the line).
///
/// By default it reads playlists the way players do: a deviation from RFC 8216bis that ffmpeg, hls.js or AVPlayer
/// accept (a media playlist without EXT-X-TARGETDURATION, `BANDWIDTH=1500000.0`, an IV without `0x`, an EXT-X-KEY in a
/// multivariant playlist, `#EXTINF:-1 tvg-id=...`, a blank line before `#EXTM3U`, backslashes in URIs, ...) is read
/// as they read it and reported as a ``PlaylistWarning`` with its line. With `strict: true` each of those is the
/// ``PlaylistError`` it was, as a validator wants.
///
/// ```swift
/// let parsed = try PlaylistParser.parse(text, url: URL(string: "https://example.com/master.m3u8"))
/// if case .multivariant(let playlist) = parsed.playlist { print(playlist.variants.count) }
/// ```
public enum PlaylistParser {
    /// Playlists larger than this are refused (a safety limit; real VOD playlists are a few MB at most).
    public static let maximumSize = 64 << 20

    /// Parses playlist bytes, which must be UTF-8 (a BOM is skipped).
    public static func parse(
        _ bytes: some Collection<UInt8>,
        url: URL? = nil,
        importedVariables: [String: String] = [:],
        strict: Bool = false
    ) throws(PlaylistError) -> ParsedPlaylist {
        guard bytes.count <= maximumSize else { throw .tooLarge("the playlist is over \(maximumSize >> 20) MiB") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .notUTF8 }
        return try parse(text, url: url, importedVariables: importedVariables, strict: strict)
    }

    /// Parses playlist text.
    /// - Parameters:
    ///   - text: the playlist; a UTF-8 BOM, CRLF line ends and a missing final newline are accepted.
    ///   - url: where the playlist was loaded from (after redirects); used for EXT-X-DEFINE QUERYPARAM.
    ///   - importedVariables: the variables of the multivariant playlist that named this media playlist, for
    ///     EXT-X-DEFINE IMPORT (see ``Playlist/variables``).
    ///   - strict: refuse every deviation from RFC 8216bis instead of reading it as players do with a warning.
    /// - Throws: ``PlaylistError`` with the line number and text of the first problem.
    public static func parse(
        _ text: String,
        url: URL? = nil,
        importedVariables: [String: String] = [:],
        strict: Bool = false
    ) throws(PlaylistError) -> ParsedPlaylist {
        guard text.utf8.count <= maximumSize else { throw .tooLarge("the playlist is over \(maximumSize >> 20) MiB") }
        var body = Substring(text)
        let tolerance = ToleranceLog(strict: strict)
        var state = ParserState(url: url, importedVariables: importedVariables, tolerance: tolerance)
        if body.first == "\u{FEFF}" {
            body = body.dropFirst()
            state.warn(1, "the playlist starts with a UTF-8 byte order mark, which RFC 8216bis 4.1 forbids; skipped")
        }
        // RFC 8216bis 4.1: lines end with LF or CRLF; Swift reads CRLF as one Character. A lone CR (old Mac line
        // ends) separates lines too, as players read it.
        let lines = body.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
        if !strict { state.expectedKind = ParserState.kindByScan(lines) }
        var lineNumber = 0
        var sawHeader = false
        for rawLine in lines {
            lineNumber += 1
            let line = rawLine.trimmedOfWhitespace
            if !sawHeader {
                if line.isEmpty, !strict { continue }
                guard line.hasPrefix("#EXTM3U") else {
                    // A playlist cut from a larger text (test corpora, tutorials) may lack its header; when it starts
                    // with an HLS tag it can only be one, and the package Stowage writes has the header.
                    guard !strict, line.hasPrefix("#EXT-X-") || line.hasPrefix("#EXTINF:") else { throw .notAPlaylist(String(line.prefix(80))) }
                    state.warn(
                        lineNumber,
                        "the playlist does not start with #EXTM3U (RFC 8216bis 4.3.1.1; ffmpeg, hls.js, Shaka and Media3 refuse it); "
                            + "read as HLS since it starts with an HLS tag"
                    )
                    sawHeader = true
                    try state.consume(line: line, number: lineNumber)
                    continue
                }
                if lineNumber > 1 { state.warn(lineNumber, "#EXTM3U should be the first line; \(lineNumber - 1) blank line(s) before it skipped") }
                sawHeader = true
                continue
            }
            if line.isEmpty { continue }
            try state.consume(line: line, number: lineNumber)
        }
        guard sawHeader else { throw .notAPlaylist("") }
        return try state.finish()
    }
}

private let multivariantOnlyTags: Set<String> = [
    "EXT-X-MEDIA", "EXT-X-STREAM-INF", "EXT-X-I-FRAME-STREAM-INF", "EXT-X-SESSION-DATA", "EXT-X-SESSION-KEY",
    "EXT-X-CONTENT-STEERING",
]
private let mediaOnlyTags: Set<String> = [
    "EXTINF", "EXT-X-TARGETDURATION", "EXT-X-MEDIA-SEQUENCE", "EXT-X-DISCONTINUITY-SEQUENCE", "EXT-X-ENDLIST",
    "EXT-X-PLAYLIST-TYPE", "EXT-X-I-FRAMES-ONLY", "EXT-X-PART-INF", "EXT-X-SERVER-CONTROL", "EXT-X-BYTERANGE",
    "EXT-X-DISCONTINUITY", "EXT-X-KEY", "EXT-X-MAP", "EXT-X-PROGRAM-DATE-TIME", "EXT-X-DATERANGE", "EXT-X-GAP",
    "EXT-X-BITRATE", "EXT-X-PART", "EXT-X-SKIP", "EXT-X-PRELOAD-HINT", "EXT-X-RENDITION-REPORT",
]

/// Tags a lenient parse drops when they cannot be read: none of them is needed to fetch, decrypt or play a segment,
/// and hls.js and ffmpeg skip them when they are malformed.
private let ignorableTags: Set<String> = [
    "EXT-X-START", "EXT-X-I-FRAME-STREAM-INF", "EXT-X-SESSION-DATA", "EXT-X-PROGRAM-DATE-TIME", "EXT-X-DATERANGE", "EXT-X-SKIP",
]

private enum Kind { case media, multivariant }

/// The mutable state of one parse.
private struct ParserState {
    let url: URL?
    let importedVariables: [String: String]
    /// Strict or lenient, and the deviations a lenient parse accepted.
    let tolerance: ToleranceLog
    /// Lenient parses decide the kind from the whole text first (``kindByScan(_:)``), so a stray tag of the other kind
    /// is dropped with a warning instead of making the playlist both.
    var expectedKind: Kind?

    var kind: Kind?
    var warnings: [PlaylistWarning] = []
    /// Warnings past the limit, only counted.
    var warningsOmitted = 0
    var seenOnce: Set<String> = []
    var variables: [String: String] = [:]
    var definitions: [VariableDefinition] = []
    var importLine: (number: Int, text: String)?

    // Shared header.
    var version: Int?
    var independentSegments = false
    var start: StartPoint?

    // Multivariant.
    var multivariant = MultivariantPlaylist()
    var pendingVariant: (variant: VariantStream, line: Int, text: String)?

    // Media.
    var targetDuration: Int?
    var media = MediaPlaylist(targetDuration: 0)
    var pendingTags: [SegmentTag] = []
    var pendingInf: (duration: Double, title: String?, line: Int, text: String)?
    var pendingByteRangeLine: (number: Int, text: String)?
    /// The previous segment's URI and, when it had a byte range, the offset just past that range.
    var previousSegmentRange: (uri: String, rangeEnd: Int?)?
    var keysInEffect: [String: EncryptionKey] = [:]
    static let maximumKeyFormats = 16

    init(url: URL?, importedVariables: [String: String], tolerance: ToleranceLog) {
        self.url = url
        self.importedVariables = importedVariables
        self.tolerance = tolerance
    }

    /// The kind a playlist's lines make it: media when it has EXTINF lines and no EXT-X-STREAM-INF, multivariant when
    /// the reverse; nil when it has both or neither (decided by the first tag, as in strict parsing).
    static func kindByScan(_ lines: [Substring]) -> Kind? {
        var extinf = false
        var streamInf = false
        for line in lines {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            // The tag's whole name (up to its colon): `#EXT-X-STREAM-INFO` or `#EXT-X-STREAM-INF\0...` is another tag,
            // which the parse keeps as an unknown one, and must not make the playlist read as the other kind.
            guard trimmed.hasPrefix("#EXT") else { continue }
            let name = trimmed.dropFirst().prefix { $0 != ":" }
            if name == "EXTINF" { extinf = true }
            if name == "EXT-X-STREAM-INF" { streamInf = true }
        }
        return extinf == streamInf ? nil : extinf ? .media : .multivariant
    }

    /// A deviation players accept: thrown when strict, else a warning.
    func tolerate(_ error: PlaylistError, _ line: Int, _ message: String) throws(PlaylistError) {
        try tolerance.tolerate(error, line: line, message)
    }

    mutating func consume(line: String, number: Int) throws(PlaylistError) {
        guard line.hasPrefix("#") else {
            try consumeURI(line, number: number)
            return
        }
        guard line.hasPrefix("#EXT") else {
            // A comment; kept in order.
            appendOther(line)
            return
        }
        // The tag name is what stands between `#` and the first colon.
        let tagText = line.dropFirst()
        // By scalar: a combining mark after the colon would hide it from a Character search.
        let scalars = tagText.unicodeScalars
        let colon = scalars.firstIndex(of: ":")
        let name = String(colon.map { scalars[..<$0] } ?? scalars[...])
        var value = colon.map { Substring(scalars[scalars.index(after: $0)...]) } ?? ""
        if let first = value.first, first == " " || first == "\t", !tolerance.isStrict {
            // `#EXT-X-VERSION: 10`: players skip the space (hls.js reads `VERSION): *(\d+)`).
            try tolerate(
                .malformedTag(line: number, text: line, reason: "a space after the colon"),
                number,
                "a space after the tag's colon is skipped"
            )
            value = value.drop { $0 == " " || $0 == "\t" }
        }
        guard try noteKind(of: name, line: number, text: line) else { return }
        // RFC 8216bis 4.4.6.2: the URI line follows EXT-X-STREAM-INF; unknown tags in between are tolerated.
        if let pendingVariant, multivariantOnlyTags.contains(name) || name == "EXT-X-DEFINE" {
            throw .missingURI(after: "EXT-X-STREAM-INF", line: pendingVariant.line, text: pendingVariant.text)
        }
        do throws(PlaylistError) {
            // By tag family; a tag of none is kept where it stands.
            if try consumeBasicTag(name, value, number, line) { return }
            if try consumeMultivariantTag(name, value, number, line) { return }
            if try consumeMediaPlaylistTag(name, value, number, line) { return }
            if try consumeSegmentTag(name, value, number, line) { return }
            appendOther(line)
        } catch {
            // A tag players can do without (a date range, an I-frame variant, a rendition, session data, ...) that
            // cannot be read is dropped with a warning, as hls.js and ffmpeg drop it; segments and keys stay strict.
            // Variables that do not resolve, or smuggle text, and byte ranges that overflow stay errors: they are a
            // hostile or broken playlist, not a quirk.
            guard !tolerance.isStrict, ignorableTags.contains(name),
                ![.undefinedVariable, .duplicateVariable, .invalidByteRange].contains(error.code),
                !error.reason.contains("variable substitution")
            else { throw error }
            // The dropped tag does not count as the one allowed occurrence: a later, valid one still holds.
            seenOnce.remove(name)
            try tolerate(error, number, "\(name) cannot be read (\(error.reason)); the tag is ignored, as players ignore it")
        }
    }

    /// Tags of either kind of playlist (RFC 8216bis 4.4.1 and 4.4.2). False when `name` is not one of them.
    private mutating func consumeBasicTag(_ name: String, _ value: Substring, _ number: Int, _ line: String) throws(PlaylistError) -> Bool {
        switch name {
        case "EXTM3U":
            try tolerate(.duplicateTag(line: number, text: line), number, "#EXTM3U appears again; ignored")
        case "EXT-X-VERSION":
            guard try once(name, number, line) else { return true }
            guard let value = Int(value), value > 0 else {
                throw .malformedTag(line: number, text: line, reason: "expected a positive decimal integer")
            }
            version = value
        case "EXT-X-INDEPENDENT-SEGMENTS":
            independentSegments = true
        case "EXT-X-START":
            guard try once(name, number, line) else { return true }
            var attributes = try self.attributes(value, number, line)
            guard let offset = try attributes.decimal("TIME-OFFSET", allowNegative: true) else {
                throw .missingAttribute("TIME-OFFSET", line: number, text: line)
            }
            start = StartPoint(timeOffset: offset, precise: try attributes.boolean("PRECISE"))
        case "EXT-X-DEFINE":
            try define(value, number, line)
        default:
            return false
        }
        return true
    }

    /// Multivariant playlist tags (RFC 8216bis 4.4.6). False when `name` is not one of them.
    private mutating func consumeMultivariantTag(_ name: String, _ value: Substring, _ number: Int, _ line: String) throws(PlaylistError) -> Bool {
        switch name {
        case "EXT-X-MEDIA":
            multivariant.renditions.append(try rendition(value, number, line))
        case "EXT-X-STREAM-INF":
            var attributes = try self.attributes(value, number, line)
            pendingVariant = (try variantStream(&attributes, uri: ""), number, line)
        case "EXT-X-I-FRAME-STREAM-INF":
            var attributes = try self.attributes(value, number, line)
            let uri = try attributes.requiredQuotedString("URI")
            multivariant.iFrameVariants.append(try variantStream(&attributes, uri: uri))
        case "EXT-X-SESSION-DATA":
            var attributes = try self.attributes(value, number, line)
            let data = SessionData(
                dataID: try attributes.requiredQuotedString("DATA-ID"),
                value: try attributes.quotedString("VALUE"),
                uri: try attributes.quotedString("URI"),
                format: try attributes.enumeratedString("FORMAT"),
                language: try attributes.quotedString("LANGUAGE"),
                otherAttributes: []
            )
            guard (data.value == nil) != (data.uri == nil) else {
                throw .malformedTag(line: number, text: line, reason: "EXT-X-SESSION-DATA needs exactly one of VALUE and URI")
            }
            var complete = data
            complete.otherAttributes = attributes.unconsumed
            multivariant.sessionData.append(complete)
        case "EXT-X-SESSION-KEY":
            let key = try encryptionKey(value, number, line)
            guard key.method != .none else {
                throw .invalidAttributeValue("METHOD", line: number, text: line, reason: "EXT-X-SESSION-KEY must not be NONE")
            }
            multivariant.sessionKeys.append(key)
        case "EXT-X-CONTENT-STEERING":
            guard try once(name, number, line) else { return true }
            var attributes = try self.attributes(value, number, line)
            multivariant.contentSteering = ContentSteering(
                serverURI: try attributes.requiredQuotedString("SERVER-URI"),
                pathwayID: try attributes.quotedString("PATHWAY-ID"),
                otherAttributes: []
            )
            multivariant.contentSteering?.otherAttributes = attributes.unconsumed
        default:
            return false
        }
        return true
    }

    /// Media playlist tags that describe the whole playlist (RFC 8216bis 4.4.3), Low-Latency HLS's included. False when `name` is not one of them.
    private mutating func consumeMediaPlaylistTag(_ name: String, _ value: Substring, _ number: Int, _ line: String) throws(PlaylistError) -> Bool {
        switch name {
        case "EXT-X-TARGETDURATION":
            guard try once(name, number, line) else { return true }
            if let integer = Int(value), integer >= 0 {
                targetDuration = integer
            } else if let decimal = Double(value), decimal.isFinite, decimal >= 0, decimal < 1e9 {
                targetDuration = Int(decimal.rounded(.up))
                warn(number, "EXT-X-TARGETDURATION must be an integer; read \(value) as \(targetDuration!)")
            } else {
                throw .malformedTag(line: number, text: line, reason: "expected a decimal integer")
            }
        case "EXT-X-MEDIA-SEQUENCE":
            guard try once(name, number, line) else { return true }
            media.mediaSequence = try sequenceNumber(name, value, number, line)
        case "EXT-X-DISCONTINUITY-SEQUENCE":
            guard try once(name, number, line) else { return true }
            media.discontinuitySequence = try sequenceNumber(name, value, number, line)
        case "EXT-X-ENDLIST":
            media.endList = true
        case "EXT-X-PLAYLIST-TYPE":
            guard try once(name, number, line) else { return true }
            if let type = PlaylistType(rawValue: String(value).uppercased()) {
                if type.rawValue != value {
                    try tolerate(
                        .malformedTag(line: number, text: line, reason: "expected EVENT or VOD"),
                        number,
                        "EXT-X-PLAYLIST-TYPE should be upper case; read \(value) as \(type.rawValue)"
                    )
                }
                media.playlistType = type
            } else {
                try tolerate(
                    .malformedTag(line: number, text: line, reason: "expected EVENT or VOD"),
                    number,
                    "EXT-X-PLAYLIST-TYPE \(value) is neither EVENT nor VOD; ignored (the playlist is read as live until EXT-X-ENDLIST)"
                )
            }
        case "EXT-X-I-FRAMES-ONLY":
            media.iFramesOnly = true
        case "EXT-X-PART-INF":
            guard try once(name, number, line) else { return true }
            var attributes = try self.attributes(value, number, line)
            guard let target = try attributes.decimal("PART-TARGET") else {
                throw .missingAttribute("PART-TARGET", line: number, text: line)
            }
            media.partTarget = target
        case "EXT-X-SERVER-CONTROL":
            guard try once(name, number, line) else { return true }
            var attributes = try self.attributes(value, number, line)
            var control = ServerControl(
                canSkipUntil: try attributes.decimal("CAN-SKIP-UNTIL"),
                canSkipDateRanges: try attributes.boolean("CAN-SKIP-DATERANGES"),
                holdBack: try attributes.decimal("HOLD-BACK"),
                partHoldBack: try attributes.decimal("PART-HOLD-BACK"),
                canBlockReload: try attributes.boolean("CAN-BLOCK-RELOAD")
            )
            control.otherAttributes = attributes.unconsumed
            media.serverControl = control
        case "EXT-X-SKIP":
            guard try once(name, number, line) else { return true }
            guard media.segments.isEmpty, pendingInf == nil else {
                throw .malformedTag(line: number, text: line, reason: "EXT-X-SKIP must come before the first segment")
            }
            var attributes = try self.attributes(value, number, line)
            media.skip = Skip(
                skippedSegments: try attributes.requiredInteger("SKIPPED-SEGMENTS"),
                recentlyRemovedDateRanges: try attributes.quotedString("RECENTLY-REMOVED-DATERANGES")
            )
        case "EXT-X-PRELOAD-HINT":
            var attributes = try self.attributes(value, number, line)
            let type = try attributes.requiredEnumeratedString("TYPE")
            guard type == "PART" || type == "MAP" else {
                throw .invalidAttributeValue("TYPE", line: number, text: line, reason: "expected PART or MAP")
            }
            media.preloadHints.append(
                PreloadHint(
                    type: type,
                    uri: try attributes.requiredQuotedString("URI"),
                    byteRangeStart: try attributes.integer("BYTERANGE-START"),
                    byteRangeLength: try attributes.integer("BYTERANGE-LENGTH"),
                    otherAttributes: attributes.unconsumed
                )
            )
        case "EXT-X-RENDITION-REPORT":
            var attributes = try self.attributes(value, number, line)
            media.renditionReports.append(
                RenditionReport(
                    uri: try attributes.quotedString("URI"),
                    lastMediaSequence: try attributes.integer("LAST-MSN"),
                    lastPart: try attributes.integer("LAST-PART"),
                    otherAttributes: attributes.unconsumed
                )
            )
        default:
            return false
        }
        return true
    }

    /// Media segment tags (RFC 8216bis 4.4.4 and 4.4.5): each applies to the segments after it. False when `name` is not one of them.
    private mutating func consumeSegmentTag(_ name: String, _ value: Substring, _ number: Int, _ line: String) throws(PlaylistError) -> Bool {
        switch name {
        case "EXTINF":
            if let pendingInf {
                try tolerate(
                    .missingURI(after: "EXTINF", line: pendingInf.line, text: pendingInf.text),
                    pendingInf.line,
                    "EXTINF is not followed by a URI line; this entry is ignored"
                )
            }
            pendingInf = try extinf(value, number, line)
        case "EXT-X-BYTERANGE":
            let range = try byteRange(value, attribute: nil, number, line)
            pendingTags.append(.byteRange(range))
            pendingByteRangeLine = (number, line)
        case "EXT-X-DISCONTINUITY":
            pendingTags.append(.discontinuity)
        case "EXT-X-KEY":
            let key = try encryptionKey(value, number, line)
            if key.method == .none {
                keysInEffect = [:]
            } else {
                keysInEffect[key.effectiveKeyFormat] = key
                // Real playlists carry a handful of KEYFORMATs; hundreds would make every resolved segment huge.
                guard keysInEffect.count <= Self.maximumKeyFormats else {
                    throw .malformedTag(
                        line: number,
                        text: line,
                        reason: "more than \(Self.maximumKeyFormats) KEYFORMATs in effect at once"
                    )
                }
                if key.ivBytes != nil, let digits = key.iv, digits.count < 32 {
                    warn(
                        number,
                        "IV has \(digits.count) hex digits instead of 32; using them as the leading bytes followed by zeros, as Shaka Packager and ffmpeg do"
                    )
                }
            }
            pendingTags.append(.key(key))
        case "EXT-X-MAP":
            var attributes = try self.attributes(value, number, line)
            let uri = try attributes.requiredQuotedString("URI")
            var range: ByteRange?
            if let text = try attributes.quotedString("BYTERANGE") {
                range = try byteRange(text, attribute: "BYTERANGE", number, line)
            }
            if let key = keysInEffect[EncryptionKey.identityKeyFormat], key.method == .aes128 || key.method == .aes256,
                key.iv == nil
            {
                warn(
                    number,
                    "an EXT-X-MAP encrypted with \(key.method) needs an IV attribute on its EXT-X-KEY (RFC 8216bis 4.4.4.5); using the media sequence number of the next segment"
                )
            }
            pendingTags.append(.map(MediaInitializationSection(uri: uri, byteRange: range, otherAttributes: attributes.unconsumed)))
        case "EXT-X-PROGRAM-DATE-TIME":
            var date = String(value)
            if ProgramDateTime.parse(date) == nil {
                let error = PlaylistError.malformedTag(line: number, text: line, reason: "expected an ISO 8601 date-time with a time zone")
                guard !tolerance.isStrict, ProgramDateTime.parse(date + "Z") != nil else { throw error }
                try tolerate(error, number, "EXT-X-PROGRAM-DATE-TIME has no time zone; read as UTC")
                date += "Z"
            }
            pendingTags.append(.programDateTime(date))
        case "EXT-X-DATERANGE":
            pendingTags.append(.dateRange(try dateRange(value, number, line)))
        case "EXT-X-GAP":
            pendingTags.append(.gap)
        case "EXT-X-BITRATE":
            pendingTags.append(.bitrate(try integer(value, number, line)))
        case "EXT-X-PART":
            var attributes = try self.attributes(value, number, line)
            let uri = try attributes.requiredQuotedString("URI")
            guard let duration = try attributes.decimal("DURATION") else {
                throw .missingAttribute("DURATION", line: number, text: line)
            }
            var range: ByteRange?
            if let text = try attributes.quotedString("BYTERANGE") {
                range = try byteRange(text, attribute: "BYTERANGE", number, line)
            }
            pendingTags.append(
                .part(
                    PartialSegment(
                        uri: uri,
                        duration: duration,
                        independent: try attributes.boolean("INDEPENDENT"),
                        byteRange: range,
                        gap: try attributes.boolean("GAP"),
                        otherAttributes: attributes.unconsumed
                    )
                )
            )
        default:
            return false
        }
        return true
    }

    /// Keeps an unknown tag or comment where it stands.
    mutating func appendOther(_ line: String) {
        if kind == .multivariant {
            multivariant.otherTags.append(line)
        } else {
            pendingTags.append(.other(line))
        }
    }

    /// Notes the playlist kind a tag implies; false when a lenient parse drops the tag because it belongs to the other
    /// kind.
    mutating func noteKind(of tag: String, line: Int, text: String) throws(PlaylistError) -> Bool {
        let tagKind: Kind? =
            multivariantOnlyTags.contains(tag) ? .multivariant : mediaOnlyTags.contains(tag) ? .media : nil
        guard let tagKind else { return true }
        if let expectedKind, expectedKind != tagKind {
            let kinds = expectedKind == .media ? ("multivariant", "media") : ("media", "multivariant")
            try tolerate(
                .mixedPlaylistKinds(line: line, text: text),
                line,
                "\(tag) belongs in \(kinds.0) playlists and this is a \(kinds.1) playlist; the tag is ignored, as players ignore it"
            )
            return false
        }
        if let kind, kind != tagKind { throw .mixedPlaylistKinds(line: line, text: text) }
        if kind == nil, tagKind == .multivariant {
            // Comments and unknown tags seen so far belong to the multivariant playlist.
            multivariant.otherTags = pendingTags.compactMap { if case .other(let text) = $0 { text } else { nil } }
            pendingTags = []
        }
        kind = tagKind
        return true
    }

    /// Whether this is the first `tag` of the playlist; a repeat is an error when strict, else ignored (the first
    /// one holds) with a warning.
    mutating func once(_ tag: String, _ line: Int, _ text: String) throws(PlaylistError) -> Bool {
        guard seenOnce.insert(tag).inserted else {
            try tolerate(.duplicateTag(line: line, text: text), line, "\(tag) appears again; the first one holds and this one is ignored")
            return false
        }
        return true
    }

    mutating func warn(_ line: Int, _ message: String) {
        guard warnings.count + (tolerance.warnings?.count ?? 0) < ToleranceLog.maximumWarnings else {
            warningsOmitted += 1
            return
        }
        warnings.append(PlaylistWarning(line: line, message: message))
        tolerance.keptElsewhere = warnings.count
    }

    /// A byte range `n[@o]` that is not empty and whose end fits in an Int (so resolved offsets and HTTP Range
    /// headers never overflow).
    func byteRange(_ value: some StringProtocol, attribute: String?, _ line: Int, _ text: String) throws(PlaylistError) -> ByteRange {
        guard let range = ByteRange(value) else {
            let reason = "expected <length>[@<offset>]"
            throw attribute.map { .invalidAttributeValue($0, line: line, text: text, reason: reason) }
                ?? .malformedTag(line: line, text: text, reason: reason)
        }
        guard range.length > 0 else { throw .invalidByteRange(line: line, text: text, reason: "a byte range cannot be empty") }
        if let offset = range.offset, range.length > Int.max - offset {
            throw .invalidByteRange(line: line, text: text, reason: "the range overflows")
        }
        return range
    }

    /// EXT-X-MEDIA-SEQUENCE or EXT-X-DISCONTINUITY-SEQUENCE: a decimal integer; a negative one (which players read
    /// without complaint) is read as 0 when lenient.
    func sequenceNumber(_ tag: String, _ value: Substring, _ line: Int, _ text: String) throws(PlaylistError) -> Int {
        if let negative = Int(value.trimmingSpaces()), negative < 0 {
            try tolerate(
                .malformedTag(line: line, text: text, reason: "expected a decimal integer"),
                line,
                "\(tag) is negative (\(negative)); read as 0"
            )
            return 0
        }
        return try integer(value, line, text)
    }

    func integer(_ value: Substring, _ line: Int, _ text: String) throws(PlaylistError) -> Int {
        guard let integer = Int(value), integer >= 0 else {
            throw .malformedTag(line: line, text: text, reason: "expected a decimal integer")
        }
        return integer
    }

    func attributes(_ value: Substring, _ line: Int, _ text: String) throws(PlaylistError) -> AttributeList {
        var list = try AttributeList(parsing: value, line: line, text: text, tolerance: tolerance)
        try list.substituteVariables { (value) throws(PlaylistError) in try substitute(value, line, text) }
        return list
    }

    /// RFC 8216bis 4.3: replaces each `{$name}` with the value of a variable defined earlier.
    func substitute(_ value: String, _ line: Int, _ text: String) throws(PlaylistError) -> String {
        guard value.containsASCII((UInt8(ascii: "{"), UInt8(ascii: "$"))) else { return value }
        let result = try replaceReferences(value, line, text)
        // Substitution is not repeated, so a reference that a value brings in (alone or joined to the text around it)
        // stays literal here but would be substituted when the written playlist is read again.
        if containsVariableReference(result) {
            throw .malformedTag(line: line, text: text, reason: "variable substitution produced a new variable reference")
        }
        return result
    }

    private func replaceReferences(_ value: String, _ line: Int, _ text: String) throws(PlaylistError) -> String {
        var result = String.UnicodeScalarView()
        var copied = value.unicodeScalars.startIndex
        for reference in variableReferences(in: value) {
            guard let replacement = variables[reference.name] else {
                throw .undefinedVariable(reference.name, line: line, text: text)
            }
            result.append(contentsOf: value.unicodeScalars[copied..<reference.range.lowerBound])
            result.append(contentsOf: replacement.unicodeScalars)
            copied = reference.range.upperBound
        }
        result.append(contentsOf: value.unicodeScalars[copied...])
        return String(result)
    }

    mutating func define(_ value: Substring, _ line: Int, _ text: String) throws(PlaylistError) {
        var attributes = try AttributeList(parsing: value, line: line, text: text, tolerance: tolerance)
        let definition: VariableDefinition
        if let name = try attributes.quotedString("NAME") {
            let value = try attributes.requiredQuotedString("VALUE")
            definition = VariableDefinition(source: .value, name: name, value: value)
        } else if let name = try attributes.quotedString("IMPORT") {
            guard let value = importedVariables[name] else {
                throw .unresolvableVariable(
                    name,
                    line: line,
                    text: text,
                    reason: "IMPORT names a variable the multivariant playlist does not define"
                )
            }
            importLine = importLine ?? (line, text)
            definition = VariableDefinition(source: .import, name: name, value: value)
        } else if let name = try attributes.quotedString("QUERYPARAM") {
            let items = url.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: true)?.queryItems } ?? []
            guard let value = items.first(where: { $0.name == name })?.value else {
                throw .unresolvableVariable(
                    name,
                    line: line,
                    text: text,
                    reason: "QUERYPARAM names a query parameter the playlist URI does not have"
                )
            }
            definition = VariableDefinition(source: .queryParameter, name: name, value: value)
        } else {
            throw .missingAttribute("NAME, IMPORT or QUERYPARAM", line: line, text: text)
        }
        guard !definition.name.isEmpty, definition.name.allSatisfy(isVariableNameCharacter) else {
            throw .malformedTag(line: line, text: text, reason: "variable names are made of [a-zA-Z0-9-_]")
        }
        guard variables[definition.name] == nil else { throw .duplicateVariable(definition.name, line: line, text: text) }
        // A value is substituted into quoted strings and URI lines, so it cannot hold a quote or a line break; a VALUE
        // attribute cannot, but a query parameter or a caller's imported variable can.
        if definition.source != .value, definition.value.contains(where: { $0 == "\"" || $0.isNewline }) {
            throw .unresolvableVariable(
                definition.name,
                line: line,
                text: text,
                reason: "its value contains a quote or a line break"
            )
        }
        variables[definition.name] = definition.value
        definitions.append(definition)
    }

    func encryptionKey(_ value: Substring, _ line: Int, _ text: String) throws(PlaylistError) -> EncryptionKey {
        var attributes = try self.attributes(value, line, text)
        let method = EncryptionMethod(rawValue: try attributes.requiredEnumeratedString("METHOD"))
        let uri = try attributes.quotedString("URI")
        let iv = try attributes.hexadecimal("IV")
        let keyFormat = try attributes.quotedString("KEYFORMAT")
        let versions = try attributes.quotedString("KEYFORMATVERSIONS")
        if method == .none {
            if uri != nil || iv != nil {
                try tolerate(
                    .invalidAttributeValue("METHOD", line: line, text: text, reason: "with METHOD=NONE, URI and IV must not be present"),
                    line,
                    "METHOD=NONE with a URI or IV: the segments are clear and the URI and IV are ignored"
                )
                return EncryptionKey(method: .none)
            }
        } else if uri == nil {
            throw .missingAttribute("URI", line: line, text: text)
        }
        if let iv, iv.count > 32 {
            throw .invalidAttributeValue("IV", line: line, text: text, reason: "an IV is 128 bits (at most 32 hex digits)")
        }
        return EncryptionKey(
            method: method,
            uri: uri,
            iv: iv,
            keyFormat: keyFormat,
            keyFormatVersions: versions,
            otherAttributes: attributes.unconsumed
        )
    }

    func rendition(_ value: Substring, _ line: Int, _ text: String) throws(PlaylistError) -> Rendition {
        var attributes = try self.attributes(value, line, text)
        let type = MediaType(rawValue: try attributes.requiredEnumeratedString("TYPE"))
        guard [.audio, .video, .subtitles, .closedCaptions].contains(type) else {
            throw .invalidAttributeValue("TYPE", line: line, text: text, reason: "expected AUDIO, VIDEO, SUBTITLES or CLOSED-CAPTIONS")
        }
        var rendition = Rendition(
            type: type,
            uri: try attributes.quotedString("URI"),
            groupID: try renditionGroup(&attributes, line, text),
            language: try attributes.quotedString("LANGUAGE"),
            associatedLanguage: try attributes.quotedString("ASSOC-LANGUAGE"),
            name: try renditionName(&attributes, line, text),
            stableRenditionID: try attributes.quotedString("STABLE-RENDITION-ID"),
            isDefault: try attributes.boolean("DEFAULT"),
            autoselect: try attributes.boolean("AUTOSELECT"),
            forced: try attributes.boolean("FORCED"),
            instreamID: try attributes.quotedString("INSTREAM-ID"),
            bitDepth: try attributes.integer("BIT-DEPTH"),
            sampleRate: try attributes.integer("SAMPLE-RATE"),
            characteristics: try attributes.quotedString("CHARACTERISTICS"),
            channels: try attributes.quotedString("CHANNELS")
        )
        rendition.otherAttributes = attributes.unconsumed
        if type == .closedCaptions {
            guard rendition.uri == nil else {
                throw .invalidAttributeValue("URI", line: line, text: text, reason: "CLOSED-CAPTIONS renditions have no URI")
            }
            guard rendition.instreamID != nil else { throw .missingAttribute("INSTREAM-ID", line: line, text: text) }
        }
        if type == .subtitles, rendition.uri == nil { throw .missingAttribute("URI", line: line, text: text) }
        return rendition
    }

    /// GROUP-ID of EXT-X-MEDIA, required; when lenient a rendition without one is kept in the empty group, which no
    /// variant names (hls.js reads such a rendition and never plays it).
    func renditionGroup(_ attributes: inout AttributeList, _ line: Int, _ text: String) throws(PlaylistError) -> String {
        if let group = try attributes.quotedString("GROUP-ID") { return group }
        try tolerate(.missingAttribute("GROUP-ID", line: line, text: text), line, "EXT-X-MEDIA has no GROUP-ID; no variant can use it")
        return ""
    }

    /// NAME of EXT-X-MEDIA, required; when lenient a rendition without one is named by its LANGUAGE or GROUP-ID.
    func renditionName(_ attributes: inout AttributeList, _ line: Int, _ text: String) throws(PlaylistError) -> String {
        if let name = try attributes.quotedString("NAME") { return name }
        let fallback = attributes.peek("LANGUAGE") ?? attributes.peek("GROUP-ID")
        try tolerate(.missingAttribute("NAME", line: line, text: text), line, "EXT-X-MEDIA has no NAME; named \(fallback ?? "unnamed")")
        return fallback ?? "unnamed"
    }

    func variantStream(_ attributes: inout AttributeList, uri: String) throws(PlaylistError) -> VariantStream {
        var variant = VariantStream(
            uri: uri,
            bandwidth: try bandwidth(&attributes),
            averageBandwidth: try attributes.integer("AVERAGE-BANDWIDTH"),
            score: try attributes.decimal("SCORE"),
            codecs: try attributes.quotedString("CODECS"),
            supplementalCodecs: try attributes.quotedString("SUPPLEMENTAL-CODECS"),
            resolution: try attributes.resolution("RESOLUTION"),
            frameRate: try attributes.decimal("FRAME-RATE"),
            hdcpLevel: try attributes.enumeratedString("HDCP-LEVEL"),
            allowedCPC: try attributes.quotedString("ALLOWED-CPC"),
            videoRange: try attributes.enumeratedString("VIDEO-RANGE"),
            requiredVideoLayout: try attributes.quotedString("REQ-VIDEO-LAYOUT"),
            stableVariantID: try attributes.quotedString("STABLE-VARIANT-ID"),
            audio: try attributes.quotedString("AUDIO"),
            video: try attributes.quotedString("VIDEO"),
            subtitles: try attributes.quotedString("SUBTITLES"),
            pathwayID: try attributes.quotedString("PATHWAY-ID"),
            programID: try attributes.integer("PROGRAM-ID")
        )
        if let captions = attributes.attribute("CLOSED-CAPTIONS") {
            if captions.isQuoted {
                variant.closedCaptions = .group(captions.value)
            } else if captions.value == "NONE" {
                variant.closedCaptions = .noClosedCaptions
            } else {
                throw .invalidAttributeValue(
                    "CLOSED-CAPTIONS",
                    line: attributes.line,
                    text: attributes.text,
                    reason: "expected a quoted group ID or NONE"
                )
            }
        }
        variant.otherAttributes = attributes.unconsumed
        return variant
    }

    /// BANDWIDTH, required; when lenient a variant without one (players pick among the others first) reads as 0.
    func bandwidth(_ attributes: inout AttributeList) throws(PlaylistError) -> Int {
        if let value = try attributes.integer("BANDWIDTH") { return value }
        try tolerate(
            .missingAttribute("BANDWIDTH", line: attributes.line, text: attributes.text),
            attributes.line,
            "the variant has no BANDWIDTH; read as 0"
        )
        return 0
    }

    func dateRange(_ value: Substring, _ line: Int, _ text: String) throws(PlaylistError) -> DateRange {
        var attributes = try self.attributes(value, line, text)
        var range = DateRange(
            id: try attributes.requiredQuotedString("ID"),
            classAttribute: try attributes.quotedString("CLASS"),
            startDate: try attributes.quotedString("START-DATE"),
            cue: try attributes.quotedString("CUE"),
            endDate: try attributes.quotedString("END-DATE"),
            duration: try attributes.decimal("DURATION"),
            plannedDuration: try attributes.decimal("PLANNED-DURATION"),
            endOnNext: try attributes.boolean("END-ON-NEXT")
        )
        for (name, date) in [("START-DATE", range.startDate), ("END-DATE", range.endDate)] {
            if let date, ProgramDateTime.parse(date) == nil {
                throw .invalidAttributeValue(name, line: line, text: text, reason: "expected an ISO 8601 date-time")
            }
        }
        if range.endOnNext == true, range.classAttribute == nil {
            throw .missingAttribute("CLASS (required with END-ON-NEXT)", line: line, text: text)
        }
        range.otherAttributes = attributes.unconsumed
        return range
    }

    func extinf(_ value: Substring, _ line: Int, _ text: String) throws(PlaylistError) -> (Double, String?, Int, String) {
        let scalars = value.unicodeScalars
        let comma = scalars.firstIndex(of: ",")
        var durationText = String(comma.map { scalars[..<$0] } ?? scalars[...]).trimmingSpaces()
        let error = PlaylistError.malformedTag(line: line, text: text, reason: "EXTINF needs a duration in seconds")
        if !tolerance.isStrict, let space = durationText.firstIndex(where: { $0 == " " || $0 == "\t" }) {
            // IPTV channel lists: `#EXTINF:-1 tvg-id="..." group-title="...",Name`; the attributes are ignored.
            try tolerate(error, line, "EXTINF has attributes after its duration (an IPTV-style list); they are ignored")
            durationText = String(durationText[..<space])
        }
        guard var duration = Double(durationText), duration.isFinite, durationText.allSatisfy(isDecimalCharacter) else { throw error }
        if duration < 0 {
            try tolerate(error, line, "EXTINF duration \(durationText) is negative (a stream of unknown length); read as 0")
            duration = 0
        }
        let title = comma.map { String(scalars[scalars.index(after: $0)...]) }.flatMap { $0.isEmpty ? nil : $0 }
        return (duration, title, line, text)
    }

    mutating func consumeURI(_ rawURI: String, number: Int) throws(PlaylistError) {
        // Trimmed again after substitution, as the line was before it: the writer puts the URI on a line of its own.
        var uri = try substitute(rawURI, number, rawURI).trimmedOfWhitespace
        guard !uri.isEmpty, !uri.hasPrefix("#") else {
            throw .malformedTag(line: number, text: rawURI, reason: "after variable substitution the URI line is empty or a comment")
        }
        if pendingVariant == nil, pendingInf == nil {
            try tolerate(
                .malformedTag(line: number, text: rawURI, reason: "a URI line must follow EXTINF or EXT-X-STREAM-INF"),
                number,
                "a URI line that follows neither EXTINF nor EXT-X-STREAM-INF is ignored"
            )
            return
        }
        uri = try forwardSlashes(uri, number, rawURI)
        if let pending = pendingVariant {
            var variant = pending.variant
            variant.uri = uri
            multivariant.variants.append(variant)
            pendingVariant = nil
            return
        }
        guard let inf = pendingInf else {
            throw .malformedTag(line: number, text: rawURI, reason: "a URI line must follow EXTINF or EXT-X-STREAM-INF")
        }
        var segment = MediaSegment(uri: uri, duration: inf.duration, title: inf.title, tags: pendingTags)
        var rangeEnd: Int?
        if let range = segment.byteRange {
            let offset: Int
            if let explicit = range.offset {
                offset = explicit
            } else {
                // RFC 8216bis 4.4.4.2: without an offset the range continues the previous segment's sub-range of the
                // same resource.
                if let previous = previousSegmentRange, let previousEnd = previous.rangeEnd, previous.uri == uri {
                    offset = previousEnd
                } else {
                    // Players carry the previous range's end (or 0) over whatever the URI; so does a lenient parse.
                    let where_ = pendingByteRangeLine ?? (number, rawURI)
                    let carried = previousSegmentRange?.rangeEnd ?? 0
                    try tolerate(
                        .invalidByteRange(
                            line: where_.number,
                            text: where_.text,
                            reason: "a byte range without an offset must follow a sub-range of the same resource"
                        ),
                        where_.number,
                        "a byte range without an offset that does not continue a sub-range of the same resource; read as starting at byte \(carried), where players start it"
                    )
                    offset = carried
                    // The segment keeps an explicit offset, so what was read is written (and read again) the same.
                    if let index = segment.tags.lastIndex(where: { if case .byteRange = $0 { true } else { false } }) {
                        segment.tags[index] = .byteRange(ByteRange(length: range.length, offset: carried))
                    }
                }
            }
            // The resolved offset of the next range must stay representable (ResolvedSegment adds them up).
            if range.length > Int.max - offset {
                let where_ = pendingByteRangeLine ?? (number, rawURI)
                throw .invalidByteRange(line: where_.number, text: where_.text, reason: "the range overflows")
            }
            rangeEnd = offset + range.length
        }
        if let targetDuration, inf.duration.rounded() > Double(targetDuration) {
            warn(inf.line, "EXTINF \(inf.duration) exceeds EXT-X-TARGETDURATION \(targetDuration)")
        }
        previousSegmentRange = (uri, rangeEnd)
        media.segments.append(segment)
        pendingTags = []
        pendingInf = nil
        pendingByteRangeLine = nil
    }

    /// A URI written with Windows path separators (`media\\seg1.ts`): browsers and players read backslashes in relative
    /// and http(s) URIs as slashes (WHATWG URL), so a lenient parse does too.
    func forwardSlashes(_ uri: String, _ line: Int, _ text: String) throws(PlaylistError) -> String {
        guard uri.containsASCII(UInt8(ascii: "\\")) else { return uri }
        let scheme = uri.prefix { $0 != ":" && $0 != "/" && $0 != "\\" }.lowercased()
        let hasScheme = uri.dropFirst(scheme.count).hasPrefix(":") && scheme.count > 1
        guard !hasScheme || scheme == "http" || scheme == "https" else { return uri }
        try tolerate(
            .malformedTag(line: line, text: text, reason: "a URI cannot contain a backslash"),
            line,
            "the URI has backslashes; read them as slashes, as players do"
        )
        return uri.replacingOccurrences(of: "\\", with: "/")
    }

    /// The parser's own warnings and what a lenient parse tolerated, in line order.
    var collectedWarnings: [PlaylistWarning] {
        var all = (warnings + (tolerance.warnings ?? [])).enumerated()
            .sorted { ($0.element.line, $0.offset) < ($1.element.line, $1.offset) }
            .map(\.element)
        let omitted = warningsOmitted + tolerance.omitted
        if omitted > 0 {
            all.append(PlaylistWarning(line: 0, message: "\(omitted) more deviation(s) like these are not listed"))
        }
        return all
    }

    mutating func finish() throws(PlaylistError) -> ParsedPlaylist {
        if let pendingVariant {
            try tolerate(
                .missingURI(after: "EXT-X-STREAM-INF", line: pendingVariant.line, text: pendingVariant.text),
                pendingVariant.line,
                "EXT-X-STREAM-INF is not followed by a URI line; this variant is ignored"
            )
        }
        if let pendingInf {
            try tolerate(
                .missingURI(after: "EXTINF", line: pendingInf.line, text: pendingInf.text),
                pendingInf.line,
                "EXTINF is not followed by a URI line; this entry is ignored"
            )
        }

        switch kind {
        case .multivariant:
            if let importLine {
                throw .unresolvableVariable(
                    "IMPORT",
                    line: importLine.number,
                    text: importLine.text,
                    reason: "EXT-X-DEFINE IMPORT is allowed only in media playlists"
                )
            }
            // What was dropped as tolerated (an EXT-X-STREAM-INF without its URI, an I-frame stream without one) can
            // leave nothing that makes this a multivariant playlist: nothing to play, and written out it would read as
            // an empty media playlist (found by scripts/fuzz-hls.sh). The first deviation that was let pass is then the
            // error, as strict parsing would have said.
            let m = multivariant
            if m.variants.isEmpty, m.iFrameVariants.isEmpty, m.renditions.isEmpty, m.sessionData.isEmpty, m.sessionKeys.isEmpty,
                m.contentSteering == nil
            {
                throw tolerance.firstTolerated
                    ?? .missingRequiredTag("EXT-X-STREAM-INF", reason: "a multivariant playlist lists at least one variant stream")
            }
            multivariant.version = version
            multivariant.independentSegments = independentSegments
            multivariant.start = start
            multivariant.definitions = definitions
            return ParsedPlaylist(playlist: .multivariant(multivariant), warnings: collectedWarnings)
        case .media, nil:
            if targetDuration == nil {
                try tolerate(
                    .missingRequiredTag("EXT-X-TARGETDURATION", reason: "every media playlist has one (RFC 8216bis 4.4.3.1)"),
                    0,
                    "the media playlist has no EXT-X-TARGETDURATION; read as its longest segment, rounded up"
                )
                // Clamped: an EXTINF may be any finite number, and Int(_:) traps beyond Int.max.
                targetDuration = Int(min(media.segments.map(\.duration).max() ?? 0, 1e9).rounded(.up))
            }
            guard let targetDuration else { return ParsedPlaylist(playlist: .media(media), warnings: collectedWarnings) }
            media.version = version
            media.targetDuration = targetDuration
            media.independentSegments = independentSegments
            media.start = start
            media.definitions = definitions
            media.trailingTags = pendingTags
            return ParsedPlaylist(playlist: .media(media), warnings: collectedWarnings)
        }
    }
}

/// Whether the text holds a `{$name}` reference with a valid name.
private func containsVariableReference(_ text: String) -> Bool {
    !variableReferences(in: text).isEmpty
}

/// The `{$name}` references in a text, in one linear pass over its Unicode scalars (RFC 8216bis 4.3: names are made
/// of `[a-zA-Z0-9-_]`). A `{$` not followed by a name and `}` is literal text.
private func variableReferences(in text: String) -> [(range: Range<String.Index>, name: String)] {
    let scalars = text.unicodeScalars
    var references: [(range: Range<String.Index>, name: String)] = []
    var index = scalars.startIndex
    while index < scalars.endIndex {
        guard scalars[index] == "{" else {
            index = scalars.index(after: index)
            continue
        }
        let dollar = scalars.index(after: index)
        guard dollar < scalars.endIndex, scalars[dollar] == "$" else {
            index = dollar
            continue
        }
        let nameStart = scalars.index(after: dollar)
        var nameEnd = nameStart
        while nameEnd < scalars.endIndex, isVariableNameScalar(scalars[nameEnd]) { nameEnd = scalars.index(after: nameEnd) }
        if nameEnd > nameStart, nameEnd < scalars.endIndex, scalars[nameEnd] == "}" {
            let close = scalars.index(after: nameEnd)
            references.append((index..<close, String(scalars[nameStart..<nameEnd])))
            index = close
        } else {
            // Name characters cannot start a reference, so scanning resumes after them.
            index = nameEnd
        }
    }
    return references
}

private func isVariableNameScalar(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar {
    case "a"..."z", "A"..."Z", "0"..."9", "-", "_": true
    default: false
    }
}

private func isVariableNameCharacter(_ character: Character) -> Bool {
    character.isASCII && (character.isLetter || character.isNumber || character == "-" || character == "_")
}
