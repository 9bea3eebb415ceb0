import Foundation

/// The JSON form of a ``StowageError``, the same wherever one crosses a boundary: `stowage ... --json`, the download
/// service's socket, and back into an error on the other side (``ReportedError``).
///
/// ```json
/// {"error":{"assetId":"movie-1","code":"asset_busy","message":"asset movie-1 is in use by ..."}}
/// ```
public struct ErrorDocument: Codable, Sendable, Hashable {
    public struct Body: Codable, Sendable, Hashable {
        public var code: String
        public var message: String
        public var assetId: String?
        public var leaseId: String?
        public var keyId: String?
        public var path: String?
        public var url: String?

        public init(
            code: String,
            message: String,
            assetId: String? = nil,
            leaseId: String? = nil,
            keyId: String? = nil,
            path: String? = nil,
            url: String? = nil
        ) {
            self.code = code
            self.message = message
            self.assetId = assetId
            self.leaseId = leaseId
            self.keyId = keyId
            self.path = path
            self.url = url
        }
    }

    public var error: Body

    public init(_ error: any StowageError) {
        let subject = error.subject
        self.error = Body(
            code: error.code.rawValue,
            message: error.message,
            assetId: subject.assetId,
            leaseId: subject.leaseId,
            keyId: subject.keyId,
            path: subject.path,
            url: subject.url
        )
    }

    /// One line of JSON, keys sorted, members that do not apply left out.
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? #"{"error":{}}"#
    }

    /// The error the document describes, to throw on this side (`internal_error` for a code this version does not
    /// know, the message kept).
    public var reported: ReportedError {
        ReportedError(
            code: ErrorCode(error.code, fallback: .internalError),
            message: error.message,
            subject: ErrorSubject(assetId: error.assetId, leaseId: error.leaseId, keyId: error.keyId, path: error.path, url: error.url)
        )
    }
}

/// An error raised elsewhere (another process: the download service) and reported here with its code, message and
/// subject unchanged.
public struct ReportedError: StowageError, Hashable {
    public let code: ErrorCode
    public let message: String
    public let subject: ErrorSubject

    public init(code: ErrorCode, message: String, subject: ErrorSubject = ErrorSubject()) {
        self.code = code
        self.message = message
        self.subject = subject
    }

    public var description: String { "\(code): \(message)" }
}
