public import KeyDelivery
public import StowageCore

/// One thing that keeps a package from playing offline, found by ``PackageVerifier``.
///
/// Each problem has a stable snake_case ``code`` (the JSON and CLI form), names what it concerns (rendition, file,
/// key, lease) and carries a message that says what happened and what to do.
///
/// JSON (`stowage verify --json`), fields absent when they do not apply:
///
/// ```json
/// {"code": "file_truncated", "message": "...", "rendition": "video", "path": "video/00003.ts",
///  "expectedSize": 33472, "actualSize": 1000}
/// ```
public struct VerificationProblem: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem: a file (`file_missing`, `file_truncated`, `file_modified`...), a key (`key_missing`,
    /// `key_expired`, `key_unusable`), the lease (its own codes, ``KeyDelivery/LeaseError/reasons``, and
    /// `lease_not_long_enough`), trial decryption (`decryption_failed`, `invalid_media`), the manifest
    /// (`manifest_invalid`, `package_incomplete`), or the warning `recording_gap`.
    public typealias Code = ErrorCode

    /// What kind of problem this is.
    public var code: Code
    /// What happened, to what, and what to do.
    public var message: String
    /// The rendition concerned (`video`, `audio-en`...), when there is one.
    public var rendition: String?
    /// The file concerned, relative to the package directory.
    public var path: String?
    /// The key ID concerned.
    public var keyId: String?
    /// The lease concerned.
    public var leaseId: String?
    /// The code of the underlying error, when it adds something: `bad_padding`, `malformed_container`,
    /// `identity_key_damaged`...
    public var cause: ErrorCode?
    /// The size the manifest gives, for size problems.
    public var expectedSize: Int64?
    /// The size found on disk, for size problems.
    public var actualSize: Int64?

    /// A problem.
    public init(
        _ code: Code,
        message: String,
        rendition: String? = nil,
        path: String? = nil,
        keyId: String? = nil,
        leaseId: String? = nil,
        cause: ErrorCode? = nil,
        expectedSize: Int64? = nil,
        actualSize: Int64? = nil
    ) {
        self.code = code
        self.message = message
        self.rendition = rendition
        self.path = path
        self.keyId = keyId
        self.leaseId = leaseId
        self.cause = cause
        self.expectedSize = expectedSize
        self.actualSize = actualSize
    }

    /// Whether the lease refuses playback (rather than a file or key of the package).
    public var isLeaseProblem: Bool { code == .leaseNotLongEnough || LeaseError.reasons.contains(code) }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }

    /// The problem a lease refusal means: the ``LeaseError`` reason and code, except that `expires_too_soon` (from
    /// `verify --for`) reads `lease_not_long_enough`.
    public init(leaseError error: LeaseError) {
        let code: Code = error.reason == .expiresTooSoon ? .leaseNotLongEnough : error.reason
        self.init(code, message: error.message, leaseId: error.leaseId, cause: error.code)
    }
}
