import Foundation
public import KeyDelivery
import StowageCore

#if canImport(Glibc)
import Glibc
#endif

/// `stowage delete ASSET`: removes an offline package and its keys, without the network.
///
/// In order:
/// 1. the package folder is renamed to a `.deleting-ASSET_ID` sibling (one atomic rename), so from then on no half
///    package that looks real is left: asset IDs never start with a dot, so the catalog, `verify` and playback
///    never take the folder for a package;
/// 2. every lease of the asset that still holds keys is returned (key material erased, release queued for the next
///    time the device is online: ``KeyStore/returnAsset(assetId:at:)``), and its sealed identity keys are erased;
/// 3. the renamed folder is removed recursively.
///
/// It is idempotent: a second call finds nothing to delete and reports so, without error; a call after a crash
/// finishes what the first began (a `.deleting-ASSET_ID` folder left behind is removed too). It takes the asset's
/// ``AssetLock`` first, so a download running in another process (or task) makes it fail with `asset_busy` before
/// anything is removed; a caller that holds the lock already passes it.
///
/// ```swift
/// let report = try PackageDeletion(dataDirectory: dataDirectory, store: store).delete(assetId: "movie-1", at: clock.now)
/// print("freed \(report.bytesFreed) bytes, \(report.leasesReturned.count) releases queued")
/// ```
public struct PackageDeletion: Sendable {
    /// Where the packages are.
    public let dataDirectory: DataDirectory
    /// Where their keys are.
    public let store: KeyStore

    /// A deletion in `dataDirectory`.
    public init(dataDirectory: DataDirectory, store: KeyStore) {
        self.dataDirectory = dataDirectory
        self.store = store
    }

    /// The folder a package is moved to while it is being removed.
    public static func deletingFolderName(assetId: String) -> String { ".deleting-\(assetId)" }

    /// Deletes the package of `assetId` and its keys.
    ///
    /// - Returns: what was done; ``PackageDeletionReport/nothingToDelete`` when there was nothing left.
    /// - Parameter lock: the asset's lock when the caller holds it already (cancel); nil takes it for the deletion.
    /// - Throws: ``PackageError/busy(assetId:holder:)`` while another task holds the asset;
    ///   ``PackageError/invalidAssetID(_:)``; ``PackageError/io(_:_:)`` when the folder cannot be moved or removed;
    ///   the key store's errors.
    public func delete(assetId: String, at now: Int64, holding lock: AssetLock? = nil) throws -> PackageDeletionReport {
        let package = try PackageDirectory(assetId: assetId, in: dataDirectory)
        let ownLock = lock == nil ? try AssetLock.acquire(assetId: assetId, in: dataDirectory, purpose: "a deletion") : nil
        defer { ownLock?.release() }
        let manager = FileManager.default
        let deleting = dataDirectory.packagesURL.appendingPathComponent(Self.deletingFolderName(assetId: assetId), isDirectory: true)
        var report = PackageDeletionReport(assetId: assetId)

        // What an interrupted deletion left is gone already as a package; it is measured and removed with the rest.
        var targets: [URL] = []
        if Self.exists(deleting) {
            report.bytesFreed += PackageDirectory.sizeOnDisk(of: deleting)
            targets.append(deleting)
        }
        if Self.exists(package.url) {
            report.packageFound = true
            report.bytesFreed += package.sizeOnDisk()
            report.filesRemoved = Self.fileCount(in: package.url)
            if targets.isEmpty {
                guard rename(package.url.path, deleting.path) == 0 else {
                    throw PackageError.io(package.url.path, "cannot move the package aside: \(String(cString: strerror(errno)))")
                }
                targets.append(deleting)
            } else {
                // The aside name is taken by the leftover; remove the package where it is (its manifest first, so
                // it stops looking like a package at once).
                try? manager.removeItem(at: package.manifestURL)
                targets.append(package.url)
            }
        }

        report.identityKeysErased = try store.eraseIdentityKeys(assetId: assetId, at: now)
        report.leasesReturned = try store.returnAsset(assetId: assetId, at: now).map(\.leaseId)

        for target in targets {
            do {
                try manager.removeItem(at: target)
            } catch {
                throw PackageError.io(target.path, "cannot remove the package: \(FileErrorText.describe(error))")
            }
        }
        report.nothingToDelete = targets.isEmpty && report.leasesReturned.isEmpty && report.identityKeysErased == 0
        return report
    }

    private static func exists(_ url: URL) -> Bool {
        var info = stat()
        return lstat(url.path, &info) == 0
    }

    private static func fileCount(in url: URL) -> Int {
        guard let enumerator = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey]) else { return 0 }
        var count = 0
        for case let file as URL in enumerator where (try? file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            count += 1
        }
        return count
    }
}

/// What ``PackageDeletion/delete(assetId:at:)`` did.
///
/// JSON:
///
/// ```json
/// {"assetId": "movie-1", "packageFound": true, "filesRemoved": 7, "bytesFreed": 1236992,
///  "leasesReturned": ["lease-id"], "identityKeysErased": 0, "nothingToDelete": false}
/// ```
public struct PackageDeletionReport: Codable, Sendable, Hashable {
    /// The asset.
    public var assetId: String
    /// Whether a package folder was found.
    public var packageFound = false
    /// Regular files in the package folder removed.
    public var filesRemoved = 0
    /// Bytes freed on disk (allocated blocks), leftovers of an interrupted deletion included.
    public var bytesFreed: Int64 = 0
    /// The leases returned: their key material is erased and their releases are queued
    /// (``KeyStore/pendingReleases()``), sent the next time the device is online.
    public var leasesReturned: [String] = []
    /// Sealed identity keys erased.
    public var identityKeysErased = 0
    /// True when there was nothing left to delete (no folder, no key): a repeated delete.
    public var nothingToDelete = false

    /// An empty report for `assetId`.
    public init(assetId: String) {
        self.assetId = assetId
    }
}
