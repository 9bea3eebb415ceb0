import Foundation
import OfflinePackage
import PackageTestSupport
import Packaging
import Playback
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `verified.json`: files whose SHA-256 was checked before the session (by the download that wrote them) are served
/// without hashing them again while their identity holds, and hashed as any other file once it does not.
@Suite(.timeLimit(.minutes(5)))
struct VerifiedFilesTests {
    private static func package(in root: URL) async throws -> TestPackage {
        try await TestPackages.make(clearPlaylist: TestPackages.mediaFixture("ts-clear/index.m3u8"), method: .aes128, assetId: "movie", in: root)
    }

    /// Records `path` in the package's `verified.json` as checked against `sha256` (the manifest's when nil), with the
    /// identity the file has now.
    private static func vouch(for path: String, in package: TestPackage, sha256: String? = nil) throws -> FileIdentity {
        let file = try #require(package.manifest.files.first { $0.path == path })
        let identity = try #require(FileIdentity(path: package.url(of: path).path))
        var records = VerifiedFileRecords.read(in: package.package)
        records.files[path] = VerifiedFileRecords.Entry(sha256: try #require(sha256 ?? file.sha256), identity: identity)
        try records.write(in: package.package)
        return identity
    }

    /// Changes the file's identity without changing a byte (a `touch`): its change time moves. The kernel's clock for it
    /// ticks every few milliseconds, so it is touched until the identity differs, at most 200 times.
    private static func touch(_ url: URL, from identity: FileIdentity) throws {
        for _ in 0..<200 where FileIdentity(path: url.path) == identity {
            #expect(utimes(url.path, nil) == 0)
            usleep(5_000)
        }
        #expect(FileIdentity(path: url.path) != identity)
    }

    private static func segment(_ address: PlaybackServer.Address, _ path: String) async -> (status: Int, body: [UInt8]?)? {
        try? await PlaybackHarness.get(address.sessionURL.appendingPathComponent(path))
    }

    /// Serves `video/00001.ts` (damaged by the test) in a session of small chunks, and expects what a file hashed as it
    /// streams gives when damaged: the response cut short, and `segment_checksum_mismatch` in the error log.
    private static func expectDamageFound(in package: TestPackage, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let (served, _) = try await PlaybackHarness.withSession(package, configuration: .init(chunkSize: 4096)) { address in
            await Self.segment(address, "video/00001.ts")
        }
        #expect(served?.body == nil, sourceLocation: sourceLocation)
        let errors = PlaybackHarness.logLines(package.package.errorLogURL)
        #expect(
            errors.contains { $0.contains("/video/00001.ts") && $0.contains("segment_checksum_mismatch") },
            "\(errors)",
            sourceLocation: sourceLocation
        )
    }

    @Test("a file vouched for is served without its hash checked; once touched, it is hashed again and its damage found")
    func vouchedUntilChanged() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root)
        let clear = Array(try Data(contentsOf: TestPackages.mediaFixture("ts-clear/seg_1.ts")))
        // Damaged first, vouched for after: a record that lies. That the damage reaches the player shows the file was
        // not hashed; a vouched file that is whole is served as the clear twin.
        try package.damage("video/00001.ts", at: 100)
        let identity = try Self.vouch(for: "video/00001.ts", in: package)
        _ = try Self.vouch(for: "video/00002.ts", in: package)
        let expectedSecond = Array(try Data(contentsOf: TestPackages.mediaFixture("ts-clear/seg_2.ts")))
        let (first, _) = try await PlaybackHarness.withSession(package) { address in
            (await Self.segment(address, "video/00001.ts"), await Self.segment(address, "video/00002.ts"))
        }
        #expect(first.0?.status == 200)
        #expect(first.0?.body?.count == clear.count && first.0?.body != clear)
        #expect(first.1?.status == 200 && first.1?.body == expectedSecond)

        // The same bytes, touched: the record no longer vouches, the file is hashed and the damage is found.
        try Self.touch(package.url(of: "video/00001.ts"), from: identity)
        try await Self.expectDamageFound(in: package)
    }

    @Test("a record for another SHA-256 than the manifest's vouches for nothing: the file is hashed and its damage found")
    func recordForAnotherChecksum() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root)
        try package.damage("video/00001.ts", at: 100)
        _ = try Self.vouch(for: "video/00001.ts", in: package, sha256: String(repeating: "0", count: 64))
        try await Self.expectDamageFound(in: package)
    }

    @Test("a verified.json that is not JSON vouches for nothing and plays as without one")
    func damagedRecords() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.package(in: root)
        try package.damage("video/00001.ts", at: 100)
        _ = try Self.vouch(for: "video/00001.ts", in: package)
        let records = package.package.url.appendingPathComponent(VerifiedFileRecords.fileName)
        try Data("{\"version\":1,\"files\":".utf8).write(to: records)
        #expect(VerifiedFileRecords.read(in: package.package).files.isEmpty)
        let clear = Array(try Data(contentsOf: TestPackages.mediaFixture("ts-clear/seg_2.ts")))
        let (served, _) = try await PlaybackHarness.withSession(package, configuration: .init(chunkSize: 4096)) { address in
            (await Self.segment(address, "video/00001.ts"), await Self.segment(address, "video/00002.ts"))
        }
        #expect(served.0?.body == nil)
        #expect(served.1?.status == 200 && served.1?.body == clear)
    }
}
