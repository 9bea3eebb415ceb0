public import KeyDelivery
public import OfflinePackage
import StowageCore
import StowageCrypto

/// Decides whether an offline package may play now: the `stowage play` gate (docs/design.md, data flow 3).
///
/// ``authorize(assetId:)`` checks, in this order, and stops at the first refusal:
/// 1. the package: its manifest reads, every rendition is complete with sizes and checksums known
///    (``PackageCompletenessRule``), every file is on disk with the manifest's size (``PackageFilesRule``; with
///    ``FileCheck/checksums`` also its SHA-256);
/// 2. the lease, when the package has skd keys: evaluated as things stand (storage and playback windows, clock
///    rollback), so a refusal records nothing;
/// 3. the keys: every key the manifest lists is held (``PackageKeyring``);
/// 4. the lease again through `KeyStore.authorizePlayback(assetId:keyIds:at:)`, which records the first play and so starts
///    the playback window. Identity-only packages have no lease: their sealed keys (and local lifetimes) are all.
///
/// Why sizes by default: hashing a whole package costs as much as reading it, so the gate checks sizes and the server
/// hashes every file while it streams it, refusing to finish a file whose SHA-256 differs from the manifest (see
/// ``PlaybackServer``). ``FileCheck/checksums`` hashes everything up front, for small packages or a careful user.
///
/// ```swift
/// let gate = PlaybackGate(dataDirectory: .fromEnvironment(), store: store, device: device)
/// let authorization = try gate.authorize(assetId: "movie-1")
/// ```
public struct PlaybackGate: Sendable {
    /// How far the gate checks the files before playback starts.
    public enum FileCheck: Sendable, Hashable {
        /// Every file present with the manifest's size (the server verifies checksums while streaming).
        case sizes
        /// Sizes, then the SHA-256 of every file.
        case checksums
    }

    /// The data directory holding `packages/`.
    public let dataDirectory: DataDirectory
    /// Reads the package's keys from the key store.
    public let keyring: PackageKeyring
    /// The clock lease rules are evaluated against (``SystemClock`` in use, ``TestClock`` in tests).
    public let clock: any Clock
    /// How far the files are checked.
    public var fileCheck: FileCheck

    /// The key store the lease and the keys are read from.
    public var store: KeyStore { keyring.store }

    /// - Parameters:
    ///   - dataDirectory: where the packages are.
    ///   - store: the device's key store.
    ///   - device: the device identity the leases were issued to.
    ///   - clock: the wall clock; injected so tests can move time.
    ///   - fileCheck: ``FileCheck/sizes`` by default.
    public init(
        dataDirectory: DataDirectory,
        store: KeyStore,
        device: DeviceIdentity,
        clock: any Clock = SystemClock(),
        fileCheck: FileCheck = .sizes
    ) {
        self.dataDirectory = dataDirectory
        self.keyring = PackageKeyring(store: store, device: device)
        self.clock = clock
        self.fileCheck = fileCheck
    }

    /// Authorizes playback of `assetId` now, recording the first play when it is the first.
    ///
    /// - Returns: the package, its keys and the lease evaluation, for ``PlaybackServer``.
    /// - Throws: ``PlaybackError``: `package_not_found`, `invalid_manifest`, `package_incomplete`, `segment_missing`,
    ///   `segment_modified`, `segment_checksum_mismatch`, a lease code (`storage_window_expired`,
    ///   `playback_window_expired`, `clock_rollback_detected`, `no_lease`, `returned`, ...), `key_missing`,
    ///   `key_store_unavailable`.
    public func authorize(assetId: String) throws(PlaybackError) -> PlaybackAuthorization {
        try authorize(assetId: assetId, download: nil)
    }

