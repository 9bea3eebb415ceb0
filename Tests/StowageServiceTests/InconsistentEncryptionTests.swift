import AssetDownload
import AsyncHTTPClient
import DownloadTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import OfflinePackage
import Playback
import StowageCore
import StowageLibrary
import StowageTestSupport
import Testing

/// A hostile or broken source: a playlist that sample-encrypts fMP4 segments (METHOD=SAMPLE-AES, Shaka Packager's cbcs
/// output) but whose EXT-X-MAP is a clear init section, one that protects no track (Shaka's clear twin's). A player
/// would decode the encrypted samples as if clear. Before, `verify --deep` passed such a package and play served it
/// (ffmpeg: "corrupt decoded frame"); now verify names the init section and play refuses its segments.
struct InconsistentEncryptionTests {
    static let shaka = DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/media/shaka")

    @Test("SAMPLE-AES segments under a clear init section: verify --deep says so, play answers unsupported_encryption")
    func sampleEncryptedSegmentsUnderAClearInitSection() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let source = fixture.originRoot.appendingPathComponent("mixed")
        try FileManager.default.copyItem(at: Self.shaka.appendingPathComponent("fmp4-cbcs"), to: source)
        try FileManager.default.removeItem(at: source.appendingPathComponent("video_init.mp4"))
        try FileManager.default.copyItem(
            at: Self.shaka.appendingPathComponent("fmp4-clear/video_init.mp4"),
            to: source.appendingPathComponent("video_init.mp4")
        )
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let manifest = try await fixture.withServers { origin, _ in
            try await library.download(DownloadRequest(url: origin.appendingPathComponent("mixed/master.m3u8").absoluteString, assetId: "mixed"))
                .result()
        }
        let video = try #require(manifest.renditions.first { $0.kind == .video })
        let initPath = try #require(video.initSections.first?.path)

        let report = try await library.verify(assetId: "mixed", options: .init(deep: true))
        #expect(!report.isPlayable)
        let problem = try #require(report.problems.first { $0.path == initPath }, "\(report.problems.map(\.message))")
        #expect(problem.code == .decryptionFailed && problem.cause == "unsupported_encryption")
        #expect(problem.message.contains("protects no track"), "\(problem.message)")
        // The audio rendition, whose init section is Shaka's protected one, has no problem.
        #expect(report.problems.allSatisfy { $0.rendition == video.id }, "\(report.problems.map(\.message))")

        let playback = try await library.play(assetId: "mixed", online: false)
        let segment = try #require(video.segments.first?.file?.path)
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let status: UInt
        do {
            let response = try await http.execute(
                HTTPClientRequest(url: playback.address.sessionURL.appendingPathComponent(segment).absoluteString),
                timeout: .seconds(60)
            )
            status = response.status.code
            _ = try await response.body.collect(upTo: 1 << 22)
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            await playback.stop()
            throw error
        }
        await playback.stop()
        await library.close()
        #expect(status >= 400, "the segment was served (\(status))")
        let package = try PackageDirectory(assetId: "mixed", in: fixture.clientDirectory)
        let errors = (try? String(contentsOf: package.errorLogURL, encoding: .utf8)) ?? ""
        #expect(errors.contains("unsupported_encryption") && errors.contains("protects%20no%20track"), "\(errors)")
    }
}

/// The key store failing under a library already open: a row of `stowage.sqlite` written over by hand (a value of the
/// wrong type) after the library opened it. Play refuses with key_store_unavailable, saying the file is damaged and
/// what to do, and serves nothing.
struct KeyStoreUnderPlaybackTests {
    @Test("a lease row damaged after the library opened the store: play says key_store_unavailable with the damage in words")
    func damagedAfterOpening() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        try await fixture.withServers { origin, keyServer in
            let request = DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                selection: MediaSelectionOptions(subtitles: .none),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token()
            )
            _ = try await library.download(request).result()
        }
        let database = fixture.clientDirectory.url.appendingPathComponent("stowage.sqlite").path
        let edit = try await ProcessRunner.run(program: "sqlite3", [database, "UPDATE key_leases SET state = X'FF00'"])
        #expect(edit.status == 0, "\(String(decoding: edit.standardError, as: UTF8.self))")
        let error = await #expect(throws: PlaybackError.self) { _ = try await library.play(assetId: fixture.assetId, online: false) }
        #expect(error?.code == "key_store_unavailable")
        #expect(error?.message.contains("damaged") == true && error?.message.contains("stowage recover") == true, "\(error?.message ?? "")")
        await library.close()
    }
}
