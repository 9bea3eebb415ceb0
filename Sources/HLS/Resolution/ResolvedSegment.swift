public import Foundation

/// A key in effect for a segment or an initialization section, with the IV to use.
public struct ResolvedKey: Hashable, Sendable, Codable {
    public var method: EncryptionMethod
    /// KEYFORMAT, with `identity` filled in.
    public var keyFormat: String
    public var keyFormatVersions: String?
    /// The key URI as written.
    public var uri: String
    /// The key URI made absolute against the playlist's URL (nil when it cannot be resolved).
    public var url: URL?
    /// The 16-byte IV: the IV attribute, else the Media Sequence Number as a 128-bit big-endian integer.
    public var iv: [UInt8]
    /// Whether the IV came from the IV attribute.
    public var ivIsExplicit: Bool
}

extension ResolvedKey {
    private enum CodingKeys: String, CodingKey { case method, keyFormat, keyFormatVersions, uri, url, iv, ivIsExplicit }

    /// JSON writes the IV as 32 lowercase hex digits.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(method, forKey: .method)
        try container.encode(keyFormat, forKey: .keyFormat)
        try container.encodeIfPresent(keyFormatVersions, forKey: .keyFormatVersions)
        try container.encode(uri, forKey: .uri)
        try container.encodeIfPresent(url, forKey: .url)
        try container.encode(iv.map { String(format: "%02x", $0) }.joined(), forKey: .iv)
        try container.encode(ivIsExplicit, forKey: .ivIsExplicit)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        method = try container.decode(EncryptionMethod.self, forKey: .method)
        keyFormat = try container.decode(String.self, forKey: .keyFormat)
        keyFormatVersions = try container.decodeIfPresent(String.self, forKey: .keyFormatVersions)
        uri = try container.decode(String.self, forKey: .uri)
        url = try container.decodeIfPresent(URL.self, forKey: .url)
        let hex = try container.decode(String.self, forKey: .iv)
        guard hex.count == 32, let bytes = EncryptionKey.ivBytes(fromHexDigits: hex) else {
            throw DecodingError.dataCorruptedError(forKey: .iv, in: container, debugDescription: "expected 32 hex digits")
        }
        iv = bytes
        ivIsExplicit = try container.decode(Bool.self, forKey: .ivIsExplicit)
    }
}

extension ResolvedKey {
    /// The key with its IV for a segment: RFC 8216bis 5.2, without an IV attribute the Media Sequence Number is the IV.
    fileprivate func withIV(forMediaSequence sequence: Int) -> ResolvedKey {
        guard !ivIsExplicit else { return self }
        var key = self
        key.iv = EncryptionKey.iv(forMediaSequence: sequence)
        return key
    }
}

/// The Media Initialization Section in effect for a segment.
public struct ResolvedInitializationSection: Hashable, Sendable, Codable {
    public var uri: String
    public var url: URL?
    public var byteRange: ResolvedByteRange?
    /// The keys in effect where the EXT-X-MAP tag stands (empty when the section is in the clear).
    public var keys: [ResolvedKey]
}

/// Everything a downloader or a player needs to know about one segment, with all inheritance applied.
public struct ResolvedSegment: Hashable, Sendable, Codable {
    /// 0-based position in the playlist.
    public var index: Int
    public var uri: String
    /// The segment URI made absolute against the playlist's URL (nil when it cannot be resolved).
    public var url: URL?
    public var byteRange: ResolvedByteRange?
    public var duration: Double
    /// Seconds from the start of the playlist to the start of this segment.
    public var startTime: Double
    public var mediaSequence: Int
    public var discontinuitySequence: Int
    public var programDateTime: Date?
    public var isGap: Bool
    /// EXT-X-BITRATE in effect, in bits per second.
    public var bitrate: Int?
    public var initializationSection: ResolvedInitializationSection?
    /// The keys in effect, one per KEYFORMAT; empty when the segment is in the clear.
    public var keys: [ResolvedKey]

    /// The key of the given KEYFORMAT, if the segment has one.
    public func key(forKeyFormat keyFormat: String) -> ResolvedKey? { keys.first { $0.keyFormat == keyFormat } }

    /// The encryption method (all KEYFORMATs of one segment share it), or nil when the segment is clear.
    public var method: EncryptionMethod? { keys.first?.method }
}

