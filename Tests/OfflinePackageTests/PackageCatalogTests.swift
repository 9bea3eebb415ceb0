import Foundation
import KeyDelivery
import OfflinePackage
import StowageCore
import StowageCrypto
import Testing

/// `stowage list`, `info` and `delete` over identity-key packages laid out from the committed fixtures.
struct PackageCatalogTests {
    typealias Packages = IdentityKeyPackages

    @Test func listsEveryPackageAndReportsABrokenManifestInsteadOfThrowing() throws {
        let packages = try Packages()
        defer { packages.remove() }
        try packages.make(.transportStream, assetId: "movie-a", title: "A")
        let (partial, _) = try packages.make(.fragmentedMP4, assetId: "movie-b", title: "B")
        try packages.editManifest(partial) { $0.renditions[0].isComplete = false }
        let broken = try PackageDirectory(assetId: "movie-c", in: packages.dataDirectory)
        try FileManager.default.createDirectory(at: broken.url, withIntermediateDirectories: true)
        try Data("{\"schemaVersion\": 1".utf8).write(to: broken.manifestURL)
        // Not packages: an interrupted deletion's leftover and a stray file.
        try FileManager.default.createDirectory(
            at: packages.dataDirectory.packagesURL.appendingPathComponent(".deleting-movie-d"),
            withIntermediateDirectories: true
        )
        try Data().write(to: packages.dataDirectory.packagesURL.appendingPathComponent("stray.txt"))
        // A package folder with no manifest (made by hand, or the manifest deleted).
        try FileManager.default.createDirectory(
            at: packages.dataDirectory.packagesURL.appendingPathComponent("movie-e"),
            withIntermediateDirectories: true
        )

        let entries = try PackageCatalog(dataDirectory: packages.dataDirectory, store: packages.store).entries(at: packages.clock.now)
        #expect(entries.map(\.assetId) == ["movie-a", "movie-b", "movie-c", "movie-e"])
        #expect(entries.last?.state == .unreadable)
        #expect(entries.last?.problem?.code == "manifest_missing")
        let a = entries[0]
        #expect(a.title == "A")
        #expect(a.state == .complete)
        #expect(a.renditionsComplete == 1 && a.renditionsTotal == 1)
        #expect(a.sizeOnDisk >= 32_720 + 33_472 + 31_776)
        #expect(a.lease == nil)
        #expect(a.problem == nil)
        #expect(entries[1].state == .incomplete)
        #expect(entries[1].renditionsComplete == 0)
        let c = entries[2]
        #expect(c.state == .unreadable)
        #expect(c.problem?.code == "invalid_manifest")
        #expect(c.renditions.isEmpty)

        let json = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(a)) as? [String: Any])
        #expect(json["renditionsComplete"] as? Int == 1)
        #expect(json["state"] as? String == "complete")
        #expect(try JSONDecoder().decode([PackageCatalogEntry].self, from: JSONEncoder().encode(entries)) == entries)
    }

    @Test func anEmptyDataDirectoryListsNothing() throws {
        let packages = try Packages()
        defer { packages.remove() }
        #expect(try PackageCatalog(dataDirectory: packages.dataDirectory, store: packages.store).entries(at: packages.clock.now).isEmpty)
    }

    @Test func infoTellsOfflineSelectionsFromOnlineOnlyOnes() throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, manifest) = try packages.make(.transportStream, assetId: "movie-1", title: "Movie")
        try packages.editManifest(package) { manifest in
            var audio = manifest.renditions[0]
            audio.id = "audio-fr"
            audio.kind = .audio
            audio.name = "Français"
            audio.language = "fr"
            audio.isDefault = false
            audio.isComplete = false
            manifest.renditions.append(audio)
        }
        let info = try PackageInfo.load(
            assetId: "movie-1",
            dataDirectory: packages.dataDirectory,
            store: packages.store,
            device: packages.device,
            at: packages.clock.now
        )
        #expect(info.title == "Movie")
        #expect(info.isPlayableOffline)
        #expect(!info.isComplete)
        #expect(info.offlineSelections.map(\.renditionId) == ["video"])
        #expect(info.onlineOnlySelections.map(\.renditionId) == ["audio-fr"])
        #expect(info.onlineOnlySelections.first?.reason == "package_incomplete")
        #expect(info.selections(of: .audio).map(\.language) == ["fr"])
        #expect(info.keys.map(\.keyId) == manifest.keys.map(\.keyId))

        try packages.store.eraseIdentityKeys(assetId: "movie-1", at: packages.clock.now)
        let withoutKeys = try PackageInfo.load(
            assetId: "movie-1",
            dataDirectory: packages.dataDirectory,
            store: packages.store,
            device: packages.device,
            at: packages.clock.now
        )
        #expect(!withoutKeys.isPlayableOffline)
        #expect(withoutKeys.selections.first?.availability == .onlineOnly)
        #expect(withoutKeys.selections.first?.reason == "key_missing")
    }

    @Test func deleteRemovesFilesAndKeysAndIsIdempotent() throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.fragmentedMP4, assetId: "movie-1")
        try packages.make(.transportStream, assetId: "movie-2")
        let deletion = PackageDeletion(dataDirectory: packages.dataDirectory, store: packages.store)

        let first = try deletion.delete(assetId: "movie-1", at: packages.clock.now)
        #expect(first.packageFound)
        #expect(first.filesRemoved == 5)  // manifest, init section, three segments
        #expect(first.bytesFreed >= 1_360 + 25_680 + 26_128 + 23_664)
        #expect(first.identityKeysErased == 2)
        #expect(!first.nothingToDelete)
        #expect(!package.exists)
        #expect(try packages.store.identityKeyURIs(assetId: "movie-1").isEmpty)
        let left = try FileManager.default.contentsOfDirectory(atPath: packages.dataDirectory.packagesURL.path)
        #expect(left == ["movie-2"])
        // The other package and its key are untouched.
        #expect(try packages.store.identityKeyURIs(assetId: "movie-2").count == 1)

        let second = try deletion.delete(assetId: "movie-1", at: packages.clock.now)
        #expect(second.nothingToDelete)
        #expect(!second.packageFound)
        #expect(second.bytesFreed == 0)
    }

    @Test func deleteFinishesWhatAnInterruptedDeletionLeft() throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        // A crash after the rename: the package is aside, its key still stored.
        let aside = packages.dataDirectory.packagesURL.appendingPathComponent(PackageDeletion.deletingFolderName(assetId: "movie-1"))
        try FileManager.default.moveItem(at: package.url, to: aside)
        let catalog = PackageCatalog(dataDirectory: packages.dataDirectory, store: packages.store)
        #expect(try catalog.entries(at: packages.clock.now).isEmpty)

        let report = try PackageDeletion(dataDirectory: packages.dataDirectory, store: packages.store)
            .delete(assetId: "movie-1", at: packages.clock.now)
        #expect(!report.packageFound)
        #expect(report.bytesFreed > 0)
        #expect(report.identityKeysErased == 1)
        #expect(!report.nothingToDelete)
        #expect(try FileManager.default.contentsOfDirectory(atPath: packages.dataDirectory.packagesURL.path).isEmpty)
    }

    @Test func deleteRefusesAnAssetIDThatIsNotAFolderName() throws {
        let packages = try Packages()
        defer { packages.remove() }
        #expect(throws: PackageError.invalidAssetID("../x")) {
            try PackageDeletion(dataDirectory: packages.dataDirectory, store: packages.store).delete(assetId: "../x", at: packages.clock.now)
        }
    }
}
