import Foundation

/// `manifest.json`: what an offline package holds and where it came from (docs/package-format.md).
///
/// Written when a download is planned (every file listed, sizes and checksums still unknown) and rewritten as
/// renditions complete, always whole (temporary file + rename). The database records which files are complete while
/// a download runs; the manifest is the package's own description, readable without the database.
public struct PackageManifest: Codable, Sendable, Hashable {
    /// The schema written by this version.
    public static let currentSchemaVersion = 1
    /// The file name inside the package directory.
    public static let fileName = "manifest.json"
    /// The local multivariant playlist's file name.
    public static let multivariantFileName = "master.m3u8"

    public var schemaVersion: Int
    public var assetId: String
    public var title: String?
    /// The multivariant (or media) playlist URL the asset was downloaded from, after redirects.
    public var sourceURL: String
    /// Seconds since the Unix epoch.
    public var createdAt: Int64
    public var updatedAt: Int64
    /// The local multivariant playlist, relative to the package directory.
    public var multivariantPlaylist: String
    /// Every key the package's segments need, by key ID.
    public var keys: [PackageKey]
    /// The media selections downloaded or being downloaded: one video variant, then audio and subtitle renditions.
    public var renditions: [PackageRendition]
    /// What the source offers that this package does not hold (other variants, other languages): playable only
    /// online, and what `stowage add-media` can add. Nil in manifests that did not record it.
    public var availableRenditions: [PackageSourceRendition]?
    /// What the source's playlists do that RFC 8216bis does not allow but players accept, and how each was read
    /// (`stowage inspect --strict` refuses them). Nil or empty when the playlists were valid.
    public var playlistWarnings: [PackagePlaylistWarning]?
    /// Set when the package records a live or EVENT stream (docs/live-recording.md); nil for VOD.
    public var recording: PackageRecording?

    public init(
        assetId: String,
        title: String?,
        sourceURL: String,
        createdAt: Int64,
        keys: [PackageKey] = [],
        renditions: [PackageRendition] = []
    ) {
        self.schemaVersion = Self.currentSchemaVersion
        self.assetId = assetId
        self.title = title
        self.sourceURL = sourceURL
        self.createdAt = createdAt
        self.updatedAt = createdAt
        self.multivariantPlaylist = Self.multivariantFileName
        self.keys = keys
        self.renditions = renditions
    }

    /// Whether every rendition is complete.
    public var isComplete: Bool { !renditions.isEmpty && renditions.allSatisfy(\.isComplete) }

    /// The rendition with this ID.
    public func rendition(id: String) -> PackageRendition? { renditions.first { $0.id == id } }

    /// The key with this ID.
    public func key(id: String) -> PackageKey? { keys.first { $0.keyId == id } }

    /// Every file of the package, init sections first within each rendition.
    public var files: [PackageFile] { renditions.flatMap(\.files) }

    /// The sum of the known file sizes.
    public var knownBytes: Int64 { files.reduce(0) { $0 + ($1.size ?? 0) } }
}

/// A deviation from RFC 8216bis in one of the source's playlists, read as players read it.
public struct PackagePlaylistWarning: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The playlist's URL, after redirects.
    public var playlist: String
    /// 1-based line (0: the whole playlist).
    public var line: Int
    /// What was noticed and how it was read.
    public var message: String

    public init(playlist: String, line: Int, message: String) {
        self.playlist = playlist
        self.line = line
        self.message = message
    }

    public var description: String { line > 0 ? "\(playlist) line \(line): \(message)" : "\(playlist): \(message)" }
}

/// A key a package needs, with where it came from.
public struct PackageKey: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable {
        /// Delivered by a Stowage key server under a lease (`skd://ASSET/KEY_ID`, KEYFORMAT `com.stowage.skd`).
        case skd
        /// An AES key fetched from an http(s) URI (KEYFORMAT `identity`), sealed in the key store.
        case identity
    }

    /// 32 lowercase hex digits: the skd key ID, or the first 16 bytes of SHA-256 of an identity key's absolute URI.
    public var keyId: String
    public var kind: Kind
    /// The key URI as resolved against its playlist; for a key written into the playlist as a `data:` URI, the
    /// reference that names it instead (`stowage-inline-key:...`, see `InlineKeyURI`), so no manifest holds a key.
    public var uri: String
    public var keyFormat: String
    /// The key's length in bytes: 32 for AES-256 methods; nil (manifests written before AES-256) means 16.
    public var keyLength: Int?

    public init(keyId: String, kind: Kind, uri: String, keyFormat: String, keyLength: Int? = nil) {
        self.keyId = keyId
        self.kind = kind
        self.uri = uri
        self.keyFormat = keyFormat
        self.keyLength = keyLength
    }

    /// The lengths the key may have: `[keyLength]`, or `[16]`.
    public var allowedLengths: [Int] { [keyLength ?? 16] }

    /// The URI local playlists use for this key.
    public var localURI: String { "stowage-key://\(keyId)" }
}

