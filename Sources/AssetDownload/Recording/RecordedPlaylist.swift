import Foundation
import HLS
import OfflinePackage
import StowageCore

/// One rendition of a live recording as a growing media playlist: every segment seen in any reload of the source,
/// in media sequence order from the first one recorded, with absolute URIs, and an EXT-X-GAP segment for each one that
/// left the source's window before it was seen.
///
/// Sequence numbers stay the source's (gap segments keep the numbering contiguous), so an IV derived from the media
/// sequence number is the same here as in the source; the keys and initialization section in effect are written out
/// again wherever a reload says they differ from what the recorded playlist would imply (after a gap, or a window that
/// starts after a key change).
struct RecordedPlaylist: Sendable, Hashable {
    /// A gap larger than this is a sequence jump (a restarted encoder or a hostile playlist), not missing media.
    static let maximumGapSegments = 100_000

    private(set) var playlist: MediaPlaylist

    /// What one reload added.
    struct Merge: Sendable, Hashable {
        /// Segments appended, gap segments included.
        var appended = 0
        /// The segments missing between the recording and this reload, if any.
        var gap: PackageRecordingGap?
        /// The reload had segments beyond the recording's `--duration`, which were left out.
        var reachedLimit = false
        /// The reload ends the stream (EXT-X-ENDLIST) and every one of its segments is recorded.
        var ended = false
        /// The reload's last segment is older than the recording's: a stale copy from a cache, or, when it lasts, an
        /// encoder that restarted its numbering.
        var isBehind = false
    }

    init(playlist: MediaPlaylist) {
        self.playlist = playlist
    }

    /// An empty recording of a source whose playlists have `targetDuration`.
    init(targetDuration: Int, version: Int?) {
        playlist = MediaPlaylist(version: version, targetDuration: targetDuration, mediaSequence: nil, discontinuitySequence: nil)
    }

    var isEmpty: Bool { playlist.segments.isEmpty }

    /// The media sequence number of the last segment recorded; nil when none is.
    var lastSequence: Int? { isEmpty ? nil : (playlist.mediaSequence ?? 0) + playlist.segments.count - 1 }

    /// Recorded media seconds, gaps included.
    var duration: Double { playlist.segments.reduce(0) { $0 + $1.duration } }

    /// Marks the segment at `position` EXT-X-GAP (it cannot be fetched any more).
    mutating func markGap(at position: Int) {
        guard playlist.segments.indices.contains(position), !playlist.segments[position].isGap else { return }
        playlist.segments[position].tags.append(.gap)
    }

    /// The recording as a complete playlist (EXT-X-ENDLIST), once recording is over.
    mutating func end() {
        playlist.endList = true
    }

