import Foundation
public import KeyDelivery
import StowageCore

/// `stowage info ASSET`: which media selections of a package play offline and which only online, the question
/// `AVAssetCache.isPlayableOffline` and `mediaSelectionOptions(in:)` answer on Apple platforms.
///
/// A selection is offline-playable when its rendition is completely downloaded, every key its files use is held on
/// this device now, and (for keys under a lease) the lease allows playback now. Anything else plays only online,
/// with the reason given. This looks at the manifest, the key store and the lease, not at the files: `stowage verify`
/// checks those.
///
/// JSON:
///
/// ```json
/// {"assetId": "movie-1", "title": "Movie", "sourceURL": "https://...", "createdAt": 1763700000,
///  "updatedAt": 1763700100, "isComplete": false, "isPlayableOffline": true, "sizeOnDisk": 1236992,
///  "lease": {"state": "persisted", "isValid": true, "...": "..."},
///  "keys": [{"keyId": "0123...", "kind": "skd", "isAvailable": true}],
///  "selections": [
///    {"renditionId": "video", "kind": "video", "name": "video", "isDefault": true, "bandwidth": 800000,
///     "duration": 6, "availability": "offline"},
///    {"renditionId": "audio-fr", "kind": "audio", "name": "Français", "language": "fr", "isDefault": false,
///     "duration": 6, "availability": "online_only", "reason": "package_incomplete"}
///  ]}
/// ```
public struct PackageInfo: Codable, Sendable, Hashable {
    /// Where a media selection can be played from.
    public enum Availability: String, Codable, Sendable, Hashable {
        /// Downloaded, with its keys held and the lease valid: plays without the network.
        case offline
        /// Plays only while online (from the source), for the reason given.
        case onlineOnly = "online_only"
    }

    /// One media selection (the video variant, an audio or subtitle rendition).
    public struct MediaSelection: Codable, Sendable, Hashable {
        /// The rendition's ID (`video`, `audio-en`...).
        public var renditionId: String
        /// `video`, `audio` or `subtitles`.
        public var kind: String
        /// NAME of EXT-X-MEDIA (or `video`).
        public var name: String
        /// LANGUAGE, if any.
        public var language: String?
        /// GROUP-ID, if any.
        public var groupId: String?
        /// DEFAULT=YES.
        public var isDefault: Bool
        /// BANDWIDTH, if known.
        public var bandwidth: Int?
        /// CODECS, if known.
        public var codecs: String?
        /// RESOLUTION, if known.
        public var resolution: String?
        /// Duration in seconds.
        public var duration: Double
        /// Offline or online only.
        public var availability: Availability
        /// Why it plays only online: `package_incomplete`, a key problem code (`key_missing`, `key_expired`...),
        /// or a lease code (`storage_window_expired`, `clock_rollback_detected`...). Nil when offline.
        public var reason: String?

        /// Whether the selection plays offline.
        public var isPlayableOffline: Bool { availability == .offline }
    }

    /// The asset.
    public var assetId: String
    /// Its title.
    public var title: String?
    /// Where it was downloaded from.
    public var sourceURL: String
    /// When the download was planned (seconds since the Unix epoch).
    public var createdAt: Int64
    /// When the manifest was last written.
    public var updatedAt: Int64
    /// Whether every rendition is downloaded.
    public var isComplete: Bool
    /// Whether the asset plays offline at all: its video selection does (the first selection when there is no
    /// video).
    public var isPlayableOffline: Bool
    /// Bytes the package takes on disk.
    public var sizeOnDisk: Int64
    /// The lease, for keys under a lease.
    public var lease: PackageLeaseSummary?
    /// The keys the package uses.
    public var keys: [VerificationReport.KeyStatus]
    /// Every media selection, in manifest order.
    public var selections: [MediaSelection]
    /// For a recorded live or EVENT stream: the span it holds on the broadcast's wall clock, and what is missing.
    public var recording: Recording?

    /// A recorded live stream's span (from its main rendition: the video, else the first).
    public struct Recording: Codable, Sendable, Hashable {
        /// `live` or `event`.
        public var playlistType: String
        /// Whether recording still goes on (or was interrupted and can be resumed).
        public var isRecording: Bool
        /// Why it ended, once it has.
        public var endReason: PackageRecording.EndReason?
        /// Media sequence numbers of the first and last segment recorded.
        public var firstMediaSequence: Int?
        public var lastMediaSequence: Int?
        /// Seconds of media recorded, gaps included.
        public var seconds: Double
        /// When the first segment began and the last ended on the broadcast's clock (EXT-X-PROGRAM-DATE-TIME),
        /// seconds since 1970; nil when the stream gives no dates.
        public var startsAt: Double?
        public var endsAt: Double?
        /// Missing segments, by rendition.
        public var gaps: [PackageRecordingGap]

