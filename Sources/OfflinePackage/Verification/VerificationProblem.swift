public import KeyDelivery

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
    /// The kind of problem. The raw values are the stable codes.
    public enum Code: RawRepresentable, Codable, Sendable, Hashable, CaseIterable {
        /// The manifest cannot be read, is not the schema, names a path outside the package, or contradicts itself
        /// (a file naming a key the manifest does not list, a complete rendition with a file of unknown size).
        case manifestInvalid
        /// A rendition is not completely downloaded.
        case packageIncomplete
        /// A file the manifest lists is not in the package (or is not a regular file).
        case fileMissing
        /// A file is smaller than the manifest says.
        case fileTruncated
        /// A file is larger than the manifest says.
        case fileSizeMismatch
        /// A file's SHA-256 differs from the manifest's (deep verification), or the file was replaced by a link
        /// leading out of the package.
        case fileModified
        /// A file exists but cannot be read (permissions, I/O error).
        case fileUnreadable
        /// No key is held for a key ID the package uses: no lease holds it, or no identity key is stored.
        case keyMissing
        /// An identity key's local lifetime is over.
        case keyExpired
        /// A stored key cannot be opened (the store's row was altered, or the store belongs to another machine).
        case keyUnusable
        /// The lease refuses playback, with its own reason and code (`storage_window_expired`,
        /// `clock_rollback_detected`, `no_lease`, ...): those codes are declared once, by ``LeaseError/Reason``.
        case lease(LeaseError.Reason)
        /// Valid now, but not for the whole duration asked for with `--for`, counting the playback window.
        case leaseNotLongEnough
        /// Trial decryption failed: wrong padding (wrong key or IV, damaged file), ciphertext not a whole number of
        /// blocks, a key ID in the init section other than the manifest's, a stream Stowage cannot decrypt.
        case decryptionFailed
        /// The decrypted data is not valid MPEG-TS or fragmented MP4.
        case invalidMedia
        /// A warning, never a problem: a live recording misses segments that left the playlist before they were
        /// fetched (marked EXT-X-GAP; players skip them).
        case recordingGap

        /// Every code, the lease's included.
        public static var allCases: [Code] {
            [
                .manifestInvalid, .packageIncomplete, .fileMissing, .fileTruncated, .fileSizeMismatch, .fileModified, .fileUnreadable, .keyMissing,
                .keyExpired, .keyUnusable, .leaseNotLongEnough, .decryptionFailed, .invalidMedia, .recordingGap,
            ] + LeaseError.Reason.allCases.filter { $0 != .expiresTooSoon }.map(Code.lease)
        }

        /// The code read from its snake_case form (JSON).
        public init?(rawValue: String) {
            guard let code = Self.allCases.first(where: { $0.rawValue == rawValue }) else { return nil }
            self = code
        }

        /// The stable snake_case code.
        public var rawValue: String {
            switch self {
            case .lease(let reason): reason.rawValue
            case .manifestInvalid: "manifest_invalid"
            case .packageIncomplete: "package_incomplete"
            case .fileMissing: "file_missing"
            case .fileTruncated: "file_truncated"
            case .fileSizeMismatch: "file_size_mismatch"
            case .fileModified: "file_modified"
            case .fileUnreadable: "file_unreadable"
            case .keyMissing: "key_missing"
            case .keyExpired: "key_expired"
            case .keyUnusable: "key_unusable"
            case .leaseNotLongEnough: "lease_not_long_enough"
            case .decryptionFailed: "decryption_failed"
            case .invalidMedia: "invalid_media"
            case .recordingGap: "recording_gap"
            }
        }
    }

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
    public var cause: String?
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
        cause: String? = nil,
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
    public var isLeaseProblem: Bool {
        if case .lease = code { return true }
        return code == .leaseNotLongEnough
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }

    /// The problem a lease refusal means: the ``LeaseError`` reason and code, except that `expires_too_soon` (from
    /// `verify --for`) reads `lease_not_long_enough`.
    public init(leaseError error: LeaseError) {
        let code: Code = error.reason == .expiresTooSoon ? .leaseNotLongEnough : .lease(error.reason)
        self.init(code, message: error.message, leaseId: error.leaseId, cause: error.code)
    }
}