    /// Authorizes playback of `assetId`, which may still be downloading when `download` is given: then only the files
    /// that have landed are checked (sizes, and checksums with ``FileCheck/checksums``), and the rest are served as
    /// they arrive (``DownloadInProgress``). Every lease rule is the same as for a complete package, and the first
    /// play is recorded (it starts the playback window) like any play. The keys must be stored already (the download
    /// fetches them before any segment); until then this is `keys_pending`.
    ///
    /// - Throws: as ``authorize(assetId:)``; `package_incomplete` only without `download`.
    public func authorize(assetId: String, download: (any DownloadInProgress)?) throws(PlaybackError) -> PlaybackAuthorization {
        let (package, read) = try readPackage(assetId: assetId)
        var manifest = read
        if let download, (try? PackageCompletenessRule().check(manifest)) == nil {
            // What has landed gets the downloader's size and checksum; the rest is checked when it is asked for.
            guard !manifest.renditions.isEmpty else { throw .packageIncomplete(assetId: assetId, detail: "it has no rendition") }
            manifest = Self.filling(manifest, from: download)
            var landed = manifest
            for r in landed.renditions.indices {
                landed.renditions[r].initSections.removeAll { $0.sha256 == nil }
                for s in landed.renditions[r].segments.indices where landed.renditions[r].segments[s].file?.sha256 == nil {
                    landed.renditions[r].segments[s].file = nil
                }
            }
            try PackageFilesRule(checksums: fileCheck == .checksums).check(landed, in: package)
        } else {
            try PackageCompletenessRule().check(manifest)
            try PackageFilesRule(checksums: fileCheck == .checksums).check(manifest, in: package)
        }

        // Whether a lease is needed and which keys it must cover come from the key store's authenticated records as
        // well as the manifest: an asset that has had a lease here plays only under it, whatever its manifest says.
        let facts: AssetLeaseFacts
        do {
            facts = try store.leaseFacts(assetId: assetId)
        } catch {
            throw .keyStoreUnavailable(assetId: assetId, detail: (error as? any StowageError)?.message ?? "\(error)")
        }
        let requirement = LeaseRequirement(manifest: manifest, facts: facts)
        let needsLease = requirement.needsLease
        let now = clock.now
        let keys: [String: SecretBytes]
        var lease: LeaseEvaluation?
        var playing: Set<String>?
        do throws(PlaybackError) {
            if needsLease {
                // Evaluate first without recording anything: a package that cannot play must not start a playback window.
                let evaluation = try evaluate(requirement, assetId: assetId, at: now, recordingFirstPlay: false)
                try Self.require(evaluation, assetId: assetId)
                playing = Set(evaluation.playingLeaseIds)
            }
            do {
                // The keys of the leases that allow playback, and of no other lease.
                keys = try keyring.keys(for: manifest, fromLeases: playing, at: now)
            } catch {
                throw Self.mapKeyError(error, assetId: assetId)
            }
        } catch {
            // A download stores the keys before it fetches any file: with no file landed yet (`filling` gave the landed
            // ones their checksums), it has not got that far. Once a file has landed, a missing key is what it is (a
            // lease deleted by hand, say), not a wait.
            // A live recording fetches its first segments while it obtains their keys (the window leaves no time to
            // wait), so while it runs a missing key is still pending.
            let recordingRuns = manifest.recording.map { !$0.hasEnded } ?? false
            if let download, [.noLease, .keyMissing].contains(error.reason),
                !manifest.files.contains(where: { $0.sha256 != nil }) || (recordingRuns && download.isRunning())
            {
                throw .keysPending(assetId: assetId, downloadRunning: download.isRunning())
            }
            throw error
        }
        // Everything else allows playback: a process whose clock disagrees with the kernel's (a time shim preloaded into
        // it) is refused now, before a first play is recorded. The lease rules above read the kernel's clock, so a
        // lease that ended says so first.
        if let disagreement = KernelTime.disagreement() {
            throw .clockUntrustworthy(assetId: assetId, detail: disagreement)
        }
        if needsLease, let confinement = UserNamespace.confinement() {
            throw .confined(assetId: assetId, detail: confinement)
        }
        if needsLease {
            let granted = try evaluate(requirement, assetId: assetId, at: now, recordingFirstPlay: true)
            try Self.require(granted, assetId: assetId)
            // Another process changed the leases between the two looks: the keys taken may not be the granted ones.
            guard Set(granted.playingLeaseIds) == playing else {
                throw .leasesChanged(assetId: assetId)
            }
            lease = granted
        }
        return PlaybackAuthorization(
            package: package,
            manifest: manifest,
            lease: lease,
            requirement: requirement,
            authorizedAt: now,
            keys: keys,
            download: download
        )
    }

