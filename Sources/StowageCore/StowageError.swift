/// The one shape of every error a Stowage user can meet: a stable snake_case ``code`` that tools and tests match on,
/// a ``message`` that says what happened, to what, and what to do (in human units: dates and durations, never Unix
/// seconds), and the ``subject`` it concerns.
///
/// Every module's errors adopt it (after Hummingbird's `HTTPResponseError`: one protocol, many concrete types), so the
/// command-line tool has one renderer for the terminal and one JSON form, identical across commands:
///
/// ```json
/// {"error": {"code": "lease_tampered", "message": "The lease ... Renew it while online ...", "assetId": "movie-1"}}
/// ```
public protocol StowageError: Error, Sendable, CustomStringConvertible {
    /// The stable code, e.g. `playback_window_expired`: one of the catalogue's (``ErrorCode``).
    var code: ErrorCode { get }
    /// What happened, to what, and what to do; never raw library descriptions, never key material.
    var message: String { get }
    /// The asset, lease, key, file or URL the error concerns, where known.
    var subject: ErrorSubject { get }
}

extension StowageError {
    public var subject: ErrorSubject { ErrorSubject() }
}

/// What a ``StowageError`` concerns. Members are nil when they do not apply.
public struct ErrorSubject: Sendable, Hashable, Codable {
    public var assetId: String?
    public var leaseId: String?
    public var keyId: String?
    /// A file of a package (`video/00001.ts`) or of the file system.
    public var path: String?
    /// A URL (a playlist, a segment, a key server).
    public var url: String?

    public init(assetId: String? = nil, leaseId: String? = nil, keyId: String? = nil, path: String? = nil, url: String? = nil) {
        self.assetId = assetId
        self.leaseId = leaseId
        self.keyId = keyId
        self.path = path
        self.url = url
    }

    /// Whether every member is nil.
    public var isEmpty: Bool { self == ErrorSubject() }
}