/// One media selection: the video variant, or an audio or subtitle rendition.
public struct PackageRendition: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable, CaseIterable {
        case video, audio, subtitles
    }

    /// Also the rendition's directory inside the package: `video`, `audio-en`, `subtitles-fr-2`, ...
    public var id: String
    public var kind: Kind
    /// NAME of EXT-X-MEDIA (or "video").
    public var name: String
    public var language: String?
    public var groupId: String?
    public var isDefault: Bool
    /// BANDWIDTH of the variant (video) or an estimate used for progress weighting.
    public var bandwidth: Int?
    public var codecs: String?
    public var resolution: String?
    /// The media playlist URL, after redirects.
    public var sourceURL: String
    /// The local media playlist, relative to the package directory.
    public var playlist: String
    /// Total duration in seconds.
    public var duration: Double
    public var isComplete: Bool
    public var initSections: [PackageFile]
    public var segments: [PackageSegment]
    /// Why the download took this rendition (`your language (fr)`, `the playlist's default`, `asked for`); nil in
    /// packages written before it was recorded.
    public var selectedBecause: String?

    public init(
        id: String,
        kind: Kind,
        name: String,
        language: String? = nil,
        groupId: String? = nil,
        isDefault: Bool = false,
        bandwidth: Int? = nil,
        codecs: String? = nil,
        resolution: String? = nil,
        sourceURL: String,
        playlist: String,
        duration: Double,
        isComplete: Bool = false,
        initSections: [PackageFile] = [],
        segments: [PackageSegment] = []
    ) {
        self.id = id
        self.kind = kind
        self.name = name
        self.language = language
        self.groupId = groupId
        self.isDefault = isDefault
        self.bandwidth = bandwidth
        self.codecs = codecs
        self.resolution = resolution
        self.sourceURL = sourceURL
        self.playlist = playlist
        self.duration = duration
        self.isComplete = isComplete
        self.initSections = initSections
        self.segments = segments
    }

    /// Init sections then segments (GAP segments have no file and are left out).
    public var files: [PackageFile] { initSections + segments.compactMap(\.file) }

    /// Bytes expected for progress weighting: known sizes, else BANDWIDTH x duration.
    public var expectedBytes: Int64 {
        let files = self.files
        let known = files.compactMap(\.size)
        if known.count == files.count { return known.reduce(0, +) }
        if !known.isEmpty {
            let average = Double(known.reduce(0, +)) / Double(known.count)
            return known.reduce(0, +) + Int64(average * Double(files.count - known.count))
        }
        return Int64(Double(bandwidth ?? 128_000) * duration / 8)
    }
}

/// A file of the package: an init section or a segment, as delivered (still encrypted).
public struct PackageFile: Codable, Sendable, Hashable {
    /// Relative to the package directory, e.g. `video/00012.ts`. Chosen by Stowage, never taken from the source.
    public var path: String
    /// The absolute source URL.
    public var sourceURL: String
    /// The byte range of the source resource this file holds (EXT-X-BYTERANGE / the MAP's BYTERANGE), if any.
    public var byteRange: PackageByteRange?
    /// Known once the file is complete.
    public var size: Int64?
    /// Lowercase hex SHA-256 of the file as stored; known once the file is complete.
    public var sha256: String?
    /// The key that encrypts this file as a whole (AES-128 EXT-X-MAP, whole segments) or its samples (SAMPLE-AES);
    /// nil when clear.
    public var key: PackageSegmentKey?

    public init(
        path: String,
        sourceURL: String,
        byteRange: PackageByteRange? = nil,
        size: Int64? = nil,
        sha256: String? = nil,
        key: PackageSegmentKey? = nil
    ) {
        self.path = path
        self.sourceURL = sourceURL
        self.byteRange = byteRange
        self.size = size
        self.sha256 = sha256
        self.key = key
    }
}

/// A byte range of a source resource.
public struct PackageByteRange: Codable, Sendable, Hashable {
    public var offset: Int64
    public var length: Int64

    public init(offset: Int64, length: Int64) {
        self.offset = offset
        self.length = length
    }
}

/// How one file is encrypted.
public struct PackageSegmentKey: Codable, Sendable, Hashable {
    /// METHOD as in the playlist: `AES-128`, `AES-256`, `AES-256-CTR`, `SAMPLE-AES`, `SAMPLE-AES-CTR`.
    public var method: String
    public var keyId: String
    /// 32 lowercase hex digits: the IV attribute, or the one derived from the media sequence number.
    public var iv: String

    public init(method: String, keyId: String, iv: String) {
        self.method = method
        self.keyId = keyId
        self.iv = iv
    }
}

/// One segment of a rendition.
public struct PackageSegment: Codable, Sendable, Hashable {
    public var index: Int
    public var duration: Double
    public var mediaSequence: Int
    public var discontinuitySequence: Int
    public var isGap: Bool
    /// Index into the rendition's `initSections`.
    public var initSection: Int?
    /// The stored file; nil for EXT-X-GAP segments, which are not fetched.
    public var file: PackageFile?
    /// When the segment began on the broadcast's wall clock (EXT-X-PROGRAM-DATE-TIME, or the previous segment's plus
    /// its duration), in seconds since 1970; nil when the playlist gives no date.
    public var programDateTime: Double?

