public import Foundation

/// What playback needs to know of a package that is still downloading (the download engine answers, through
/// `StowageLibrary`; this module does not depend on it): which files have landed whole, with the size and SHA-256 the
/// downloader recorded, and whether a download is running that may bring the others.
///
/// With one, ``PlaybackGate/authorize(assetId:download:)`` lets an incomplete package play, the way AVPlayer plays the
/// asset of a running download task: the served playlists are the package's complete VOD playlists, a file that is
/// there is served as usual, and a request for one that is not waits for the running download (bounded, then `503`
/// with `Retry-After`) or, when none runs, is fetched from the source into the package (``fetchFromSource(_:)``), and
/// gets `404` when the source cannot provide it; both refusals are written to the error log.
public protocol DownloadInProgress: Sendable {
    /// The size and lowercase hex SHA-256 of `path` (relative to the package) once the download has put it in place;
    /// nil before.
    func completedFile(_ path: String) -> (size: Int64, sha256: String)?
    /// Whether a download of the asset is running now (in this process or another).
    func isRunning() -> Bool
    /// The part file a transfer is writing `path` into now: the running download's, or with none running this
    /// session's own ``fetchFromSource(_:)``; nil when there is none (yet). Read as it grows, it becomes the file
    /// when the transfer renames it into place.
    func partialFile(_ path: String) -> URL?
    /// Asks the running download to fetch `path` next: a player waits for it (it seeked ahead of the download).
    func want(_ path: String)
    /// With no download running, fetches `path` from the source now and puts it in the package exactly as the download
    /// would have (hashed, flushed, recorded), so no download fetches it again. Returns its size and SHA-256.
    ///
    /// - Throws: `segment_not_downloaded` saying what the source did, or that playback was asked to stay offline.
    func fetchFromSource(_ path: String) async throws(PlaybackError) -> (size: Int64, sha256: String)
}
