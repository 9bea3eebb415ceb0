import AssetDownload
public import OfflinePackage

/// One asset of the library, as `stowage list` shows it: a package on disk joined with its download, or a download
/// that has no package yet.
///
/// JSON (`stowage list --json` prints an array of these):
///
/// ```json
/// {"assetId": "demo-1", "title": "Demo", "state": "complete", "sizeOnDisk": 736000, "renditionsOffline": 5,
///  "renditions": 5, "download": "completed", "lease": {"isValid": true, "timeLeft": 2592000, "...": "..."}}
/// ```
public struct AssetSummary: Codable, Sendable, Hashable {
    public var assetId: String
    public var title: String?
    /// The package's state (`complete`, `incomplete`, `unreadable`) or, while it downloads, the download's
    /// (`downloading`, `paused`, `failed`, `queued`, `removing`).
    public var state: String
    /// Bytes the package's folder takes.
    public var sizeOnDisk: Int64
    /// Renditions downloaded completely, of ``renditions``.
    public var renditionsOffline: Int
    public var renditions: Int
    /// The download's state, when there is a download.
    public var download: String?
    /// Why the download stopped, or why the package cannot be read.
    public var failure: String?
    /// The lease as things stand (nil for a package with identity keys only, or none yet).
    public var lease: PackageLeaseSummary?

    init(entry: PackageCatalogEntry, task: DownloadTaskRecord?) {
        assetId = entry.assetId
        title = entry.title
        state = task.map { $0.state == .completed ? entry.state.rawValue : $0.state.rawValue } ?? entry.state.rawValue
        sizeOnDisk = entry.sizeOnDisk
        renditionsOffline = entry.renditionsComplete
        renditions = entry.renditionsTotal
        download = task?.state.rawValue
        failure = task?.failureMessage ?? entry.problem?.message
        lease = entry.lease
    }

    init(task: DownloadTaskRecord) {
        assetId = task.assetId
        title = task.request.title
        state = task.state.rawValue
        sizeOnDisk = 0
        renditionsOffline = 0
        renditions = 0
        download = task.state.rawValue
        failure = task.failureMessage
        lease = nil
    }
}
