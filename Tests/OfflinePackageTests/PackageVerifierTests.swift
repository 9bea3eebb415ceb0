import Foundation
import KeyDelivery
import OfflinePackage
import StowageCore
import StowageCrypto
import Testing

/// `stowage verify` over identity-key (AES-128) packages laid out from the committed fixtures: each kind of damage is
/// found, and only it.
struct PackageVerifierTests {
    typealias Packages = IdentityKeyPackages

    @Test(arguments: Packages.Fixture.allCases, [false, true])
    func aHealthyPackageIsPlayableWithNoProblems(fixture: Packages.Fixture, deep: Bool) async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(fixture, assetId: "movie-1", title: "Movie")
        let report = try await packages.verifier(deep: deep).verify(package)
        #expect(report.problems == [])
        #expect(report.isPlayable)
        #expect(report.exitStatus == 0)
        #expect(report.isComplete)
        #expect(report.depth == (deep ? .deep : .quick))
        #expect(report.lease == nil)
        #expect(report.keys.allSatisfy { $0.isAvailable })
        let video = try #require(report.renditions.first)
        #expect(video.isPlayable)
        #expect(video.files == (fixture == .fragmentedMP4 ? 4 : 3))
        // Quick: first and last segment; deep: all, and every file hashed. The encrypted init section counts too.
        let initSections = fixture == .fragmentedMP4 ? 1 : 0
        #expect(video.filesDecrypted == (deep ? 3 : 2) + initSections)
        #expect(video.filesHashed == (deep ? 3 + initSections : 0))
    }

    @Test("verify --deep records each segment it hashed whole, with its identity, for play; a quick one records nothing")
    func deepVerificationRecordsCheckedSegments() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, manifest) = try packages.make(.transportStream, assetId: "movie-1")
        _ = try await packages.verifier(deep: false).verify(package)
        #expect(VerifiedFileRecords.read(in: package).files.isEmpty)
        // Damaged: found, and never vouched for.
        let damaged = try FileHandle(forWritingTo: Packages.url(package, "video/seg_1.ts"))
        try damaged.seek(toOffset: 500)
        try damaged.write(contentsOf: Data([0x00, 0x01, 0x02]))
        try damaged.close()
        let report = try await packages.verifier(deep: true).verify(package)
        #expect(report.problems.map(\.path) == ["video/seg_1.ts"])
        let records = VerifiedFileRecords.read(in: package)
        #expect(Set(records.files.keys) == ["video/seg_0.ts", "video/seg_2.ts"])
        for (path, entry) in records.files {
            let file = try #require(manifest.files.first { $0.path == path })
            #expect(entry.sha256 == file.sha256)
            #expect(entry.identity == FileIdentity(path: Packages.url(package, path).path))
        }
        #expect(records.identities(for: manifest).count == 2)
    }

    @Test func aDeletedSegmentIsMissing() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        try FileManager.default.removeItem(at: Packages.url(package, "video/seg_1.ts"))
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.fileMissing])
        #expect(report.problems.first?.path == "video/seg_1.ts")
        #expect(report.problems.first?.rendition == "video")
        #expect(!report.isPlayable)
        #expect(report.exitStatus == 1)
        #expect(report.renditions.first?.isPlayable == false)
        #expect(report.renditions.first?.problems == 1)
    }

    @Test func aTruncatedSegmentAndAnExtendedOneAreNamedApart() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, manifest) = try packages.make(.transportStream, assetId: "movie-1")
        let cut = try FileHandle(forWritingTo: Packages.url(package, "video/seg_0.ts"))
        try cut.truncate(atOffset: 1000)
        try cut.close()
        let grown = try FileHandle(forWritingTo: Packages.url(package, "video/seg_2.ts"))
        try grown.seekToEnd()
        try grown.write(contentsOf: Data(repeating: 0x47, count: 188))
        try grown.close()

        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.fileTruncated, .fileSizeMismatch])
        let truncated = try #require(report.problems.first)
        #expect(truncated.path == "video/seg_0.ts")
        #expect(truncated.actualSize == 1000)
        #expect(truncated.expectedSize == manifest.renditions[0].segments[0].file?.size)
        #expect(report.problems.last?.path == "video/seg_2.ts")
        #expect(report.problems.last?.actualSize == (manifest.renditions[0].segments[2].file?.size ?? 0) + 188)
        // A file of the wrong size is not trial-decrypted: its size says enough.
        #expect(report.renditions.first?.filesDecrypted == 0)
    }

    @Test func aByteFlippedInAMiddleSegmentIsFoundOnlyByDeepVerification() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        try Packages.flipByte(Packages.url(package, "video/seg_1.ts"), at: 5000)

        let quick = try await packages.verifier().verify(package)
        #expect(quick.problems == [])
        #expect(quick.isPlayable)

        let deep = try await packages.verifier(deep: true).verify(package)
        #expect(deep.problems.first?.code == .fileModified)
        #expect(deep.problems.allSatisfy { $0.path == "video/seg_1.ts" })
        #expect(!deep.isPlayable)
    }

    @Test func aByteFlippedInTheFirstSegmentIsFoundByQuickTrialDecryption() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        // The first cipher block: the clear data no longer starts with a transport stream packet.
        try Packages.flipByte(Packages.url(package, "video/seg_0.ts"), at: 3)

        let quick = try await packages.verifier().verify(package)
        #expect(quick.problems.map(\.code) == [.invalidMedia])
        #expect(quick.problems.first?.path == "video/seg_0.ts")
        #expect(quick.problems.first?.cause == "malformed_container")

        let deep = try await packages.verifier(deep: true).verify(package)
        #expect(deep.problems.map(\.code) == [.fileModified, .invalidMedia])
    }

    @Test func aByteFlippedInTheLastBlockBreaksThePadding() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, manifest) = try packages.make(.transportStream, assetId: "movie-1")
        let size = Int(try #require(manifest.renditions[0].segments[2].file?.size))
        // The last byte of the second-to-last block: under CBC it flips the last clear byte, the padding length.
        try Packages.flipByte(Packages.url(package, "video/seg_2.ts"), at: size - 17)
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.decryptionFailed])
        #expect(report.problems.first?.cause == "bad_padding")
    }

    @Test func aDamagedInitSectionIsFoundByQuickTrialDecryption() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.fragmentedMP4, assetId: "movie-1")
        // The first cipher block of the encrypted init section: its ftyp header no longer reads.
        try Packages.flipByte(Packages.url(package, "video/init.mp4"), at: 5)
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.invalidMedia])
        #expect(report.problems.first?.path == "video/init.mp4")
        // Its fragments cannot be judged without it.
        #expect(report.renditions.first?.filesDecrypted == 1)
    }

    @Test(arguments: Packages.Fixture.allCases)
    func aWrongKeyFailsTrialDecryption(fixture: Packages.Fixture) async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, manifest) = try packages.make(fixture, assetId: "movie-1")
        for key in manifest.keys {
            try packages.store.storeIdentityKey(
                SecretBytes([UInt8](repeating: 0x11, count: 16)),
                uri: key.uri,
                assetId: "movie-1",
                at: packages.clock.now
            )
        }
        let report = try await packages.verifier().verify(package)
        #expect(!report.isPlayable)
        #expect(report.problems.first?.code == .decryptionFailed)
        #expect(report.problems.allSatisfy { $0.code == .decryptionFailed })
        // fMP4: the encrypted init section fails first, and its fragments cannot be judged without it.
        #expect(report.problems.first?.path == (fixture == .fragmentedMP4 ? "video/init.mp4" : "video/seg_0.ts"))
    }

    @Test func aReturnedAssetHasItsKeysMissing() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, manifest) = try packages.make(.fragmentedMP4, assetId: "movie-1")
        try packages.store.returnAsset(assetId: "movie-1", at: packages.clock.now)
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.keyMissing, .keyMissing])
        #expect(Set(report.problems.compactMap(\.keyId)) == Set(manifest.keys.map(\.keyId)))
        #expect(report.keys.allSatisfy { !$0.isAvailable })
        #expect(report.renditions.first?.isPlayable == false)
        // Without keys nothing is trial-decrypted.
        #expect(report.renditions.first?.filesDecrypted == 0)
    }

    @Test func anExpiredIdentityKeyIsNamed() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1", keyExpiresAt: Packages.start + 3600)
        #expect(try await packages.verifier().verify(package).isPlayable)
        packages.clock.advance(by: 3600)
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.keyExpired])
        #expect(report.problems.first?.cause == "identity_key_expired")
    }

    @Test func aClockSetBackIsCaught() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1", keyExpiresAt: Packages.start + 86_400)
        packages.clock.advance(by: 3600)
        #expect(try await packages.verifier().verify(package).isPlayable)
        packages.clock.advance(by: -7200)
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.clockRollbackDetected])
        // Latched: moving the clock forward again does not clear it.
        packages.clock.advance(by: 7200)
        #expect(try await packages.verifier().verify(package).problems.map(\.code) == [.clockRollbackDetected])
    }

    @Test func forADurationLongerThanTheKeyLifetimeIsNotLongEnough() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1", keyExpiresAt: Packages.start + 48 * 3600)
        #expect(try await packages.verifier(duration: 47 * 3600).verify(package).isPlayable)
        let report = try await packages.verifier(duration: 49 * 3600).verify(package)
        #expect(report.problems.map(\.code) == [.leaseNotLongEnough])
        #expect(report.requiredDuration == Int64(49 * 3600))
    }

    @Test func anIncompleteRenditionMakesThePackageIncomplete() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        try packages.editManifest(package) { $0.renditions[0].isComplete = false }
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.packageIncomplete])
        #expect(!report.isComplete)
    }

    @Test func extraFilesAreFine() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        try Data("hello".utf8).write(to: Packages.url(package, "video/notes.txt"))
        try FileManager.default.createDirectory(at: package.logsURL, withIntermediateDirectories: true)
        try Data("#Version: 1.0\n".utf8).write(to: package.accessLogURL)
        #expect(try await packages.verifier(deep: true).verify(package).problems == [])
    }

    @Test func aManifestNamingAPathOutsideThePackageIsInvalid() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        try packages.editManifest(package) { $0.renditions[0].segments[1].file?.path = "../../../etc/passwd" }
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.manifestInvalid])
        #expect(report.problems.first?.cause == "invalid_manifest")
        #expect(!report.isPlayable)
    }

    @Test func aSegmentReplacedByALinkLeadingOutIsFound() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        let outside = packages.root.appendingPathComponent("outside.ts")
        let segment = Packages.url(package, "video/seg_1.ts")
        try FileManager.default.moveItem(at: segment, to: outside)
        try FileManager.default.createSymbolicLink(at: segment, withDestinationURL: outside)
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.fileModified])
        #expect(report.problems.first?.path == "video/seg_1.ts")
    }

    @Test func aManifestNamingAKeyItDoesNotListIsInvalid() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        try packages.editManifest(package) { $0.renditions[0].segments[1].file?.key?.keyId = String(repeating: "ab", count: 16) }
        let report = try await packages.verifier().verify(package)
        #expect(report.problems.map(\.code) == [.manifestInvalid])
        #expect(report.renditions.first?.isPlayable == false)
    }

    @Test func aMissingOrUnreadableManifestIsReportedAndAMissingPackageThrown() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1")
        try Data("{not json".utf8).write(to: package.manifestURL)
        #expect(try await packages.verifier().verify(package).problems.map(\.code) == [.manifestInvalid])
        try FileManager.default.removeItem(at: package.manifestURL)
        #expect(try await packages.verifier().verify(package).problems.map(\.code) == [.manifestInvalid])

        let absent = try PackageDirectory(assetId: "nothing-here", in: packages.dataDirectory)
        await #expect(throws: PackageError.notFound("nothing-here")) {
            try await packages.verifier().verify(absent)
        }
    }

    @Test func theReportEncodesWithItsDocumentedFieldNames() async throws {
        let packages = try Packages()
        defer { packages.remove() }
        let (package, _) = try packages.make(.transportStream, assetId: "movie-1", title: "Movie")
        let cut = try FileHandle(forWritingTo: Packages.url(package, "video/seg_0.ts"))
        try cut.truncate(atOffset: 188)
        try cut.close()
        let report = try await packages.verifier(deep: true, duration: 3600).verify(package)
        let data = try JSONEncoder().encode(report)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(
            Set(object.keys)
                == [
                    "assetId", "title", "depth", "verifiedAt", "requiredDuration", "isPlayable", "isComplete", "keys", "renditions",
                    "problems",
                ]
        )
        #expect(object["depth"] as? String == "deep")
        let problem = try #require((object["problems"] as? [[String: Any]])?.first)
        #expect(problem["code"] as? String == "file_truncated")
        #expect(problem["path"] as? String == "video/seg_0.ts")
        #expect(problem["actualSize"] as? Int == 188)
        let rendition = try #require((object["renditions"] as? [[String: Any]])?.first)
        #expect(
            Set(rendition.keys)
                == ["id", "kind", "name", "isComplete", "isPlayable", "files", "bytes", "filesHashed", "filesDecrypted", "problems"]
        )
        #expect(try JSONDecoder().decode(VerificationReport.self, from: data) == report)
    }
}
