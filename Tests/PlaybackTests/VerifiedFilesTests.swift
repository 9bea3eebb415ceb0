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

    /// A package of one rendition whose one segment is 24 MiB of the clear fixture's packets repeated: far more than
    /// the loopback socket buffers hold (at most about 10 MiB here), so a client that stops reading holds the server
    /// in the middle of the file.
    private static func largeSegmentPackage(in root: URL) async throws -> TestPackage {
        let source = root.appendingPathComponent("large-source", isDirectory: true)
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
        let packets = try Data(contentsOf: TestPackages.mediaFixture("ts-clear/seg_1.ts"))
        var segment = Data()
        while segment.count < 24 << 20 { segment.append(packets) }
        try segment.write(to: source.appendingPathComponent("seg_0.ts"))
        let playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:10\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:10.0,\nseg_0.ts\n#EXT-X-ENDLIST\n"
        try Data(playlist.utf8).write(to: source.appendingPathComponent("index.m3u8"))
        return try await TestPackages.make(
            clearPlaylist: source.appendingPathComponent("index.m3u8"),
            method: .aes128,
            assetId: "large",
            in: root
        )
    }

    /// GETs `path` on a raw connection, reads the head and the first bytes, stops reading for half a second (the
    /// server blocks in the middle of the file), runs `meanwhile`, then reads to the end. Returns the announced
    /// Content-Length and the body bytes received.
    private static func readPaused(
        _ address: PlaybackServer.Address,
        _ path: String,
        meanwhile: @Sendable () throws -> Void
    ) async throws -> (announced: Int, received: Int) {
        let connection = try #require(try await RawConnection.open(port: address.port).first)
        defer { connection.close() }
        let target = address.sessionURL.appendingPathComponent(path).path
        #expect(connection.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        let start = await connection.read(atLeast: 256 << 10, within: .seconds(10))
        let separator = Array("\r\n\r\n".utf8)
        let headEnd = try #require((0...(start.count - separator.count)).first { Array(start[$0..<($0 + separator.count)]) == separator })
        let head = String(decoding: start[..<headEnd], as: UTF8.self).lowercased()
        let announced = try #require(
            head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
        )
        try await Task.sleep(for: .milliseconds(500))
        try meanwhile()
        let rest = await connection.drain(within: .seconds(60))
        return (announced, start.count - headEnd - separator.count + rest)
    }

    @Test("a vouched file changed while it is served is cut short, never sent whole: the identity is read again at its end")
    func vouchedFileChangedWhileRead() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await Self.largeSegmentPackage(in: root)
        let path = try #require(package.manifest.files.first { $0.path.hasSuffix(".ts") }?.path)
        let identity = try Self.vouch(for: path, in: package)
        let url = package.url(of: path)
        let (outcome, _) = try await PlaybackHarness.withSession(package, configuration: .init(chunkSize: 64 << 10)) { address in
            // Unchanged, the pause changes nothing: the whole segment arrives.
            let whole = try await Self.readPaused(address, path) {}
            // Changed (touched: same bytes, another change time) while the server is held mid-file.
            let changed = try await Self.readPaused(address, path) { try Self.touch(url, from: identity) }
            return (whole, changed)
        }
        #expect(outcome.0.announced > 20 << 20)
        #expect(outcome.0.received == outcome.0.announced)
        #expect(outcome.1.announced == outcome.0.announced)
        #expect(outcome.1.received < outcome.1.announced, "\(outcome.1.received) of \(outcome.1.announced) bytes")
        let errors = PlaybackHarness.logLines(package.package.errorLogURL)
        #expect(errors.contains { $0.contains(path) && $0.contains("segment_checksum_mismatch") }, "\(errors)")
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