        init(_ recording: PackageRecording, main: PackageRendition?) {
            playlistType = recording.playlistType
            isRecording = !recording.hasEnded
            endReason = recording.endReason
            firstMediaSequence = main?.segments.first?.mediaSequence
            lastMediaSequence = main?.segments.last?.mediaSequence
            seconds = main?.duration ?? 0
            startsAt = main?.segments.first?.programDateTime
            endsAt = main?.segments.last.flatMap { last in last.programDateTime.map { $0 + last.duration } }
            gaps = recording.gaps
        }
    }

    /// The selections that play offline.
    public var offlineSelections: [MediaSelection] { selections.filter(\.isPlayableOffline) }

    /// The selections that play only online.
    public var onlineOnlySelections: [MediaSelection] { selections.filter { !$0.isPlayableOffline } }

    /// The selections of one kind (`mediaSelectionOptions(in:)` for a group), offline ones first.
    public func selections(of kind: PackageRendition.Kind) -> [MediaSelection] {
        let matching = selections.filter { $0.kind == kind.rawValue }
        return matching.filter(\.isPlayableOffline) + matching.filter { !$0.isPlayableOffline }
    }

    /// Describes the package of `assetId`.
    ///
    /// Evaluating the lease records the local time in the key store, as every lease operation does.
    ///
    /// - Throws: ``PackageError`` when there is no package or its manifest cannot be read; the key store's storage
    ///   failures.
    public static func load(
        assetId: String,
        dataDirectory: DataDirectory,
        store: KeyStore,
        device: DeviceIdentity,
        at now: Int64
    ) throws -> PackageInfo {
        let package = try PackageDirectory(assetId: assetId, in: dataDirectory)
        let manifest = try package.readManifest()
        let keys = try PackageKeyCheck(store: store, device: device).check(manifest, at: now, duration: nil)
        let keyProblems = Dictionary(
            keys.problems.compactMap { problem in problem.keyId.map { ($0, problem.code.rawValue) } },
            uniquingKeysWith: { first, _ in first }
        )
        let leaseCode = keys.lease.flatMap { $0.error.map { VerificationProblem(leaseError: $0).code.rawValue } }
        let skdKeys = Set(manifest.keys.filter { $0.kind == .skd }.map(\.keyId))

        let selections = manifest.renditions.map { rendition -> MediaSelection in
            let keyIds = Set(rendition.files.compactMap(\.key?.keyId))
            var reason: String?
            if !rendition.isComplete {
                reason = VerificationProblem.Code.packageIncomplete.rawValue
            } else if let missing = keyIds.sorted().first(where: { keys.keys[$0] == nil }) {
                reason = keyProblems[missing] ?? VerificationProblem.Code.keyMissing.rawValue
            } else if !keyIds.isDisjoint(with: skdKeys), let leaseCode {
                reason = leaseCode
            }
            return MediaSelection(
                renditionId: rendition.id,
                kind: rendition.kind.rawValue,
                name: rendition.name,
                language: rendition.language,
                groupId: rendition.groupId,
                isDefault: rendition.isDefault,
                bandwidth: rendition.bandwidth,
                codecs: rendition.codecs,
                resolution: rendition.resolution,
                duration: rendition.duration,
                availability: reason == nil ? .offline : .onlineOnly,
                reason: reason
            )
        }
        // What the source offers that the package does not hold plays only online (AVAssetCache's question).
        let elsewhere = (manifest.availableRenditions ?? []).map { source in
            MediaSelection(
                renditionId: source.onlineId,
                kind: source.kind.rawValue,
                name: source.name,
                language: source.language,
                groupId: source.groupId,
                isDefault: false,
                bandwidth: source.bandwidth,
                codecs: source.codecs,
                resolution: source.resolution,
                duration: manifest.renditions.first?.duration ?? 0,
                availability: .onlineOnly,
                reason: "not_downloaded"
            )
        }
        let main = selections.first { $0.kind == PackageRendition.Kind.video.rawValue } ?? selections.first
        return PackageInfo(
            assetId: manifest.assetId,
            title: manifest.title,
            sourceURL: manifest.sourceURL,
            createdAt: manifest.createdAt,
            updatedAt: manifest.updatedAt,
            isComplete: manifest.isComplete,
            isPlayableOffline: main?.isPlayableOffline ?? false,
            sizeOnDisk: package.sizeOnDisk(),
            lease: keys.lease.map(PackageLeaseSummary.init),
            keys: manifest.keys.map {
                VerificationReport.KeyStatus(keyId: $0.keyId, kind: $0.kind.rawValue, isAvailable: keys.keys[$0.keyId] != nil)
            },
            selections: selections + elsewhere,
            recording: manifest.recording.map {
                Recording($0, main: manifest.renditions.first { $0.kind == .video } ?? manifest.renditions.first)
            }
        )
    }
}