    /// Folds a reload of the source into the recording.
    ///
    /// - Parameters:
    ///   - reload: the source media playlist as just loaded.
    ///   - url: where it was loaded from (relative URIs are resolved against it).
    ///   - renditionId: for the gap record.
    ///   - limit: recorded media seconds after which no segment is added (`--duration`): a segment is added while the
    ///     recording is shorter than the limit, so the recording reaches it with its last segment.
    /// - Throws: ``DownloadError`` `live_sequence_jump` when the reload's sequence numbers jump ahead by more than
    ///   ``maximumGapSegments``.
    mutating func merge(_ reload: MediaPlaylist, url: URL, renditionId: String, limit: Double?) throws(DownloadError) -> Merge {
        var outcome = Merge()
        let resolved = reload.resolvedSegments(baseURL: url)
        let states = Self.effectiveStates(of: reload, url: url)
        playlist.targetDuration = max(playlist.targetDuration, reload.targetDuration)
        if playlist.playlistType == nil, reload.playlistType == .event { playlist.playlistType = .event }
        var recordedState = Self.effectiveStates(of: playlist, url: nil).last ?? State()
        var recordedDiscontinuity = Self.lastDiscontinuitySequence(of: playlist)
        var recordedDuration = duration
        var lastDate = Self.lastDateEnd(of: playlist)
        var taken = 0
        for (position, segment) in reload.segments.enumerated() {
            let source = resolved[position]
            if let last = lastSequence, source.mediaSequence <= last {
                taken += 1
                continue
            }
            if let limit, recordedDuration >= limit {
                outcome.reachedLimit = true
                break
            }
            if isEmpty {
                playlist.mediaSequence = source.mediaSequence
                playlist.discontinuitySequence = source.discontinuitySequence - (segment.isDiscontinuity ? 1 : 0)
                recordedDiscontinuity = playlist.discontinuitySequence ?? 0
            }
            var tags: [SegmentTag] = []
            if let last = lastSequence, source.mediaSequence > last + 1 {
                let missing = source.mediaSequence - last - 1
                guard missing <= Self.maximumGapSegments else {
                    throw DownloadError.playlist(
                        code: .liveSequenceJump,
                        message:
                            "\(url.absoluteString) jumped from media sequence \(last) to \(source.mediaSequence): more than "
                            + "\(Self.maximumGapSegments) segments cannot be missing from a recording; the stream restarted "
                            + "with new numbers, so record it again under a new asset ID"
                    )
                }
                let nextDate = source.programDateTime?.timeIntervalSince1970
                var each = Double(max(reload.targetDuration, 1))
                if let lastDate, let nextDate, nextDate > lastDate {
                    each = min((nextDate - lastDate) / Double(missing), each * 3)
                }
                // Discontinuities among the missing segments: one on each gap segment, then one on the segment after.
                var unseenDiscontinuities = max(0, source.discontinuitySequence - recordedDiscontinuity - (segment.isDiscontinuity ? 1 : 0))
                // The segment after the gap keeps a discontinuity of its own, or takes the last one hidden in the gap.
                let keptForSegment = segment.isDiscontinuity ? 0 : 1
                // A gap segment as long as the dates say may outlast the target duration, which must then grow.
                playlist.targetDuration = max(playlist.targetDuration, Int(each.rounded(.up)))
                var appendedGap = 0
                for _ in 0..<missing {
                    if let limit, recordedDuration + each * Double(appendedGap) >= limit { break }
                    appendedGap += 1
                    var gapTags: [SegmentTag] = []
                    if unseenDiscontinuities > keptForSegment {
                        gapTags.append(.discontinuity)
                        unseenDiscontinuities -= 1
                    }
                    gapTags.append(.gap)
                    playlist.segments.append(MediaSegment(uri: "gap.ts", duration: each, tags: gapTags))
                }
                if unseenDiscontinuities > 0, !segment.isDiscontinuity { tags.append(.discontinuity) }
                let span = each * Double(appendedGap)
                outcome.gap = PackageRecordingGap(
                    renditionId: renditionId,
                    firstMediaSequence: last + 1,
                    segments: appendedGap,
                    seconds: span,
                    startsAt: lastDate,
                    endsAt: appendedGap == missing ? (nextDate ?? lastDate.map { $0 + span }) : lastDate.map { $0 + span }
                )
                outcome.appended += appendedGap
                recordedDuration += span
                if appendedGap < missing {
                    // The limit falls inside the gap: the recording ends with it.
                    outcome.reachedLimit = true
                    break
                }
                // What a gap hid cannot be assumed: the keys and map in effect are written out again.
                recordedState = State()
            }
            let state = states[position]
            if state != recordedState {
                tags += state.keys.map { .key($0) }
                if let map = state.map { tags.append(.map(map)) }
                recordedState = state
            }
            for tag in segment.tags {
                switch tag {
                case .key, .map, .part, .byteRange:
                    continue
                case .discontinuity:
                    tags.insert(.discontinuity, at: 0)
                default:
                    tags.append(tag)
                }
            }
            if let range = source.byteRange { tags.append(.byteRange(ByteRange(length: range.length, offset: range.offset))) }
            let uri = source.url?.absoluteString ?? segment.uri
            playlist.segments.append(MediaSegment(uri: uri, duration: segment.duration, title: segment.title, tags: tags))
            recordedDiscontinuity = source.discontinuitySequence
            recordedDuration += segment.duration
            lastDate = (source.programDateTime?.timeIntervalSince1970 ?? lastDate).map { $0 + segment.duration }
            outcome.appended += 1
            taken += 1
        }
        let reloadLast = resolved.last?.mediaSequence
        outcome.isBehind = reloadLast.map { last in lastSequence.map { last < $0 } ?? false } ?? false
        outcome.ended = reload.endList && taken == reload.segments.count && !outcome.isBehind
        return outcome
    }

    /// The keys (by key format, in order) and initialization section in effect.
    struct State: Sendable, Hashable {
        var keys: [EncryptionKey] = []
        var map: MediaInitializationSection?
    }

    /// The state in effect after each segment's tags, with URIs made absolute against `url` (when given).
    static func effectiveStates(of media: MediaPlaylist, url: URL?) -> [State] {
        var states: [State] = []
        states.reserveCapacity(media.segments.count)
        var state = State()
        for segment in media.segments {
            for tag in segment.tags {
                switch tag {
                case .key(var key):
                    if let uri = key.uri, let url, let absolute = PlaylistURI.resolve(uri, against: url) { key.uri = absolute.absoluteString }
                    if key.method == .none {
                        state.keys = [key]
                    } else {
                        state.keys.removeAll { $0.method == .none || $0.effectiveKeyFormat == key.effectiveKeyFormat }
                        state.keys.append(key)
                    }
                case .map(var map):
                    if let url, let absolute = PlaylistURI.resolve(map.uri, against: url) { map.uri = absolute.absoluteString }
                    state.map = map
                default:
                    break
                }
            }
            states.append(state)
        }
        return states
    }

    static func lastDiscontinuitySequence(of media: MediaPlaylist) -> Int {
        (media.discontinuitySequence ?? 0) + media.segments.filter(\.isDiscontinuity).count
    }

    /// When the last recorded segment ended on the wall clock, from the last date and the durations after it.
    static func lastDateEnd(of media: MediaPlaylist) -> Double? {
        var end: Double?
        for segment in media.segments {
            if let date = segment.programDateTime?.timeIntervalSince1970 { end = date }
            end = end.map { $0 + segment.duration }
        }
        return end
    }
}
