import Foundation
import KeyDelivery
public import StowageCore

/// Why a download could not start, stopped, or paused. Every case has a stable code and says what to do.
public enum DownloadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A playlist error, its code and subject kept.
    case playlist(code: ErrorCode, message: String, subject: ErrorSubject = ErrorSubject())
    case livePlaylist(url: String)
    case noVariant(url: String)
    case noMatchingRendition(kind: String, requested: [String], available: [String])
    case tooManySegments(url: String, count: Int)
    case unsupportedURI(String)
    case segmentFailed(path: String, url: String, reason: String)
    case segmentHTTPStatus(path: String, url: String, status: Int)
    /// The server announced (Content-Length) or sent more than `limit` bytes for one file.
    case segmentTooLarge(path: String, url: String, limit: Int64)
    case insufficientStorage(needed: Int64, available: Int64)
    /// A key delivery error (the key session, the key store), its code and subject kept.
    case keys(code: ErrorCode, message: String, subject: ErrorSubject = ErrorSubject())
    case storage(String)
    case database(String)
    /// `stowage.sqlite` at `path` is damaged (``KeyDelivery/StateDatabase/isDamaged(_:)``).
    case databaseDamaged(path: String, reason: String)
    /// A package error, its code and subject kept.
    case package(code: ErrorCode, message: String, subject: ErrorSubject = ErrorSubject())
    case notFound(assetId: String)
    case alreadyExists(assetId: String, state: String)
    case invalidState(assetId: String, state: String, action: String)
    /// Stopped by a download service for a condition it waits out (outside the time window, network down).
    case waiting(code: ErrorCode, message: String)

    /// A stable code.
    public var code: ErrorCode {
        switch self {
        case .playlist(let code, _, _): code
        case .livePlaylist: .livePlaylist
        case .noVariant: .noVariant
        case .noMatchingRendition: .noMatchingRendition
        case .tooManySegments: .tooManySegments
        case .unsupportedURI: .unsupportedURI
        case .segmentFailed: .segmentFailed
        case .segmentHTTPStatus: .segmentHTTPStatus
        case .segmentTooLarge: .segmentTooLarge
        case .insufficientStorage: .insufficientStorage
        case .keys(let code, _, _): code
        case .storage: .packageWriteFailed
        case .database: .downloadStateError
        case .databaseDamaged: .databaseDamaged
        case .package(let code, _, _): code
        case .notFound: .downloadNotFound
        case .alreadyExists: .downloadExists
        case .invalidState: .downloadInvalidState
        case .waiting(let code, _): code
        }
    }

    public var description: String {
        switch self {
        case .playlist(_, let message, _): message
        case .livePlaylist(let url):
            "\(url) is a live playlist (no EXT-X-ENDLIST): a live stream is recorded by a new download, and cannot be added to a package that already exists; record it with `stowage download URL --asset-id NEW_ID`"
        case .noVariant(let url): "\(url) lists no variant stream to download"
        case .noMatchingRendition(let kind, let requested, let available):
            "no \(kind) rendition matches \(requested.joined(separator: ",")); available: \(available.isEmpty ? "none" : available.joined(separator: ","))"
        case .tooManySegments(let url, let count):
            "\(url) lists \(count) segments, more than Stowage accepts in one playlist; it is not a playlist to download"
        case .unsupportedURI(let uri): "cannot download \(uri): only http(s) URIs (and file URIs for local sources) are fetched"
        case .segmentFailed(let path, let url, let reason):
            "segment \(path) (\(url)) could not be downloaded: \(reason); run `stowage resume` to try again"
        case .segmentHTTPStatus(let path, let url, let status):
            "segment \(path) (\(url)) answered HTTP \(status); run `stowage resume` once the server has it again"
        case .segmentTooLarge(let path, let url, let limit):
            "segment \(path) (\(url)) is larger than \(Self.megabytes(limit)), more than a segment of its rendition can be "
                + "(the server announced or sent more, and it was not kept): the server is not sending this playlist's media; "
                + "check the source, or choose another variant"
        case .insufficientStorage(let needed, let available):
            "not enough disk space: about \(Self.megabytes(needed)) needed, \(Self.megabytes(available)) free; free some space, then `stowage resume`"
        case .keys(_, let message, _): message
        case .storage(let reason):
            "\(reason); check free space and the permissions of the data directory ($STOWAGE_HOME), then `stowage resume` (a new "
                + "download that failed before its first file is forgotten: run the same `stowage download` again)"
        case .database(let reason):
            "the download state in stowage.sqlite cannot be read or written (\(reason)); check the data directory ($STOWAGE_HOME)"
        case .databaseDamaged(let path, let reason): StateDatabase.damagedMessage(path: path, reason: reason)
        case .package(_, let message, _): message
        case .notFound(let asset): "no download of asset \(asset); `stowage list` shows the assets"
        case .alreadyExists(let asset, let state):
            "asset \(asset) already exists (\(state)); use `stowage resume \(asset)`, `stowage add-media \(asset)` or `stowage delete \(asset)`"
        case .waiting(_, let message): message
        case .invalidState(let asset, let state, let action): "cannot \(action) asset \(asset): it is \(state)\(Self.hint(asset, state))"
        }
    }

    /// Whether the failure may pass by itself (the network or a server back, space freed, the time window open):
    /// a download service waits and tries again instead of leaving the task failed.
    public var isTransient: Bool { Self.isTransient(code: code) }

    /// ``isTransient`` for a stored failure code.
    public static func isTransient(code: ErrorCode) -> Bool {
        [
            .segmentFailed, .playlistNetworkError, .keyServerUnreachable, .identityKeyUnreachable, .insufficientStorage, .outsideTimeWindow,
            .serviceStopped,
        ].contains(code)
    }

    /// What to do with a task in `state` instead.
    static func hint(_ asset: String, _ state: String) -> String {
        switch state {
        case DownloadState.completed.rawValue: "; `stowage delete \(asset)` removes it, `stowage add-media \(asset)` adds renditions"
        case DownloadState.removing.rawValue: "; `stowage cancel \(asset)` finishes removing it"
        case DownloadState.failed.rawValue: "; `stowage resume \(asset)` tries again, `stowage cancel \(asset)` removes it"
        case DownloadState.paused.rawValue: "; `stowage resume \(asset)` continues it"
        default: ""
        }
    }

    static func megabytes(_ bytes: Int64) -> String {
        String(format: "%.1f MB", Double(bytes) / 1_000_000)
    }
}

extension DownloadError: StowageError {
    public var message: String { description }
    public var subject: ErrorSubject {
        switch self {
        case .segmentFailed(let path, let url, _), .segmentHTTPStatus(let path, let url, _), .segmentTooLarge(let path, let url, _):
            ErrorSubject(path: path, url: url)
        case .livePlaylist(let url), .noVariant(let url), .tooManySegments(let url, _): ErrorSubject(url: url)
        case .unsupportedURI(let uri): ErrorSubject(url: uri)
        case .notFound(let asset), .alreadyExists(let asset, _), .invalidState(let asset, _, _): ErrorSubject(assetId: asset)
        case .playlist(_, _, let subject), .keys(_, _, let subject), .package(_, _, let subject): subject
        default: ErrorSubject()
        }
    }
}
