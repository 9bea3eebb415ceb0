import Foundation
import KeyDelivery
import KeyServer
import OfflinePackage
import PackageTestSupport
import Packaging
import StowageCore
import StowageCrypto
import Testing

/// Verification, the catalog, info and deletion over real packages: content packaged by `ContentPackager`, keys
/// delivered by an in-process key server under a lease acquired by a real `KeySession`, laid out as the download
/// engine lays out a package.
struct LeasedPackageTests {
    static let day: Int64 = 86_400

    private static func temporaryRoot() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-leased-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private static func make(
        _ fixture: String = "ts-clear/index.m3u8",
        method: ContentPackager.Method = .sampleAES,
        assetId: String = "movie-1",
        keys: TestKeyDelivery = .standardSkd,
        in root: URL
    ) async throws -> TestPackage {
        try await TestPackages.make(
            clearPlaylist: TestPackages.mediaFixture(fixture),
            method: method,
            assetId: assetId,
            keys: keys,
            in: root
        )
    }

    private static func verifier(_ package: TestPackage, deep: Bool = false, duration: Int64? = nil) -> PackageVerifier {
        PackageVerifier(store: package.store, device: package.device, clock: package.clock, options: .init(deep: deep, duration: duration))
    }

    @Test(arguments: [
        ("ts-clear/index.m3u8", ContentPackager.Method.sampleAES),
        ("fmp4-clear/index.m3u8", .sampleAES),
        ("ts-clear/index.m3u8", .aes128),
        ("fmp4-clear/index.m3u8", .aes128),
    ])
    func aHealthyLeasedPackageIsPlayableQuickAndDeep(fixture: String, method: ContentPackager.Method) async throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.make(fixture, method: method, in: root)
        for deep in [false, true] {
            let report = try await Self.verifier(package, deep: deep).verify(package.package)
            #expect(report.problems == [], "deep: \(deep)")
            #expect(report.isPlayable)
            let lease = try #require(report.lease)
            #expect(lease.isValid)
            #expect(lease.leaseId == package.leaseId)
            #expect(lease.state == "persisted")
            #expect(!lease.playbackStarted)
            #expect(lease.timeLeft == 30 * Self.day)
            #expect(report.keys.allSatisfy { $0.kind == "skd" && $0.isAvailable })
            let video = try #require(report.renditions.first)
            let segments = package.manifest.renditions[0].segments.count
            #expect(video.filesDecrypted >= (deep ? segments : min(2, segments)))
        }
    }

    @Test func damageInARealPackageIsFound() async throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.make("fmp4-clear/index.m3u8", in: root)
        let segments = package.manifest.renditions[0].segments.compactMap(\.file)
        try #require(segments.count >= 3)
        try package.damage(segments[1].path)
        #expect(try await Self.verifier(package).verify(package.package).isPlayable)
        let deep = try await Self.verifier(package, deep: true).verify(package.package)
        #expect(deep.problems.first?.code == .fileModified)
        #expect(deep.problems.first?.path == segments[1].path)

        try FileManager.default.removeItem(at: package.url(of: segments[2].path))
        let quick = try await Self.verifier(package).verify(package.package)
        #expect(quick.problems.map(\.code) == [.fileMissing])
    }

    @Test func pastTheStorageWindowTheLeaseIsRefused() async throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.make(in: root)
        package.clock.advance(by: 30 * Self.day)
        let report = try await Self.verifier(package).verify(package.package)
        #expect(report.problems.map(\.code) == [.storageWindowExpired])
        #expect(report.lease?.isValid == false)
        #expect(report.lease?.code == "storage_window_expired")
        #expect(report.exitStatus == 1)
        // The keys are still held (nothing purged them), so the files still trial-decrypt.
        #expect(report.keys.allSatisfy { $0.isAvailable })
    }

    @Test func aClockSetBackAfterAnEvaluationIsCaught() async throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.make(in: root)
        package.clock.advance(by: Self.day)
        #expect(try await Self.verifier(package).verify(package.package).isPlayable)
        package.clock.advance(by: -2 * 3600)
        let report = try await Self.verifier(package).verify(package.package)
        #expect(report.problems.map(\.code) == [.clockRollbackDetected])
        #expect(report.problems.first?.leaseId == package.leaseId)
    }

    @Test func forCountsThePlaybackWindow() async throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.make(in: root)
        // Kept 30 days, but 48 hours of playback once started: --for 47h passes, --for 49h does not.
        #expect(try await Self.verifier(package, duration: 47 * 3600).verify(package.package).isPlayable)
        let report = try await Self.verifier(package, duration: 49 * 3600).verify(package.package)
        #expect(report.problems.map(\.code) == [.leaseNotLongEnough])
        #expect(report.problems.first?.cause == "expires_too_soon")
        // Longer than the storage window too.
        let month = try await Self.verifier(package, duration: 31 * Self.day).verify(package.package)
        #expect(month.problems.map(\.code) == [.leaseNotLongEnough])
    }

    @Test func aReturnedLeaseLeavesTheKeysMissing() async throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.make(in: root)
        try package.store.returnAsset(assetId: "movie-1", at: package.clock.now)
        let report = try await Self.verifier(package).verify(package.package)
        #expect(Set(report.problemCodes) == [.keyMissing, .returned])
        #expect(report.keys.allSatisfy { !$0.isAvailable })
        #expect(report.renditions.allSatisfy { !$0.isPlayable })
    }

    @Test func identityKeysFromTheKeyServerVerifyToo() async throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.make(method: .aes128, keys: .identity(expiresAt: TestPackages.startTime + Self.day), in: root)
        let report = try await Self.verifier(package, deep: true).verify(package.package)
        #expect(report.problems == [])
        #expect(report.lease == nil)
        package.clock.advance(by: Self.day)
        #expect(try await Self.verifier(package).verify(package.package).problemCodes == [.keyExpired])
    }

    @Test func alternateAudioAndSubtitlesAreVerifiedAndDescribedPerSelection() async throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let fixture = try TestPackages.alternateAudioFixture(in: root)
        let package = try await TestPackages.make(clearPlaylist: fixture.master, method: .sampleAES, assetId: "movie-1", in: root)
        let report = try await Self.verifier(package, deep: true).verify(package.package)
        #expect(report.problems == [])
        #expect(report.renditions.count == package.manifest.renditions.count)
        #expect(report.renditions.count >= 3)
        #expect(report.renditions.allSatisfy { $0.isPlayable })

        // One audio rendition still downloading: the package is not playable, and that selection is online only.
        let audio = try #require(package.manifest.renditions.first { $0.kind == .audio })
        var manifest = package.manifest
        let index = try #require(manifest.renditions.firstIndex { $0.id == audio.id })
        manifest.renditions[index].isComplete = false
        try package.package.writeManifest(manifest)
        let partial = try await Self.verifier(package).verify(package.package)
        #expect(partial.problems.map(\.code) == [.packageIncomplete])
        #expect(partial.problems.first?.rendition == audio.id)
        #expect(partial.renditions.first { $0.id == "video" }?.isPlayable == true)

        let info = try PackageInfo.load(
            assetId: "movie-1",
            dataDirectory: package.dataDirectory,
            store: package.store,
            device: package.device,
            at: package.clock.now
        )
        #expect(info.isPlayableOffline)
        #expect(info.onlineOnlySelections.map(\.renditionId) == [audio.id])
        #expect(info.offlineSelections.count == manifest.renditions.count - 1)
        #expect(info.lease?.isValid == true)
    }

    @Test func theCatalogShowsTheLeaseAndDeletionQueuesItsRelease() async throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.make(in: root)
        let catalog = PackageCatalog(dataDirectory: package.dataDirectory, store: package.store)
        package.clock.advance(by: Self.day)

        let before = try #require(try catalog.entries(at: package.clock.now).first)
        #expect(before.assetId == "movie-1")
        #expect(before.state == .complete)
        #expect(before.sizeOnDisk > 0)
        #expect(before.lease?.state == "persisted")
        #expect(before.lease?.timeLeft == 29 * Self.day)
        #expect(before.lease?.playbackStarted == false)
        #expect(before.lease?.playbackTimeLeft == Int64(48 * 3600))

        _ = try package.store.authorizePlayback(assetId: "movie-1", at: package.clock.now)
        package.clock.advance(by: 3600)
        let playing = try #require(try catalog.entries(at: package.clock.now).first)
        #expect(playing.lease?.state == "playing")
        #expect(playing.lease?.playbackStarted == true)
        #expect(playing.lease?.timeLeft == Int64(47 * 3600))

        let deletion = PackageDeletion(dataDirectory: package.dataDirectory, store: package.store)
        let report = try deletion.delete(assetId: "movie-1", at: package.clock.now)
        #expect(report.packageFound)
        #expect(report.bytesFreed == before.sizeOnDisk)
        #expect(report.leasesReturned == [try #require(package.leaseId)])
        #expect(try package.store.pendingReleases().map(\.leaseId) == [package.leaseId])
        #expect(try package.store.leases(assetId: "movie-1").allSatisfy { !$0.hasKeyMaterial && $0.state == .returned })
        #expect(try catalog.entries(at: package.clock.now).isEmpty)

        let again = try deletion.delete(assetId: "movie-1", at: package.clock.now)
        #expect(again.nothingToDelete)
        #expect(again.leasesReturned.isEmpty)
        #expect(try package.store.pendingReleases().count == 1)
    }
}
