import Foundation
public import KeyDelivery
public import StowageCore

/// The offline packages in a data directory, as `stowage list` shows them: `packages/*/manifest.json`, each with its
/// real size on disk, its renditions and its lease.
///
/// A package whose manifest cannot be read is listed with ``PackageCatalogEntry/problem`` set, not thrown, so one
/// damaged package never hides the others. Folders whose names are not asset IDs (a `.deleting-*` folder left by an
/// interrupted ``PackageDeletion``, say) are not packages and are skipped.
///
/// ```swift
/// let catalog = PackageCatalog(dataDirectory: .fromEnvironment(), store: store)
/// for entry in try catalog.entries(at: clock.now) {
///     print(entry.assetId, entry.state, entry.sizeOnDisk, entry.lease?.timeLeft ?? 0)
/// }
/// ```
public struct PackageCatalog: Sendable {
    /// Where the packages are.
    public let dataDirectory: DataDirectory
    /// Where their leases are.
    public let store: KeyStore

    /// A catalog of the packages in `dataDirectory`.
    public init(dataDirectory: DataDirectory, store: KeyStore) {
        self.dataDirectory = dataDirectory
        self.store = store
    }

    /// Every package, ordered by asset ID.
    ///
    /// Evaluating a lease records the local time in the key store like every lease operation (so a clock set back
    /// shows as `clock_rollback_detected`); nothing else is changed, and a playback window that has not started stays
    /// not started.
    ///
    /// - Throws: the key store's storage failures (``KeyStoreError`` `database_failure`); a `packages` folder that
    ///   cannot be listed. A missing `packages` folder is an empty catalog.
    public func entries(at now: Int64) throws -> [PackageCatalogEntry] {
        let manager = FileManager.default
        guard manager.fileExists(atPath: dataDirectory.packagesURL.path) else { return [] }
        let names = try manager.contentsOfDirectory(atPath: dataDirectory.packagesURL.path)
        var entries: [PackageCatalogEntry] = []
        for name in names.sorted() where PackageDirectory.isValidAssetID(name) {
            guard let package = try? PackageDirectory(assetId: name, in: dataDirectory) else { continue }
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: package.url.path, isDirectory: &isDirectory), isDirectory.boolValue else { continue }
            entries.append(try entry(for: package, at: now))
        }
        return entries
    }

    /// The entry of one package.
    ///
    /// - Throws: ``PackageError/notFound(_:)`` when there is no package folder for the asset; the key store's
    ///   storage failures.
    public func entry(assetId: String, at now: Int64) throws -> PackageCatalogEntry {
        let package = try PackageDirectory(assetId: assetId, in: dataDirectory)
        guard package.exists else { throw PackageError.notFound(assetId) }
        return try entry(for: package, at: now)
    }

    private func entry(for package: PackageDirectory, at now: Int64) throws -> PackageCatalogEntry {
        let size = package.sizeOnDisk()
        let manifest: PackageManifest
        do {
            manifest = try package.readManifest()
        } catch {
            let problem =
                switch error {
                case .notFound:
                    PackageCatalogEntry.Problem(
                        code: ErrorCode.manifestMissing.rawValue,
                        message: "the package folder of asset \(package.assetId) has no \(PackageManifest.fileName); delete the asset"
                    )
                default: PackageCatalogEntry.Problem(code: error.code.rawValue, message: error.description)
                }
            return PackageCatalogEntry(
                assetId: package.assetId,
                title: nil,
                state: .unreadable,
                sizeOnDisk: size,
                expectedBytes: nil,
                renditions: [],
                lease: nil,
                problem: problem
            )
        }
        let lease =
            manifest.keys.contains { $0.kind == .skd }
            ? PackageLeaseSummary(
                try store.evaluate(assetId: manifest.assetId, keyIds: manifest.keys.filter { $0.kind == .skd }.map(\.keyId), at: now)
            ) : nil
        return PackageCatalogEntry(
            assetId: manifest.assetId,
            title: manifest.title,
            state: manifest.isComplete ? .complete : .incomplete,
            sizeOnDisk: size,
            expectedBytes: manifest.renditions.reduce(0) { $0 + $1.expectedBytes },
            renditions: manifest.renditions.map(PackageCatalogEntry.Rendition.init),
            lease: lease,
            problem: nil
        )
    }
}

