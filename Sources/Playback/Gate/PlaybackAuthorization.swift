public import KeyDelivery
import MediaCrypto
public import OfflinePackage
import StowageCrypto

/// What ``PlaybackGate/authorize(assetId:)`` grants: the package as checked, its content keys (in memory only) and
/// the lease evaluation that allowed playback. A ``PlaybackServer`` serves exactly this.
public struct PlaybackAuthorization: Sendable {
    /// The package folder.
    public let package: PackageDirectory
    /// The manifest as read and checked.
    public let manifest: PackageManifest
    /// The lease evaluation that allowed playback (first play recorded); nil for a package whose keys are all identity
    /// keys, which need no lease.
    public let lease: LeaseEvaluation?
    /// What the key store requires of this asset (from its authenticated records and the manifest), checked again on
    /// every request.
    public let requirement: LeaseRequirement
    /// When playback was authorized (the gate's clock).
    public let authorizedAt: Int64

    /// The asset played.
    public var assetId: String { manifest.assetId }

    /// Content keys by key ID; never written anywhere.
    let keys: [String: SecretBytes]
    /// Every file of the manifest (and of the online renditions) by its relative path.
    let files: [String: FileRole]
    /// Every local media playlist by its relative path, with its rendition's index in ``renditions``.
    let playlists: [String: Int]
    /// The package's renditions, then the online ones.
    let renditions: [PackageRendition]
    /// What the source offers beyond the package, served beside it; nil offline.
    public let online: OnlineRenditions?
    /// The download still bringing files, for a package authorized before it was complete.
    let download: (any DownloadInProgress)?

    /// Whether the package was incomplete when authorized (it plays while it downloads).
    public var isDownloading: Bool { download != nil }

    init(
        package: PackageDirectory,
        manifest: PackageManifest,
        lease: LeaseEvaluation?,
        requirement: LeaseRequirement,
        authorizedAt: Int64,
        keys: [String: SecretBytes],
        download: (any DownloadInProgress)? = nil,
        online: OnlineRenditions? = nil
    ) {
        self.online = online
        self.requirement = requirement
        self.download = manifest.isComplete && manifest.files.allSatisfy { $0.sha256 != nil } ? nil : download
        self.package = package
        self.manifest = manifest
        self.lease = lease
        self.authorizedAt = authorizedAt
        self.keys = keys
        var files: [String: FileRole] = [:]
        var playlists: [String: Int] = [:]
        let renditions = manifest.renditions + (online?.plan.renditions ?? [])
        let storedCount = manifest.renditions.count
        for (renditionIndex, rendition) in renditions.enumerated() {
            let isOnline = renditionIndex >= storedCount
            playlists[rendition.playlist] = renditionIndex
            for (initIndex, section) in rendition.initSections.enumerated() {
                // An init section is made clear (cbcs) when the segments that use it are sample-encrypted.
                let sampleEncrypted = rendition.segments.contains {
                    $0.initSection == initIndex && SegmentEncryptionMethod(name: $0.file?.key?.method ?? "")?.isSampleEncryption == true
                }
                files[section.path] = FileRole(
                    file: section,
                    renditionIndex: renditionIndex,
                    kind: .initSection(sampleEncryptedSegments: sampleEncrypted),
                    isOnline: isOnline
                )
            }
            for (segmentIndex, segment) in rendition.segments.enumerated() {
                guard let file = segment.file else { continue }
                files[file.path] = FileRole(
                    file: file,
                    renditionIndex: renditionIndex,
                    kind: .segment(initSection: segment.initSection),
                    isOnline: isOnline,
                    segmentIndex: segmentIndex
                )
            }
        }
        self.files = files
        self.playlists = playlists
        self.renditions = renditions
    }

    /// This authorization with `online` served beside the package (its multivariant playlist in place of the
    /// package's), when the source is reachable. Online renditions whose paths the package already uses are left out.
    public func addingOnline(_ online: OnlineRenditions) -> PlaybackAuthorization {
        var online = online
        let taken = Set(manifest.renditions.flatMap { [$0.playlist] + $0.files.map(\.path) })
        online.plan.renditions.removeAll { rendition in
            ([rendition.playlist] + rendition.files.map(\.path)).contains(where: taken.contains)
        }
        guard !online.plan.renditions.isEmpty else { return self }
        return PlaybackAuthorization(
            package: package,
            manifest: manifest,
            lease: lease,
            requirement: requirement,
            authorizedAt: authorizedAt,
            keys: keys,
            download: download,
            online: online
        )
    }

    /// The package's key with `keyId`, or an online rendition's.
    func packageKey(_ keyId: String) -> PackageKey? {
        manifest.key(id: keyId) ?? online?.plan.keys.first { $0.keyId == keyId }
    }

    /// Whether playback needs a lease (``LeaseRequirement/needsLease``).
    public var needsLease: Bool { requirement.needsLease }

    /// The key IDs whose content keys this authorization holds (in memory).
    public var heldKeyIds: Set<String> { Set(keys.keys) }
}

/// What a file of the package is to the server.
struct FileRole: Sendable {
    enum Kind: Sendable {
        /// An init section; `sampleEncryptedSegments` when its segments use SAMPLE-AES (so it is a cbcs init section).
        case initSection(sampleEncryptedSegments: Bool)
        /// A media segment and the index of its init section in the rendition, if any.
        case segment(initSection: Int?)
    }

    var file: PackageFile
    var renditionIndex: Int
    var kind: Kind
    /// A file of an online rendition: fetched from the source, never on disk.
    var isOnline = false
    /// A segment's position in its rendition's `segments`.
    var segmentIndex: Int?
}
