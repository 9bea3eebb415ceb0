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
    public enum Code: String, Codable, Sendable, Hashable, CaseIterable {
        /// The manifest cannot be read, is not the schema, names a path outside the package, or contradicts itself
        /// (a file naming a key the manifest does not list, a complete rendition with a file of unknown size).
        case manifestInvalid = "manifest_invalid"
        /// A rendition is not completely downloaded.
        case packageIncomplete = "package_incomplete"
        /// A file the manifest lists is not in the package (or is not a regular file).
        case fileMissing = "file_missing"
        /// A file is smaller than the manifest says.
        case fileTruncated = "file_truncated"
        /// A file is larger than the manifest says.
        case fileSizeMismatch = "file_size_mismatch"
        /// A file's SHA-256 differs from the manifest's (deep verification), or the file was replaced by a link
        /// leading out of the package.
        case fileModified = "file_modified"
        /// A file exists but cannot be read (permissions, I/O error).
        case fileUnreadable = "file_unreadable"
        /// No key is held for a key ID the package uses: no lease holds it, or no identity key is stored.
        case keyMissing = "key_missing"
        /// An identity key's local lifetime is over.
        case keyExpired = "key_expired"
        /// A stored key cannot be opened (the store's row was altered, or the store belongs to another machine).
        case keyUnusable = "key_unusable"
        /// The lease ended and its key material was erased (``LeaseError/Reason/leaseExpired``).
        case leaseExpired = "lease_expired"
        /// The lease's storage window has closed.
        case storageWindowExpired = "storage_window_expired"
        /// The lease's playback window has closed (or is empty).
        case playbackWindowExpired = "playback_window_expired"
        /// The clock was set back (the time high-water mark).
        case clockRollbackDetected = "clock_rollback_detected"
        /// The lease is not valid yet (issued in the future by more than the leeway).
        case notYetValid = "not_yet_valid"
        /// The lease was released to the server.
        case released = "released"
        /// The lease was returned on this device.
        case returned = "returned"
        /// No lease on this device covers the asset.
        case noLease = "no_lease"
        /// The stored lease was altered outside Stowage (its row disagrees with the signed payload or its code).
        case leaseTampered = "lease_tampered"
        /// Valid now, but not for the whole duration asked for with `--for`, counting the playback window.
        case leaseNotLongEnough = "lease_not_long_enough"
        /// Trial decryption failed: wrong padding (wrong key or IV, damaged file), ciphertext not a whole number of
        /// blocks, a key ID in the init section other than the manifest's, a stream Stowage cannot decrypt.
        case decryptionFailed = "decryption_failed"
        /// The decrypted data is not valid MPEG-TS or fragmented MP4.
        case invalidMedia = "invalid_media"
        /// A warning, never a problem: a live recording misses segments that left the playlist before they were
        /// fetched (marked EXT-X-GAP; players skip them).
        case recordingGap = "recording_gap"
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

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }

    /// The problem a lease refusal means: the ``LeaseError`` code, except that `expires_too_soon` (from
    /// `verify --for`) reads `lease_not_long_enough`.
    public init(leaseError error: LeaseError) {
        let code: Code =
            switch error.reason {
            case .leaseExpired: .leaseExpired
            case .playbackWindowExpired: .playbackWindowExpired
            case .storageWindowExpired: .storageWindowExpired
            case .clockRollbackDetected: .clockRollbackDetected
            case .notYetValid: .notYetValid
            case .released: .released
            case .returned: .returned
            case .noLease: .noLease
            case .leaseTampered: .leaseTampered
            case .expiresTooSoon: .leaseNotLongEnough
            // Not an evaluation's answer; an ended lease is the nearest meaning.
            case .invalidTransition: .leaseExpired
            }
        self.init(code, message: error.message, leaseId: error.leaseId, cause: error.code)
    }
}