    /// `manifest` with the size and checksum of every file the download has completed.
    static func filling(_ manifest: PackageManifest, from download: any DownloadInProgress) -> PackageManifest {
        var manifest = manifest
        for r in manifest.renditions.indices {
            for i in manifest.renditions[r].initSections.indices where manifest.renditions[r].initSections[i].sha256 == nil {
                if let done = download.completedFile(manifest.renditions[r].initSections[i].path) {
                    manifest.renditions[r].initSections[i].size = done.size
                    manifest.renditions[r].initSections[i].sha256 = done.sha256
                }
            }
            for s in manifest.renditions[r].segments.indices {
                guard let file = manifest.renditions[r].segments[s].file, file.sha256 == nil else { continue }
                if let done = download.completedFile(file.path) {
                    manifest.renditions[r].segments[s].file?.size = done.size
                    manifest.renditions[r].segments[s].file?.sha256 = done.sha256
                }
            }
        }
        return manifest
    }

    /// Checks, for one request of a running session, that playback may go on: the package folder still exists and the
    /// lease (or, without one, every identity key) is still valid at the clock's time. Records the local time, so a
    /// clock set back during playback is caught.
    ///
    /// - Returns: nil when playback may go on, else the refusal (`package_deleted`, a lease code, `key_missing`).
    public func recheck(_ authorization: PlaybackAuthorization) -> PlaybackError? {
        let assetId = authorization.assetId
        guard authorization.package.exists, FileSystem.exists(authorization.package.manifestURL) else {
            return .packageDeleted(assetId: assetId)
        }
        if let disagreement = KernelTime.processClockDisagreement() {
            return .clockUntrustworthy(assetId: assetId, detail: disagreement)
        }
        let now = clock.now
        let requirement = authorization.requirement
        if requirement.needsLease {
            do {
                try Self.require(try evaluate(requirement, assetId: assetId, at: now, recordingFirstPlay: false), assetId: assetId)
            } catch {
                return error
            }
        }
        for uri in requirement.identityKeyURIs {
            do {
                _ = try store.identityKey(uri: uri, at: now)
            } catch let error as LeaseError {
                return .lease(error, assetId: assetId)
            } catch {
                let keyId = authorization.manifest.keys.first { $0.uri == uri }?.keyId ?? PackageKeyring.identityKeyID(uri: uri)
                return .keyMissing(assetId: assetId, keyId: keyId, detail: "\(error). Download the asset again while online.")
            }
        }
        return nil
    }

    private func readPackage(assetId: String) throws(PlaybackError) -> (PackageDirectory, PackageManifest) {
        do {
            let package = try PackageDirectory(assetId: assetId, in: dataDirectory)
            return (package, try package.readManifest())
        } catch {
            switch error {
            case .notFound: throw .packageNotFound(assetId: assetId)
            case .invalidManifest(_, let reason): throw .invalidManifest(assetId: assetId, reason: reason)
            default: throw .invalidManifest(assetId: assetId, reason: error.description)
            }
        }
    }

    /// The lease verdict over the leases that hold the asset's skd keys (a recording's rotated keys may be held by
    /// several: every one must allow playback, and the strictest is reported).
    private func evaluate(
        _ requirement: LeaseRequirement,
        assetId: String,
        at now: Int64,
        recordingFirstPlay: Bool
    ) throws(PlaybackError) -> LeaseEvaluation {
        let keyIds = requirement.leaseKeyIds.sorted()
        do {
            return recordingFirstPlay
                ? try store.authorizePlayback(assetId: assetId, keyIds: keyIds, at: now)
                : try store.evaluate(assetId: assetId, keyIds: keyIds, at: now)
        } catch {
            throw .keyStoreUnavailable(assetId: assetId, detail: (error as? any StowageError)?.message ?? "\(error)")
        }
    }

    private static func require(_ evaluation: LeaseEvaluation, assetId: String) throws(PlaybackError) {
        if let error = evaluation.error { throw .lease(error, assetId: assetId) }
    }

