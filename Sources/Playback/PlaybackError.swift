public import KeyDelivery
import OfflinePackage
public import StowageCore

/// Why an offline package may not play, or why serving part of it stopped, with a stable code.
///
/// Modelled on ``LeaseError`` (and async-http-client's `HTTPClientError`): callers compare ``reason``, tools read
/// ``code`` (snake_case, stable, for JSON and the CLI). Lease refusals keep the lease's own codes
/// (`storage_window_expired`, `playback_window_expired`, `clock_rollback_detected`, ...). The message names the
/// asset (and file or key) and says what to do; it never contains key material.
///
/// ```swift
/// do {
///     let authorization = try gate.authorize(assetId: "movie-1")
/// } catch {
///     print("\(error.code): \(error.message)")
/// }
/// ```
public struct PlaybackError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of refusal: a file, key or package problem, the playback server's own (`playback_url_reused`,
    /// `clock_untrustworthy`, ...), or a lease refusal with the lease's own code (``KeyDelivery/LeaseError/reasons``).
    public typealias Reason = ErrorCode

    /// The kind of refusal.
    public let reason: Reason
    /// The asset concerned.
    public let assetId: String
    /// The file concerned (relative to the package), when there is one.
    public let path: String?
    /// The key concerned, when there is one.
    public let keyId: String?
    /// The lease refusal this error carries, for lease reasons.
    public let leaseError: LeaseError?
    /// What happened and what to do.
    public let message: String

    init(_ reason: Reason, assetId: String, path: String? = nil, keyId: String? = nil, leaseError: LeaseError? = nil, message: String) {
        self.reason = reason
        self.assetId = assetId
        self.path = path
        self.keyId = keyId
        self.leaseError = leaseError
        self.message = message
    }

    /// The stable code, e.g. `segment_checksum_mismatch`.
    public var code: ErrorCode { reason }

    public var description: String { "\(code): \(message)" }

    private static let downloadAgain = "Delete the asset (`stowage delete`) and download it again while online."

    /// No package for `assetId`.
    public static func packageNotFound(assetId: String) -> Self {
        .init(
            .packageNotFound,
            assetId: assetId,
            message: PackageError.notFound(assetId).description
        )
    }

    /// The manifest of `assetId` cannot be used.
    public static func invalidManifest(assetId: String, reason: String) -> Self {
        .init(.invalidManifest, assetId: assetId, message: "The manifest of asset \(assetId) cannot be used (\(reason)). \(downloadAgain)")
    }

    /// The package is not completely downloaded.
    public static func packageIncomplete(assetId: String, detail: String) -> Self {
        .init(
            .packageIncomplete,
            assetId: assetId,
            message: "The package of asset \(assetId) is not complete (\(detail)). Resume the download (`stowage download`) while online."
        )
    }

    /// A file of the package is missing.
    public static func segmentMissing(assetId: String, path: String) -> Self {
        .init(.segmentMissing, assetId: assetId, path: path, message: "The file \(path) of asset \(assetId) is missing. \(downloadAgain)")
    }

    /// A file of a package that is still downloading is not on disk yet; the running download may bring it.
    public static func segmentDownloading(assetId: String, path: String, waited: Double) -> Self {
        .init(
            .segmentDownloading,
            assetId: assetId,
            path: path,
            message:
                "The file \(path) of asset \(assetId) is still downloading (waited \(HumanTime.duration(Int64(waited.rounded(.up))))); the player may ask again in a moment."
        )
    }

    /// Why a file of a package still downloading could not be served (``segmentNotDownloaded(assetId:path:why:)``).
    public enum MissingFileCause: Sendable, Hashable {
        /// `play --offline`: nothing is fetched.
        case offline
        /// The session asked the source, which could not provide it (what it did).
        case sourceFailed(String)
    }

    /// A file of a package that is still downloading is not on disk, no download is running to bring it, and the
    /// session could not fetch it either.
    public static func segmentNotDownloaded(assetId: String, path: String, why: MissingFileCause) -> Self {
        let reason =
            switch why {
            case .offline:
                "playback runs with --offline, which fetches nothing. Play without --offline while online, or resume the download (`stowage resume \(assetId)`)."
            case .sourceFailed(let detail):
                "its source could not provide it: \(detail). Resume the download (`stowage resume \(assetId)`) once the source answers."
            }
        return .init(
            .segmentNotDownloaded,
            assetId: assetId,
            path: path,
            message: "The file \(path) of asset \(assetId) is not downloaded yet, and \(reason)"
        )
    }

    /// A file's size is not the manifest's.
    public static func segmentModified(assetId: String, path: String, expected: Int64, found: Int64) -> Self {
        .init(
            .segmentModified,
            assetId: assetId,
            path: path,
            message: "The file \(path) of asset \(assetId) was modified (\(found) bytes, the manifest says \(expected)). \(downloadAgain)"
        )
    }

    /// A file's SHA-256 is not the manifest's.
    public static func segmentChecksumMismatch(assetId: String, path: String) -> Self {
        .init(
            .segmentChecksumMismatch,
            assetId: assetId,
            path: path,
            message: "The file \(path) of asset \(assetId) does not match its checksum: it was modified or damaged. \(downloadAgain)"
        )
    }

    /// An asset still downloading has no keys stored yet.
    public static func keysPending(assetId: String, downloadRunning: Bool) -> Self {
        .init(
            .keysPending,
            assetId: assetId,
            message: downloadRunning
                ? "The download of asset \(assetId) has not stored its keys yet; play it again in a moment (`stowage download URL --play` starts the player as soon as it can)."
                : "The download of asset \(assetId) stopped before it stored its keys; resume it (`stowage resume \(assetId)`) while online, then play."
        )
    }

    /// A file of an online rendition could not be fetched.
    public static func onlineUnavailable(assetId: String, path: String, detail: String) -> Self {
        .init(
            .onlineUnavailable,
            assetId: assetId,
            path: path,
            message:
                "The online rendition file \(path) of asset \(assetId) could not be fetched from the source (\(detail)). Check the network, or play what is stored with `stowage play \(assetId) --offline`."
        )
    }

    /// The key of an online rendition was refused or could not be obtained.
    public static func onlineKeyRefused(assetId: String, keyId: String, detail: String) -> Self {
        .init(
            .onlineKeyRefused,
            assetId: assetId,
            keyId: keyId,
            message:
                "The key \(keyId) of an online rendition of asset \(assetId) was not granted (\(detail)). The renditions stored offline still play; `stowage play \(assetId) --offline` offers only those."
        )
    }

    /// A key is not held.
    public static func keyMissing(assetId: String, keyId: String?, detail: String) -> Self {
        .init(.keyMissing, assetId: assetId, keyId: keyId, message: "A key of asset \(assetId) is not available: \(detail)")
    }

    /// The key store cannot be read.
    public static func keyStoreUnavailable(assetId: String, detail: String) -> Self {
        .init(
            .keyStoreUnavailable,
            assetId: assetId,
            message:
                "The key store cannot be read while authorizing asset \(assetId) (\(detail)). Check the data directory's permissions and free space."
        )
    }

    /// A lease refusal, keeping its reason, code and message.
    public static func lease(_ error: LeaseError, assetId: String) -> Self {
        .init(error.reason, assetId: error.assetId ?? assetId, leaseError: error, message: error.message)
    }

    /// A method or layout playback cannot decrypt.
    public static func unsupportedEncryption(assetId: String, path: String, detail: String) -> Self {
        .init(
            .unsupportedEncryption,
            assetId: assetId,
            path: path,
            message: "The file \(path) of asset \(assetId) cannot be played: \(detail). Stowage does not serve it; "
                + "`stowage verify \(assetId)` lists every such file"
        )
    }

    /// A file could not be decrypted.
    public static func decryptionFailed(assetId: String, path: String, detail: String) -> Self {
        .init(
            .decryptionFailed,
            assetId: assetId,
            path: path,
            message: "The file \(path) of asset \(assetId) could not be decrypted (\(detail)). Run `stowage verify \(assetId)`; "
                + "if it fails, delete the asset and download it again."
        )
    }

    /// The package was deleted during playback.
    public static func packageDeleted(assetId: String) -> Self {
        .init(
            .packageDeleted,
            assetId: assetId,
            message: "The package of asset \(assetId) was deleted; playback ended. Download it again to play it."
        )
    }

    /// The one-time URL of the session was requested again, or for something other than the multivariant playlist.
    public static func entryReused(assetId: String) -> Self {
        .init(
            .playbackURLReused,
            assetId: assetId,
            message: "The playback URL of asset \(assetId) was requested again after the player used it; it works once. Another "
                + "process may have copied it from the player's command line. Run `stowage play \(assetId)` for a new one."
        )
    }

    /// The clocks this process reads disagree: something preloaded is changing the time it sees.
    public static func clockUntrustworthy(assetId: String, detail: String) -> Self {
        .init(
            .clockUntrustworthy,
            assetId: assetId,
            message: "Asset \(assetId) cannot play: \(detail). Leases are judged by the machine's own clock: run Stowage "
                + "without anything that changes the time it sees (LD_PRELOAD, faketime, a container that shows its own /proc)."
        )
    }

    /// The process runs where the data directory can be mounted over (a user namespace of its own).
    public static func confined(assetId: String, detail: String) -> Self {
        .init(
            .userNamespaceRefused,
            assetId: assetId,
            message: "Asset \(assetId) cannot play here: \(detail). Run `stowage play` from a shell of the machine's own user "
                + "namespace, outside unshare, rootless containers and sandboxes."
        )
    }

    /// The one-time URL of `assetId` was requested by a process of another user (`uid`).
    public static func entryOtherUser(assetId: String, uid: UInt32?) -> Self {
        let who = uid.map { "user \($0)" } ?? "a process whose user could not be found"
        return .init(
            .playbackURLOtherUser,
            assetId: assetId,
            message: "The playback URL of asset \(assetId) was requested by \(who), not by the user running `stowage play`, and "
                + "was refused; the URL still works for a player run by that user. Another user may be reading command lines "
                + "on this machine."
        )
    }

    /// The asset's leases changed between the two looks playback takes at them.
    public static func leasesChanged(assetId: String) -> Self {
        .init(
            .leasesChanged,
            assetId: assetId,
            message: "The leases of asset \(assetId) changed while playback started (another stowage command renewed, returned "
                + "or fetched its keys); run `stowage play \(assetId)` again."
        )
    }

    /// The server could not start or failed.
    public static func serverFailed(assetId: String, detail: String) -> Self {
        .init(.playbackServerFailed, assetId: assetId, message: "The playback server for asset \(assetId) failed: \(detail).")
    }
}

extension PlaybackError: StowageError {
    public var subject: ErrorSubject { ErrorSubject(assetId: assetId, path: path) }
}
