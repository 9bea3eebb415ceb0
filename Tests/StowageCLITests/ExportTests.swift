import DownloadTestSupport
import Foundation
import KeyServer
import OfflinePackage
import StowageTestSupport
import Testing

/// `stowage export`: a package remuxed into one file by ffmpeg, checked against ffmpeg's remux of the clear source
/// (ffmpeg on files nobody here encrypted or decrypted); leased packages only when the key server's policy allows it.
@Suite("stowage export: identity-key packages freely, leased ones only under an exportAllowed policy")
struct ExportTests {
    /// ffmpeg's own remux of a clear playlist with the options `export` uses: the reference an export must equal.
    static func reference(_ playlist: URL, to output: URL, format: String, maps: [String] = ["0:v?", "0:a?"]) async throws {
        var arguments = ["-nostdin", "-v", "error", "-i", playlist.path] + maps.flatMap { ["-map", $0] } + ["-c", "copy"]
        if format == "mp4" { arguments += ["-movflags", "+faststart"] }
        let result = try await ProcessRunner.run(program: "ffmpeg", arguments + ["-f", format, "-y", output.path])
        guard result.status == 0 else { throw FrameHashes.Failure(description: String(decoding: result.standardError, as: UTF8.self)) }
    }

    /// Size and MD5 of each packet (the last two framemd5 columns) of one stream.
    static func packets(_ file: URL, map: String) async throws -> [String] {
        try await FrameHashes.of(file, map: map).map {
            $0.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ",")
        }
    }

    @Test("an AES-128 package (openssl-encrypted, key over HTTP) exports to MP4 whose packets equal the clear twin's")
    func identityKeyPackage() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let media = TestSupport.fixtures.appendingPathComponent("media")
        try FileManager.default.copyItem(at: media.appendingPathComponent("ts-aes128-iv"), to: fixture.originRoot.appendingPathComponent("aes"))
        let work = fixture.root.appendingPathComponent("export", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let home = fixture.clientDirectory.url
        try await fixture.withServers { origin, _ in
            let download = try await LibraryCommandTests.run(
                ["download", origin.appendingPathComponent("aes/index.m3u8").absoluteString, "--asset-id", "aes-1"],
                home: home
            )
            #expect(download.status == 0, "\(download.output)")
        }
        // Offline from here: the servers are gone.
        let exported = work.appendingPathComponent("aes-1.mp4")
        let export = try await LibraryCommandTests.run(["export", "aes-1", "--out", exported.path, "--json"], home: home)
        #expect(export.status == 0, "\(export.output)")
        #expect(export.output.contains(#""format":"mp4""#), "\(export.output)")
        let twin = work.appendingPathComponent("twin.mp4")
        try await Self.reference(media.appendingPathComponent("ts-clear/index.m3u8"), to: twin, format: "mp4")
        for map in ["0:v:0", "0:a:0"] {
            let ours = try await FrameHashes.of(exported, map: map)
            let theirs = try await FrameHashes.of(twin, map: map)
            #expect(!ours.isEmpty && ours == theirs, "\(map): \(ours.count) packets against the twin's \(theirs.count)")
        }
        #expect(try await FrameHashes.of(exported, map: "0:v:0").count == 144)
        #expect(try await FrameHashes.of(exported, map: "0:a:0").count == 278)

        // An existing file is not replaced without --overwrite; a name of another kind is refused; nothing half-written
        // is left beside the output.
        let again = try await LibraryCommandTests.run(["export", "aes-1", "--out", exported.path], home: home)
        #expect(again.status != 0 && again.output.contains("[export_exists]") && again.output.contains("--overwrite"), "\(again.output)")
        // Without ffmpeg the error says to install it, and nothing is left behind.
        let noFFmpeg = try await LibraryCommandTests.run(
            ["export", "aes-1", "--out", work.appendingPathComponent("none.mkv").path],
            home: home,
            environment: ["PATH": "/nonexistent-bin"]
        )
        #expect(
            noFFmpeg.status != 0 && noFFmpeg.output.contains("[export_failed]") && noFFmpeg.output.contains("apt install ffmpeg"),
            "\(noFFmpeg.output)"
        )
        let avi = try await LibraryCommandTests.run(["export", "aes-1", "--out", work.appendingPathComponent("x.avi").path], home: home)
        #expect(avi.status != 0 && avi.output.contains("[invalid_export_path]"), "\(avi.output)")
        let replaced = try await LibraryCommandTests.run(["export", "aes-1", "--out", exported.path, "--overwrite"], home: home)
        #expect(replaced.status == 0, "\(replaced.output)")
        let left = try FileManager.default.contentsOfDirectory(atPath: work.path).filter { $0.hasPrefix(".") }
        #expect(left.isEmpty, "\(left)")
    }

    @Test("a manifest edited to name another asset's keys does not borrow that asset's exportAllowed lease")
    func editedManifestBorrowsNoLease() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.addAsset("other")
        let home = fixture.clientDirectory.url
        let token = try await fixture.token()
        let exported = fixture.root.appendingPathComponent("other.mkv")
        // The fixture's asset is leased under a policy that allows export; then the owner withdraws it, and `other`
        // is leased without it.
        var configuration = try fixture.keyServer.loadConfiguration()
        configuration.policies[configuration.defaultPolicy]?.exportAllowed = true
        try fixture.keyServer.saveConfiguration(configuration)
        try await fixture.withServers { origin, keyServer in
            let allowed = try await LibraryCommandTests.run(
                ["download", fixture.sourceURL(origin), "--key-server", keyServer.absoluteString],
                home: home,
                token: token
            )
            #expect(allowed.status == 0, "\(allowed.output)")
        }
        configuration.policies[configuration.defaultPolicy]?.exportAllowed = false
        try fixture.keyServer.saveConfiguration(configuration)
        try await fixture.withServers { origin, keyServer in
            let refusedAsset = try await LibraryCommandTests.run(
                ["download", fixture.sourceURL(origin, asset: "other"), "--key-server", keyServer.absoluteString],
                home: home,
                token: token
            )
            #expect(refusedAsset.status == 0, "\(refusedAsset.output)")
        }
        // The lease a forger would borrow does allow export, for its own asset.
        let own = try await LibraryCommandTests.run(
            ["export", fixture.assetId, "--out", fixture.root.appendingPathComponent("own.mkv").path],
            home: home
        )
        #expect(own.status == 0, "\(own.output)")
        let refused = try await LibraryCommandTests.run(["export", "other", "--out", exported.path], home: home)
        #expect(refused.status != 0 && refused.output.contains("[export_not_allowed]"), "\(refused.output)")
        // A curious user points other's manifest at the fixture asset's keys (whose lease allows export).
        let allowedManifest = try JSONSerialization.jsonObject(with: Data(contentsOf: fixture.package.manifestURL)) as? [String: Any]
        let otherURL = try PackageDirectory(assetId: "other", in: fixture.clientDirectory).manifestURL
        var other = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: otherURL)) as? [String: Any])
        let keys = try #require(allowedManifest?["keys"])
        #expect(String(describing: keys) != String(describing: other["keys"] ?? ""))
        other["keys"] = keys
        try JSONSerialization.data(withJSONObject: other).write(to: otherURL)
        let borrowed = try await LibraryCommandTests.run(["export", "other", "--out", exported.path], home: home)
        #expect(borrowed.status != 0 && borrowed.output.contains("[export_not_allowed]"), "\(borrowed.output)")
        #expect(!FileManager.default.fileExists(atPath: exported.path))
    }

    @Test("an skd package is refused with export_not_allowed; after the policy allows it and a renewal, it exports to Matroska")
    func leasedPackage() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let work = fixture.root.appendingPathComponent("export", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let home = fixture.clientDirectory.url
        let token = try await fixture.token()
        let keyServerPort = try await fixture.withServers { origin, keyServer in
            let download = try await LibraryCommandTests.run(
                ["download", fixture.sourceURL(origin), "--audio", "en", "--subtitles", "en", "--key-server", keyServer.absoluteString],
                home: home,
                token: token
            )
            #expect(download.status == 0, "\(download.output)")
            return keyServer.port ?? 0
        }
        let exported = work.appendingPathComponent("demo.mkv")
        let refused = try await LibraryCommandTests.run(["export", fixture.assetId, "--out", exported.path], home: home)
        #expect(
            refused.status != 0 && refused.output.contains("[export_not_allowed]") && refused.output.contains("stowage play"),
            "\(refused.output)"
        )
        #expect(!FileManager.default.fileExists(atPath: exported.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.path).isEmpty)

        // A curious user writes exportAllowed into the stored lease payload with the sqlite3 shell: the server's
        // signature no longer verifies, so the lease's terms come from what was signed, and export is still refused.
        let database = home.appendingPathComponent("stowage.sqlite").path
        let stored = try await ProcessRunner.run(program: "sqlite3", [database, "SELECT payload FROM key_lease_payloads"])
        let signed = String(decoding: stored.standardOutput, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let payload = String(decoding: try #require(Data(base64Encoded: signed)), as: UTF8.self)
        #expect(payload.contains(#""lease":{"#) && !payload.contains("exportAllowed"))
        let forged = Data(payload.replacingOccurrences(of: #""lease":{"#, with: #""lease":{"exportAllowed":true,"#).utf8).base64EncodedString()
        let edit = try await ProcessRunner.run(program: "sqlite3", [database, "UPDATE key_lease_payloads SET payload = '\(forged)'"])
        #expect(edit.status == 0)
        let forgedExport = try await LibraryCommandTests.run(["export", fixture.assetId, "--out", exported.path], home: home)
        #expect(forgedExport.status != 0 && forgedExport.output.contains("[export_not_allowed]"), "\(forgedExport.output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.path).isEmpty)

        // The content owner allows export: the next lease the server signs says so.
        var configuration = try fixture.keyServer.loadConfiguration()
        configuration.policies[configuration.defaultPolicy]?.exportAllowed = true
        try fixture.keyServer.saveConfiguration(configuration)
        try await fixture.withServers(keyServerPort: keyServerPort) { _, _ in
            // The renewal also repairs the edited lease (a fresh signed payload replaces it).
            let renew = try await LibraryCommandTests.run(["keys", "renew", fixture.assetId], home: home, token: token)
            #expect(renew.status == 0, "\(renew.output)")
        }
        // An export that cannot run (no ffmpeg) fails before the gate: no first play is recorded, so a rental's
        // playback window has not started.
        let firstPlays = { try await ProcessRunner.run(program: "sqlite3", [database, "SELECT count(first_played_at) FROM key_leases"]) }
        let noFFmpeg = try await LibraryCommandTests.run(
            ["export", fixture.assetId, "--out", exported.path],
            home: home,
            environment: ["PATH": "/nonexistent-bin"]
        )
        #expect(noFFmpeg.status != 0 && noFFmpeg.output.contains("[export_failed]"), "\(noFFmpeg.output)")
        #expect(String(decoding: try await firstPlays().standardOutput, as: UTF8.self).hasPrefix("0"))
        let export = try await LibraryCommandTests.run(["export", fixture.assetId, "--out", exported.path], home: home)
        #expect(export.status == 0, "\(export.output)")
        // The export itself is a play.
        #expect(String(decoding: try await firstPlays().standardOutput, as: UTF8.self).hasPrefix("1"))
        let probe = try await ProcessRunner.run(
            program: "ffprobe",
            ["-v", "error", "-show_entries", "stream=codec_type", "-of", "csv=p=0", exported.path]
        )
        let kinds = String(decoding: probe.standardOutput, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(kinds == ["video", "audio", "subtitle"], "\(kinds)")
        // The subtitle track holds the English rendition's 8 cues, in sync with the video as X-TIMESTAMP-MAP says
        // (MPEGTS:126000 is the video's first timestamp, so each cue starts its LOCAL time after the first picture:
        // the first at 0.2 s, the fifth at 4.2 s), not early by the video's 1.4 s start as ffmpeg alone would put it.
        let srt = try await ProcessRunner.run(program: "ffmpeg", ["-nostdin", "-v", "error", "-i", exported.path, "-map", "0:s:0", "-f", "srt", "-"])
        let cues = String(decoding: srt.standardOutput, as: UTF8.self)
        let starts = cues.split(separator: "\n").filter { $0.contains(" --> ") }.compactMap { line -> Double? in
            let f = line.prefix(12).replacingOccurrences(of: ",", with: ".").split(separator: ":").compactMap { Double($0) }
            return f.count == 3 ? f[0] * 3600 + f[1] * 60 + f[2] : nil
        }
        #expect(starts.count == 8, "\(cues)")
        let videoStart = try await ProcessRunner.run(
            program: "ffprobe",
            ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=start_time", "-of", "csv=p=0", exported.path]
        )
        let video = Double(String(decoding: videoStart.standardOutput, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        if starts.count == 8 {
            #expect(abs(starts[0] - video - 0.2) < 0.002 && abs(starts[4] - video - 4.2) < 0.002, "video starts at \(video) s, cues at \(starts)")
        }
        #expect(cues.contains("Cue 6 of 8, segment 3"), "\(cues)")
        // The video, decrypted from SAMPLE-AES on the way, equals ffmpeg's remux of the clear source's top variant.
        let twin = work.appendingPathComponent("twin.mkv")
        try await Self.reference(
            TestSupport.fixtures.appendingPathComponent("demo/video/360p/index.m3u8"),
            to: twin,
            format: "matroska",
            maps: ["0:v"]
        )
        let ours = try await Self.packets(exported, map: "0:v:0")
        let theirs = try await Self.packets(twin, map: "0:v:0")
        #expect(!ours.isEmpty && ours == theirs, "\(ours.count) video packets against the twin's \(theirs.count)")
    }
}