extension MediaPlaylist {
    /// The segments with URIs, byte ranges, timing, sequence numbers, init sections and keys resolved.
    ///
    /// - Parameter baseURL: the URL the playlist was loaded from, after redirects (for a file, its file URL).
    public func resolvedSegments(baseURL: URL?) -> [ResolvedSegment] {
        var result: [ResolvedSegment] = []
        result.reserveCapacity(segments.count)
        // RFC 8216bis 4.4.5.2: EXT-X-SKIP stands for segments removed from the start of a delta update.
        // Sequence numbers wrap rather than trap at Int.max: the parser caps the written values at Int.max, and the
        // wrapped bits are still the right 64-bit sequence number for the IV (RFC 8216bis 5.2).
        var sequence = (mediaSequence ?? 0) &+ (skip?.skippedSegments ?? 0)
        var discontinuity = discontinuitySequence ?? 0
        var time = 0.0
        // Each key is resolved once, where its tag stands (its URL, its explicit IV); a segment only fills in the IV
        // from its sequence number. Resolving per segment would cost keys x segments URL resolutions.
        var keys: [String: ResolvedKey] = [:]
        var keyOrder: [String] = []
        // Resolved once where the EXT-X-MAP stands, with the sequence number of the segment after it: the IV of a key
        // without IV attribute, so the section resolves to the same IV for every segment that uses it.
        var resolvedInit: ResolvedInitializationSection?
        var bitrate: Int?
        var previousRangeEnd: (uri: String, end: Int)?

        for (index, segment) in segments.enumerated() {
            var programDateTime: Date?
            var byteRange: ByteRange?
            var segmentBitrate = bitrate
            for tag in segment.tags {
                switch tag {
                case .key(let key):
                    if key.method == .none {
                        keys = [:]
                        keyOrder = []
                    } else {
                        if keys[key.effectiveKeyFormat] == nil { keyOrder.append(key.effectiveKeyFormat) }
                        keys[key.effectiveKeyFormat] = resolve(key, baseURL: baseURL)
                    }
                case .map(let map):
                    resolvedInit = ResolvedInitializationSection(
                        uri: map.uri,
                        url: PlaylistURI.resolve(map.uri, against: baseURL),
                        byteRange: map.byteRange.map { ResolvedByteRange(offset: $0.offset ?? 0, length: $0.length) },
                        keys: keyOrder.compactMap { keys[$0]?.withIV(forMediaSequence: sequence) }
                    )
                case .discontinuity:
                    discontinuity &+= 1
                case .byteRange(let range):
                    byteRange = range
                case .programDateTime(let text):
                    programDateTime = ProgramDateTime.parse(text)
                case .bitrate(let value):
                    bitrate = value
                    segmentBitrate = value
                case .dateRange, .gap, .part, .other:
                    break
                }
            }
            var resolvedRange: ResolvedByteRange?
            if let byteRange {
                let offset =
                    byteRange.offset ?? (previousRangeEnd.flatMap { $0.uri == segment.uri ? $0.end : nil } ?? 0)
                resolvedRange = ResolvedByteRange(offset: offset, length: byteRange.length)
                previousRangeEnd = (segment.uri, offset + byteRange.length)
            } else {
                previousRangeEnd = nil
            }
            let resolvedKeys = keyOrder.compactMap { keys[$0]?.withIV(forMediaSequence: sequence) }
            result.append(
                ResolvedSegment(
                    index: index,
                    uri: segment.uri,
                    url: PlaylistURI.resolve(segment.uri, against: baseURL),
                    byteRange: resolvedRange,
                    duration: segment.duration,
                    startTime: time,
                    mediaSequence: sequence,
                    discontinuitySequence: discontinuity,
                    programDateTime: programDateTime,
                    isGap: segment.isGap,
                    bitrate: byteRange == nil ? segmentBitrate : nil,
                    initializationSection: resolvedInit,
                    keys: resolvedKeys
                )
            )
            time += segment.duration
            sequence &+= 1
        }
        return result
    }

    /// A key as resolved where its tag stands; without an IV attribute its IV is filled in per segment.
    private func resolve(_ key: EncryptionKey, baseURL: URL?) -> ResolvedKey {
        let explicit = key.ivBytes
        return ResolvedKey(
            method: key.method,
            keyFormat: key.effectiveKeyFormat,
            keyFormatVersions: key.keyFormatVersions,
            uri: key.uri ?? "",
            url: key.uri.flatMap { PlaylistURI.resolve($0, against: baseURL) },
            iv: explicit ?? [],
            ivIsExplicit: explicit != nil
        )
    }

    /// Every distinct key (by KEYFORMAT and URI) the playlist uses, in order of first appearance.
    public var distinctKeys: [EncryptionKey] {
        var seen: Set<String> = []
        var keys: [EncryptionKey] = []
        for tag in segments.flatMap(\.tags) + trailingTags {
            guard case .key(let key) = tag, key.method != .none else { continue }
            if seen.insert("\(key.effectiveKeyFormat)\u{0}\(key.uri ?? "")").inserted { keys.append(key) }
        }
        return keys
    }
}