    private static func mapKeyError(_ error: PackageKeyError, assetId: String) -> PlaybackError {
        switch error {
        case .missingKey(_, let keyId, _): .keyMissing(assetId: assetId, keyId: keyId, detail: error.description)
        case .leaseUnusable(_, let keyId, _): .keyMissing(assetId: assetId, keyId: keyId, detail: error.description)
        case .identityKeyUnavailable(_, let keyId, _): .keyMissing(assetId: assetId, keyId: keyId, detail: error.description)
        case .storeUnavailable(let detail): .keyStoreUnavailable(assetId: assetId, detail: detail)
        }
    }
}

/// What playing an asset requires of the key store, decided from its authenticated records and the manifest together:
/// the manifest can add requirements, never remove them.
public struct LeaseRequirement: Sendable, Hashable {
    /// Whether a lease must allow playback: the manifest names an skd key, or the asset has had a lease here.
    public var needsLease: Bool
    /// The skd key IDs the lease must cover: the manifest's and those the asset's leases hold.
    public var leaseKeyIds: Set<String>
    /// The identity keys that must still open: the manifest's and the asset's sealed ones.
    public var identityKeyURIs: [String]

    public init(manifest: PackageManifest, facts: AssetLeaseFacts) {
        let manifestSKD = manifest.keys.filter { $0.kind == .skd }.map(\.keyId)
        needsLease = !manifestSKD.isEmpty || facts.hasHadLease
        leaseKeyIds = Set(manifestSKD).union(facts.heldKeyIds)
        let listed = manifest.keys.filter { $0.kind == .identity }.map(\.uri)
        identityKeyURIs = listed + facts.identityKeyURIs.filter { !listed.contains($0) }
    }
}

/// Every rendition downloaded completely, with each file's size and checksum known.
public struct PackageCompletenessRule: Sendable {
    public init() {}

    /// - Throws: ``PlaybackError`` `package_incomplete`.
    public func check(_ manifest: PackageManifest) throws(PlaybackError) {
        guard !manifest.renditions.isEmpty else { throw .packageIncomplete(assetId: manifest.assetId, detail: "it has no rendition") }
        if let rendition = manifest.renditions.first(where: { !$0.isComplete }) {
            throw .packageIncomplete(assetId: manifest.assetId, detail: "rendition \(rendition.id) is still downloading")
        }
        if let file = manifest.files.first(where: { $0.size == nil || $0.sha256 == nil }) {
            throw .packageIncomplete(assetId: manifest.assetId, detail: "\(file.path) has no recorded size or checksum")
        }
    }
}

/// Every file of the manifest on disk with the manifest's size and, when `checksums`, its SHA-256.
public struct PackageFilesRule: Sendable {
    /// Whether every file is hashed too.
    public var checksums: Bool

    public init(checksums: Bool) {
        self.checksums = checksums
    }

    /// - Throws: ``PlaybackError`` `segment_missing`, `segment_modified`, `segment_checksum_mismatch`.
    public func check(_ manifest: PackageManifest, in package: PackageDirectory) throws(PlaybackError) {
        let assetId = manifest.assetId
        let playlists = [manifest.multivariantPlaylist] + manifest.renditions.map(\.playlist)
        for path in playlists {
            guard let url = try? package.url(forRelativePath: path), FileSystem.exists(url) else {
                throw .segmentMissing(assetId: assetId, path: path)
            }
        }
        for file in manifest.files {
            guard let url = try? package.url(forRelativePath: file.path), let size = FileSystem.size(of: url) else {
                throw .segmentMissing(assetId: assetId, path: file.path)
            }
            if let expected = file.size, expected != size {
                throw .segmentModified(assetId: assetId, path: file.path, expected: expected, found: size)
            }
        }
        guard checksums else { return }
        for file in manifest.files {
            guard let url = try? package.url(forRelativePath: file.path) else { throw .segmentMissing(assetId: assetId, path: file.path) }
            guard let digest = FileSystem.sha256(of: url) else { throw .segmentMissing(assetId: assetId, path: file.path) }
            if digest != file.sha256?.lowercased() { throw .segmentChecksumMismatch(assetId: assetId, path: file.path) }
        }
    }
}