/// One package as `stowage list` shows it.
///
/// JSON (`stowage list --json` prints an array of these):
///
/// ```json
/// {"assetId": "movie-1", "title": "Movie", "state": "complete", "sizeOnDisk": 1236992, "expectedBytes": 1200000,
///  "renditionsComplete": 2, "renditionsTotal": 2,
///  "renditions": [{"id": "video", "kind": "video", "name": "video", "isComplete": true}],
///  "lease": {"state": "persisted", "isValid": true, "timeLeft": 2592000, "playbackStarted": false, "...": "..."}}
/// ```
///
/// An unreadable package has `"state": "unreadable"` and `"problem": {"code": "invalid_manifest", "message": "..."}`.
public struct PackageCatalogEntry: Codable, Sendable, Hashable {
    /// Where a package stands.
    public enum State: String, Codable, Sendable, Hashable {
        /// Every rendition is downloaded.
        case complete
        /// Some rendition is still being downloaded (or was stopped).
        case incomplete
        /// The manifest cannot be read; see ``PackageCatalogEntry/problem``.
        case unreadable
    }

    /// A media selection of the package.
    public struct Rendition: Codable, Sendable, Hashable {
        /// `video`, `audio-en`...
        public var id: String
        /// `video`, `audio` or `subtitles`.
        public var kind: String
        /// The NAME of the selection.
        public var name: String
        /// Its LANGUAGE, if any.
        public var language: String?
        /// Whether it is completely downloaded.
        public var isComplete: Bool

        /// The listing of a manifest rendition.
        public init(_ rendition: PackageRendition) {
            self.id = rendition.id
            self.kind = rendition.kind.rawValue
            self.name = rendition.name
            self.language = rendition.language
            self.isComplete = rendition.isComplete
        }
    }

    /// Why a package could not be read: a stable code (`manifest_missing`, or a ``PackageError`` code such as
    /// `invalid_manifest`) and what happened and what to do, in the one JSON form of an error.
    public typealias Problem = ErrorDocument.Body

    /// The asset.
    public var assetId: String
    /// Its title, from the manifest.
    public var title: String?
    /// Complete, incomplete or unreadable.
    public var state: State
    /// Bytes the package folder takes on disk (allocated blocks of every file in it).
    public var sizeOnDisk: Int64
    /// Bytes the package will take when complete, as far as known (``PackageRendition/expectedBytes``).
    public var expectedBytes: Int64?
    /// Its media selections, in manifest order.
    public var renditions: [Rendition]
    /// The lease, for packages whose keys come under a lease; nil for identity-key and clear packages, and when
    /// the manifest cannot be read.
    public var lease: PackageLeaseSummary?
    /// Why the package cannot be read; nil when it can.
    public var problem: Problem?

    /// An entry.
    public init(
        assetId: String,
        title: String?,
        state: State,
        sizeOnDisk: Int64,
        expectedBytes: Int64?,
        renditions: [Rendition],
        lease: PackageLeaseSummary?,
        problem: Problem?
    ) {
        self.assetId = assetId
        self.title = title
        self.state = state
        self.sizeOnDisk = sizeOnDisk
        self.expectedBytes = expectedBytes
        self.renditions = renditions
        self.lease = lease
        self.problem = problem
    }

    /// How many renditions are completely downloaded.
    public var renditionsComplete: Int { renditions.filter(\.isComplete).count }

    /// How many renditions the package has.
    public var renditionsTotal: Int { renditions.count }

    private enum CodingKeys: String, CodingKey {
        case assetId, title, state, sizeOnDisk, expectedBytes, renditionsComplete, renditionsTotal, renditions, lease, problem
    }

    /// Decodes an entry (the counts are derived, so they are not read back).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.assetId = try container.decode(String.self, forKey: .assetId)
        self.title = try container.decodeIfPresent(String.self, forKey: .title)
        self.state = try container.decode(State.self, forKey: .state)
        self.sizeOnDisk = try container.decode(Int64.self, forKey: .sizeOnDisk)
        self.expectedBytes = try container.decodeIfPresent(Int64.self, forKey: .expectedBytes)
        self.renditions = try container.decode([Rendition].self, forKey: .renditions)
        self.lease = try container.decodeIfPresent(PackageLeaseSummary.self, forKey: .lease)
        self.problem = try container.decodeIfPresent(Problem.self, forKey: .problem)
    }

    /// Encodes the entry with its rendition counts.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(assetId, forKey: .assetId)
        try container.encodeIfPresent(title, forKey: .title)
        try container.encode(state, forKey: .state)
        try container.encode(sizeOnDisk, forKey: .sizeOnDisk)
        try container.encodeIfPresent(expectedBytes, forKey: .expectedBytes)
        try container.encode(renditionsComplete, forKey: .renditionsComplete)
        try container.encode(renditionsTotal, forKey: .renditionsTotal)
        try container.encode(renditions, forKey: .renditions)
        try container.encodeIfPresent(lease, forKey: .lease)
        try container.encodeIfPresent(problem, forKey: .problem)
    }
}
