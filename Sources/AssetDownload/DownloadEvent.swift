public import Foundation
public import OfflinePackage

/// What a running download reports, in order (the delegate callbacks of AVAssetDownloadDelegate as a sequence).
public enum DownloadEvent: Sendable {
    /// The package folder the asset is written to.
    case willDownload(to: URL)
    /// The media selections resolved from the multivariant playlist: the variant and the renditions.
    case resolvedMediaSelections([PackageRendition])
    /// The source's playlists deviate from RFC 8216bis in ways players accept; each deviation and how it was read
    /// (also kept in the manifest). Sent after ``resolvedMediaSelections(_:)`` when there are any.
    case playlistWarnings([PackagePlaylistWarning])
    /// The keys were obtained and stored (lease ID when a key server issued one).
    case keysAcquired(leaseId: String?, keys: Int)
    case progress(DownloadProgress)
    /// Every file of one media selection is in place.
    case renditionCompleted(id: String)
    /// The download paused: by request (nil) or because of a condition that may pass (disk full).
    case paused(DownloadError?)
    /// The condition that paused the download passed; it continues.
    case resumed
    /// A live recording found segments that left the playlist's window before they were seen: they are marked
    /// EXT-X-GAP in the package (``OfflinePackage/PackageRecording/gaps``).
    case recordingGap(PackageRecordingGap)
    /// A live recording ended (why: ``OfflinePackage/PackageRecording/endReason``); the files still being fetched
    /// complete the package.
    case recordingEnded(PackageRecording)
    case finished(PackageManifest)
    case failed(DownloadError)
}

/// How far a download is.
public struct DownloadProgress: Sendable, Hashable, Codable {
    public struct Rendition: Sendable, Hashable, Codable {
        public var id: String
        public var kind: PackageRendition.Kind
        /// Seconds of media in place: the total of ``loadedTimeRanges``.
        public var loadedSeconds: Double
        /// The media time ranges in place, `[start, end]` in seconds from the rendition's start, merged and sorted
        /// (AVAssetDownloadDelegate's `loadedTimeRanges`).
        public var loadedTimeRanges: [[Double]]
        public var durationSeconds: Double
        public var bytes: Int64
        public var filesDone: Int
        public var filesTotal: Int
        /// BANDWIDTH x duration, the weight in the overall fraction.
        public var expectedBytes: Int64
    }

    public var renditions: [Rendition]
    /// Bytes in place (files complete).
    public var bytes: Int64
    /// Overall fraction 0...1: each rendition's loaded-time fraction weighted by its expected bytes.
    public var fraction: Double
    /// Bytes per second since this run started.
    public var bytesPerSecond: Double
    /// Estimated seconds left, when a rate is known.
    public var secondsLeft: Double?
}
