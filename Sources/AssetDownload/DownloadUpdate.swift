import Foundation
public import OfflinePackage
public import StowageCore

/// A ``DownloadEvent`` as data: what `stowage download --json` prints one per line and what the download service
/// streams to `download --attach`. Members absent from an event are left out of its JSON.
///
/// ```json
/// {"asset":"demo-1","event":"progress","fraction":0.54,"bytes":1203400,"bytesPerSecond":5200000,
///  "renditions":[{"id":"video","loadedTimeRanges":[[0,4]],...}]}
/// ```
public struct DownloadUpdate: Codable, Sendable, Hashable {
    /// What happened (the event's name).
    public enum Kind: String, Codable, Sendable, Hashable {
        case willDownload, resolvedMediaSelections, playlistWarnings, keysAcquired, progress, mediaSelectionCompleted, paused, resumed, finished,
            failed
        /// A service holds the task in its queue (its place is ``DownloadUpdate/position``).
        case queued
        /// A service waits for a condition before it runs the task again (``DownloadUpdate/reason`` says which).
        case waiting
        /// A live recording found segments missing (``DownloadUpdate/gap``).
        case recordingGap
        /// A live recording ended (``DownloadUpdate/recording``).
        case recordingEnded
    }

    /// One media selection as resolved.
    public struct MediaSelection: Codable, Sendable, Hashable {
        public var id: String
        public var kind: String
        public var name: String
        public var language: String?
        public var resolution: String?
        public var bandwidth: Int?
        public var files: Int
        /// Why the download took it (``OfflinePackage/PackageRendition/selectedBecause``).
        public var reason: String?
    }

    /// An error's code, message and subject: the one JSON form of an error (`ErrorDocument`'s body).
    public typealias Problem = ErrorDocument.Body

    public var asset: String
    public var event: Kind
    /// `willDownload`: the package folder.
    public var location: String?
    /// `resolvedMediaSelections`.
    public var mediaSelections: [MediaSelection]?
    /// `playlistWarnings`: each deviation from RFC 8216bis the source's playlists make, and how it was read.
    public var warnings: [PackagePlaylistWarning]?
    /// `keysAcquired`: the lease (nil for identity keys) and the number of keys.
    public var leaseId: String?
    public var keys: Int?
    /// `progress`: the overall fraction, bytes in place, rate, estimate, and each rendition; `finished`: bytes.
    public var fraction: Double?
    public var bytes: Int64?
    public var bytesPerSecond: Int?
    public var secondsLeft: Double?
    public var renditions: [DownloadProgress.Rendition]?
    /// `mediaSelectionCompleted`: which.
    public var id: String?
    /// `paused` (nil when paused on request) and `waiting`: why.
    public var reason: Problem?
    /// `finished`: whether every media selection is complete, and how many there are.
    public var complete: Bool?
    public var mediaSelectionCount: Int?
    /// `failed`: what stopped it.
    public var error: Problem?
    /// `queued`: how many tasks run before this one.
    public var position: Int?
    /// `recordingGap`: the segments missing.
    public var gap: PackageRecordingGap?
    /// `recordingEnded` and a recording's `finished`: its span, end and gaps.
    public var recording: PackageRecording?

    public init(asset: String, event: Kind) {
        self.asset = asset
        self.event = event
    }

    /// The event's data.
    public init(_ event: DownloadEvent, assetId: String) {
        switch event {
        case .willDownload(let url):
            self.init(asset: assetId, event: .willDownload)
            location = url.path
        case .resolvedMediaSelections(let renditions):
            self.init(asset: assetId, event: .resolvedMediaSelections)
            mediaSelections = renditions.map {
                MediaSelection(
                    id: $0.id,
                    kind: $0.kind.rawValue,
                    name: $0.name,
                    language: $0.language,
                    resolution: $0.resolution,
                    bandwidth: $0.bandwidth,
                    files: $0.files.count,
                    reason: $0.selectedBecause
                )
            }
        case .playlistWarnings(let list):
            self.init(asset: assetId, event: .playlistWarnings)
            warnings = list
        case .keysAcquired(let lease, let count):
            self.init(asset: assetId, event: .keysAcquired)
            leaseId = lease
            keys = count
        case .progress(let progress):
            self.init(asset: assetId, event: .progress)
            fraction = progress.fraction
            bytes = progress.bytes
            bytesPerSecond = Int(progress.bytesPerSecond)
            secondsLeft = progress.secondsLeft
            renditions = progress.renditions
        case .renditionCompleted(let rendition):
            self.init(asset: assetId, event: .mediaSelectionCompleted)
            id = rendition
        case .paused(let why):
            self.init(asset: assetId, event: .paused)
            reason = why.map { ErrorDocument($0).error }
        case .resumed:
            self.init(asset: assetId, event: .resumed)
        case .recordingGap(let missing):
            self.init(asset: assetId, event: .recordingGap)
            gap = missing
        case .recordingEnded(let ended):
            self.init(asset: assetId, event: .recordingEnded)
            recording = ended
        case .finished(let manifest):
            self.init(asset: assetId, event: .finished)
            bytes = manifest.knownBytes
            complete = manifest.isComplete
            mediaSelectionCount = manifest.renditions.count
            recording = manifest.recording
        case .failed(let failure):
            self.init(asset: assetId, event: .failed)
            error = ErrorDocument(failure).error
        }
    }

    /// Whether the task's run ends with this update (the event sequence finishes after it).
    public var isFinal: Bool { [.paused, .finished, .failed].contains(event) }

    /// One line of JSON, keys sorted.
    public func jsonLine() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? #"{"asset":"\#(asset)"}"#
    }
}
