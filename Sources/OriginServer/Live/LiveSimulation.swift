public import Foundation
public import HLS

/// How ``Origin`` serves the VOD media playlists under its root as live streams (`stowage origin --live`): each one a
/// sliding window of ``window`` segments whose live edge advances in real time (or ``speed`` times faster), all of
/// them from the one clock the origin starts, so renditions stay in step as a packager's would.
///
/// Segments keep their URIs, so their files are served as before; the playlist gets the media sequence and
/// discontinuity sequence of its window, the keys and initialization section in effect at its first segment, and an
/// EXT-X-PROGRAM-DATE-TIME on every segment (the wall clock at which the segment began, with the stream taken to have
/// started `window` segments before the origin did). When the source is exhausted the playlist gets EXT-X-ENDLIST,
/// unless ``loop`` starts it again after an EXT-X-DISCONTINUITY.
public struct LiveSimulation: Sendable, Hashable {
    /// Segments in the sliding window; also how many the stream has when the origin starts.
    public var window: Int
    /// Media seconds per real second.
    public var speed: Double
    /// Serve `EXT-X-PLAYLIST-TYPE:EVENT` playlists that grow and never slide.
    public var event: Bool
    /// Start the source again when it is exhausted, forever, instead of ending the stream.
    public var loop: Bool

    /// - Parameters:
    ///   - window: segments in the sliding window (at least 1).
    ///   - speed: media seconds per real second (above 0).
    ///   - event: grow an EVENT playlist instead of sliding a window.
    ///   - loop: go on forever.
    public init(window: Int = 6, speed: Double = 1, event: Bool = false, loop: Bool = false) {
        self.window = max(1, window)
        self.speed = speed > 0 ? speed : 1
        self.event = event
        self.loop = loop
    }

    /// The live view of `source` once `elapsed` media seconds have passed since the origin started, its first
    /// segment having begun at `startedAt` minus the duration of the first `window` segments.
    ///
    /// - Parameters:
    ///   - source: a media playlist; one that is not complete (no EXT-X-ENDLIST) is returned as it is.
    ///   - elapsed: media seconds since the origin started (real seconds times ``speed``).
    ///   - startedAt: when the origin started, for EXT-X-PROGRAM-DATE-TIME.
    public func view(of source: MediaPlaylist, elapsed: Double, startedAt: Date) -> MediaPlaylist {
        let count = source.segments.count
        guard source.endList, count > 0 else { return source }
        let durations = source.segments.map { max($0.duration, 0.001) }
        let passDuration = durations.reduce(0, +)
        // How many segments the stream has published: the initial window, then one each time a segment's duration
        // of media time has passed.
        var published = min(window, count)
        var time = max(0, elapsed)
        if loop, time > passDuration * 2 {
            let passes = ((time / passDuration).rounded(.down) - 1)
            published += Int(passes) * count
            time -= passes * passDuration
        }
        while loop || published < count {
            let next = durations[published % count]
            guard time >= next else { break }
            time -= next
            published += 1
        }
        let ended = !loop && published >= count
        let first = event ? 0 : max(0, published - window)

        // Per source segment: the keys (by key format, in order) and the initialization section in effect after its
        // own tags, so a window can start anywhere.
        var keysInEffect: [[EncryptionKey]] = []
        var mapInEffect: [MediaInitializationSection?] = []
        var keys: [EncryptionKey] = []
        var map: MediaInitializationSection?
        for segment in source.segments {
            for tag in segment.tags {
                switch tag {
                case .key(let key):
                    if key.method == .none {
                        keys = [key]
                    } else {
                        keys.removeAll { $0.method == .none || $0.effectiveKeyFormat == key.effectiveKeyFormat }
                        keys.append(key)
                    }
                case .map(let section):
                    map = section
                default:
                    break
                }
            }
            keysInEffect.append(keys)
            mapInEffect.append(map)
        }

        // Media time at which each published segment began.
        let anchor = startedAt.addingTimeInterval(-durations.prefix(min(window, count)).reduce(0, +))
        var start = 0.0
        var discontinuities = 0
        var virtual = 0
        let passes = first / count
        if passes > 0 {
            // The first pass has the source's discontinuities; each later one starts with one besides.
            let inSource = source.segments.filter(\.isDiscontinuity).count
            let laterPass = inSource - (source.segments[0].isDiscontinuity ? 1 : 0) + 1
            start = Double(passes) * passDuration
            discontinuities = inSource + (passes - 1) * laterPass
            virtual = passes * count
        }
        while virtual < first {
            let index = virtual % count
            if source.segments[index].isDiscontinuity || (index == 0 && virtual > 0) { discontinuities += 1 }
            start += durations[index]
            virtual += 1
        }

        // Byte ranges get explicit offsets: one that follows the previous segment's would follow another one here.
        let ranges = source.resolvedSegments(baseURL: nil).map(\.byteRange)
        var live = source
        live.endList = ended
        live.playlistType = event ? .event : nil
        live.mediaSequence = (source.mediaSequence ?? 0) + first
        live.discontinuitySequence = (source.discontinuitySequence ?? 0) + discontinuities
        live.segments = []
        live.segments.reserveCapacity(published - first)
        for position in first..<published {
            let index = position % count
            let pass = position / count
            let original = source.segments[index]
            var tags: [SegmentTag] = []
            if index == 0, pass > 0 { tags.append(.discontinuity) }
            // Keys and initialization section are written out at the window's start, and on every segment of a later
            // pass (which needs explicit IVs).
            let restate = position == first || pass > 0
            if restate {
                for var key in keysInEffect[index] {
                    // A later pass has other sequence numbers: an IV taken from the sequence number is written out.
                    if pass > 0, key.method != .none, key.iv == nil {
                        key.iv = Self.ivText(sequence: (source.mediaSequence ?? 0) + index)
                    }
                    tags.append(.key(key))
                }
                if let section = mapInEffect[index] { tags.append(.map(section)) }
            }
            for tag in original.tags {
                switch tag {
                case .programDateTime:
                    continue
                case .key, .map:
                    if restate { continue }
                    tags.append(tag)
                case .discontinuity:
                    if !tags.contains(.discontinuity) { tags.insert(.discontinuity, at: 0) }
                case .byteRange:
                    if let range = ranges[index] { tags.append(.byteRange(ByteRange(length: range.length, offset: range.offset))) }
                default:
                    tags.append(tag)
                }
            }
            tags.append(.programDateTime(Self.dateText(anchor.addingTimeInterval(start))))
            live.segments.append(MediaSegment(uri: original.uri, duration: original.duration, title: original.title, tags: tags))
            start += durations[index]
        }
        return live
    }

    /// 32 hexadecimal digits (the writer adds `0x`): the IV RFC 8216bis 5.2 derives from a media sequence number.
    static func ivText(sequence: Int) -> String {
        String(repeating: "0", count: 16) + String(format: "%016llx", UInt64(truncatingIfNeeded: sequence))
    }

    /// ISO 8601 with milliseconds, in UTC.
    static func dateText(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}
