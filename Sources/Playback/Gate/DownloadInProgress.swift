/// What playback needs to know of a package that is still downloading (the download engine answers, through
/// `StowageLibrary`; this module does not depend on it): which files have landed whole, with the size and SHA-256 the
/// downloader recorded, and whether a download is running that may bring the others.
///
/// With one, ``PlaybackGate/authorize(assetId:download:)`` lets an incomplete package play, the way AVPlayer plays the
/// asset of a running download task: the served playlists are the package's complete VOD playlists, a file that is
/// there is served as usual, and a request for one that is not waits for the running download (bounded, then `503`
/// with `Retry-After`) or, when none runs, gets `404`; both are written to the error log.
public protocol DownloadInProgress: Sendable {
    /// The size and lowercase hex SHA-256 of `path` (relative to the package) once the download has put it in place;
    /// nil before.
    func completedFile(_ path: String) -> (size: Int64, sha256: String)?
    /// Whether a download of the asset is running now (in this process or another).
    func isRunning() -> Bool
    /// Asks the running download to fetch `path` next: a player waits for it (it seeked ahead of the download).
    func want(_ path: String)
}