    public init(
        index: Int,
        duration: Double,
        mediaSequence: Int,
        discontinuitySequence: Int,
        isGap: Bool = false,
        initSection: Int? = nil,
        file: PackageFile?
    ) {
        self.index = index
        self.duration = duration
        self.mediaSequence = mediaSequence
        self.discontinuitySequence = discontinuitySequence
        self.isGap = isGap
        self.initSection = initSection
        self.file = file
    }
}

/// A media selection of the source that the package does not hold.
public struct PackageSourceRendition: Codable, Sendable, Hashable {
    public var kind: PackageRendition.Kind
    public var name: String
    public var language: String?
    public var groupId: String?
    public var bandwidth: Int?
    public var resolution: String?
    public var codecs: String?

    public init(
        kind: PackageRendition.Kind,
        name: String,
        language: String? = nil,
        groupId: String? = nil,
        bandwidth: Int? = nil,
        resolution: String? = nil,
        codecs: String? = nil
    ) {
        self.kind = kind
        self.name = name
        self.language = language
        self.groupId = groupId
        self.bandwidth = bandwidth
        self.resolution = resolution
        self.codecs = codecs
    }

    /// The ID `stowage play` gives this rendition when it offers it online and `stowage info` lists it under:
    /// `online-video-BANDWIDTH`, `online-audio-LANGUAGE`, `online-subtitles-LANGUAGE` (the name when there is no
    /// language).
    public var onlineId: String {
        kind == .video ? "online-video-\(bandwidth ?? 0)" : "online-\(kind.rawValue)-" + Self.slug(language ?? name)
    }

    /// A folder-safe form of a language tag or name: lowercase letters and digits, other runs as one `-`.
    public static func slug(_ text: String) -> String {
        let allowed = text.lowercased().unicodeScalars.map { scalar -> Character in
            switch scalar {
            case "a"..."z", "0"..."9": Character(scalar)
            default: "-"
            }
        }
        let trimmed = String(allowed).split(separator: "-").joined(separator: "-")
        return trimmed.isEmpty ? "x" : String(trimmed.prefix(32))
    }
}

/// A live or EVENT stream recorded into a package: the span, why it ended, and what is missing.
public struct PackageRecording: Codable, Sendable, Hashable {
    /// Why a recording ended.
    public enum EndReason: String, Codable, Sendable, Hashable {
        /// Every recorded playlist got EXT-X-ENDLIST: the broadcast ended.
        case endList = "endlist"
        /// The `--duration` of recorded media was reached.
        case duration
        /// The `--until` time came.
        case until
        /// The user stopped it (Ctrl-C, SIGTERM, ``stop``).
        case stopped
    }

    /// `live` (a sliding window) or `event` (EXT-X-PLAYLIST-TYPE:EVENT, grows from its first segment).
    public var playlistType: String
    /// When recording began, seconds since 1970.
    public var startedAt: Int64
    /// When recording ended; nil while it goes on (or was interrupted and can be resumed).
    public var endedAt: Int64?
    public var endReason: EndReason?
    /// `--duration`: the recorded media seconds after which recording stops.
    public var maximumDuration: Double?
    /// `--until`: the time at which recording stops, seconds since 1970.
    public var until: Int64?
    /// Segments that left the playlist's window before they were fetched, in order.
    public var gaps: [PackageRecordingGap]

    public init(playlistType: String, startedAt: Int64, maximumDuration: Double? = nil, until: Int64? = nil) {
        self.playlistType = playlistType
        self.startedAt = startedAt
        self.maximumDuration = maximumDuration
        self.until = until
        self.gaps = []
    }

    /// Whether recording is over (the package can complete).
    public var hasEnded: Bool { endedAt != nil }

    /// Seconds of the broadcast missing: the most any one rendition misses (renditions miss the same span, each in
    /// its own segments).
    public var missingSeconds: Double {
        Dictionary(grouping: gaps, by: \.renditionId).values.map { $0.reduce(0) { $0 + $1.seconds } }.max() ?? 0
    }
}

/// Segments of one rendition missing from a recording, marked EXT-X-GAP in its playlist.
public struct PackageRecordingGap: Codable, Sendable, Hashable {
    public var renditionId: String
    /// The media sequence number of the first missing segment.
    public var firstMediaSequence: Int
    /// How many segments are missing.
    public var segments: Int
    /// Their duration, estimated from the dates around them (or the target duration).
    public var seconds: Double
    /// The wall-clock span missing, seconds since 1970, when the playlist gives dates.
    public var startsAt: Double?
    public var endsAt: Double?

    public init(renditionId: String, firstMediaSequence: Int, segments: Int, seconds: Double, startsAt: Double?, endsAt: Double?) {
        self.renditionId = renditionId
        self.firstMediaSequence = firstMediaSequence
        self.segments = segments
        self.seconds = seconds
        self.startsAt = startsAt
        self.endsAt = endsAt
    }
}
