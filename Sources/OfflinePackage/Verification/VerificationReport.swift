/// What `stowage verify ASSET` found: per rendition, per key, the lease, and every problem by its stable code.
///
/// The package is playable offline (``isPlayable``, exit status 0) when no problem was found; any problem makes
/// it unplayable (exit status 1). Failures to verify at all (no such package, an unreadable key store) are thrown
/// instead (exit status 2).
///
/// JSON (`--json`), with the field names below; absent optional fields are left out:
///
/// ```json
/// {
///   "assetId": "movie-1", "title": "Movie", "depth": "quick", "verifiedAt": 1763700000,
///   "requiredDuration": 172800, "isPlayable": false, "isComplete": true,
///   "lease": {"leaseId": "...", "state": "persisted", "isValid": true, "timeLeft": 2592000, "...": "..."},
///   "keys": [{"keyId": "0123...", "kind": "skd", "isAvailable": true}],
///   "renditions": [
///     {"id": "video", "kind": "video", "name": "video", "isComplete": true, "isPlayable": false,
///      "files": 4, "bytes": 123456, "filesHashed": 0, "filesDecrypted": 2, "problems": 1}
///   ],
///   "problems": [
///     {"code": "file_truncated", "message": "...", "rendition": "video", "path": "video/00002.ts",
///      "expectedSize": 33472, "actualSize": 1000}
///   ]
/// }
/// ```
public struct VerificationReport: Codable, Sendable, Hashable {
    /// How thoroughly the files were checked.
    public enum Depth: String, Codable, Sendable, Hashable {
        /// Sizes of every file; trial decryption of the first and last segment of each rendition.
        case quick
        /// Sizes and SHA-256 of every file; trial decryption of every segment.
        case deep
    }

    /// A key the package uses and whether this device holds it now.
    public struct KeyStatus: Codable, Sendable, Hashable {
        /// 32 lowercase hex digits.
        public var keyId: String
        /// `skd` (under a lease) or `identity`.
        public var kind: String
        /// Whether the key was found and opened.
        public var isAvailable: Bool

        /// A key's status.
        public init(keyId: String, kind: String, isAvailable: Bool) {
            self.keyId = keyId
            self.kind = kind
            self.isAvailable = isAvailable
        }
    }

    /// One media selection's result.
    public struct RenditionResult: Codable, Sendable, Hashable {
        /// The rendition's ID and folder (`video`, `audio-en`...).
        public var id: String
        /// `video`, `audio` or `subtitles`.
        public var kind: String
        /// The rendition's NAME.
        public var name: String
        /// Its LANGUAGE, if any.
        public var language: String?
        /// Whether the manifest says it is completely downloaded.
        public var isComplete: Bool
        /// Whether it plays offline: complete, every file intact, its keys held, the lease valid, trial decryption
        /// clean.
        public var isPlayable: Bool
        /// The files it has (init sections and segments).
        public var files: Int
        /// Their total size as the manifest gives it.
        public var bytes: Int64
        /// Files whose SHA-256 was computed (deep).
        public var filesHashed: Int
        /// Files trial-decrypted and validated.
        public var filesDecrypted: Int
        /// How many of the report's ``VerificationReport/problems`` concern this rendition.
        public var problems: Int

        /// A rendition's result.
        public init(
            id: String,
            kind: String,
            name: String,
            language: String?,
            isComplete: Bool,
            isPlayable: Bool,
            files: Int,
            bytes: Int64,
            filesHashed: Int,
            filesDecrypted: Int,
            problems: Int
        ) {
            self.id = id
            self.kind = kind
            self.name = name
            self.language = language
            self.isComplete = isComplete
            self.isPlayable = isPlayable
            self.files = files
            self.bytes = bytes
            self.filesHashed = filesHashed
            self.filesDecrypted = filesDecrypted
            self.problems = problems
        }
    }

    /// The asset verified.
    public var assetId: String
    /// Its title, from the manifest.
    public var title: String?
    /// Quick or deep.
    public var depth: Depth
    /// When the verification ran (seconds since the Unix epoch, from the injected clock).
    public var verifiedAt: Int64
    /// With `--for`: the seconds the package must stay playable.
    public var requiredDuration: Int64?
    /// Whether the package plays offline: no problem was found.
    public var isPlayable: Bool
    /// Whether the manifest says every rendition is complete.
    public var isComplete: Bool
    /// The lease, for packages whose keys come under a lease (skd); nil for identity-key and clear packages.
    public var lease: PackageLeaseSummary?
    /// Every key the manifest lists.
    public var keys: [KeyStatus]
    /// Each rendition, in manifest order.
    public var renditions: [RenditionResult]
    /// Every problem found: package-level ones (manifest, keys, lease) first, then by rendition and file.
    public var problems: [VerificationProblem]
    /// What does not stop the package from playing but the user should know (`recording_gap`); nil when none.
    public var warnings: [VerificationProblem]?

    /// A report.
    public init(
        assetId: String,
        title: String?,
        depth: Depth,
        verifiedAt: Int64,
        requiredDuration: Int64?,
        isComplete: Bool,
        lease: PackageLeaseSummary?,
        keys: [KeyStatus],
        renditions: [RenditionResult],
        problems: [VerificationProblem],
        warnings: [VerificationProblem] = []
    ) {
        self.warnings = warnings.isEmpty ? nil : warnings
        self.assetId = assetId
        self.title = title
        self.depth = depth
        self.verifiedAt = verifiedAt
        self.requiredDuration = requiredDuration
        self.isPlayable = problems.isEmpty
        self.isComplete = isComplete
        self.lease = lease
        self.keys = keys
        self.renditions = renditions
        self.problems = problems
    }

    /// The exit status `stowage verify` ends with: 0 when playable, 1 when not (2, for errors, is the caller's).
    public var exitStatus: Int32 { isPlayable ? 0 : 1 }

    /// The distinct problem codes, in the order first found.
    public var problemCodes: [VerificationProblem.Code] {
        var seen: Set<VerificationProblem.Code> = []
        return problems.map(\.code).filter { seen.insert($0).inserted }
    }

    /// The problems concerning one rendition.
    public func problems(inRendition id: String) -> [VerificationProblem] {
        problems.filter { $0.rendition == id }
    }
}
