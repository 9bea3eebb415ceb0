import AssetDownload
import DownloadTestSupport
import Foundation
import OfflinePackage
import Playback
import StowageLibrary
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Byte-range packages played by the players in Debian: a Shaka Packager output (SAMPLE-AES TS, cbcs fMP4) laid out
/// as a single file per stream with EXT-X-BYTERANGE (and a MAP range), the way single-file packagers write it,
/// downloaded from the origin and played through the gate by ffmpeg (frames equal the clear twin's), mpv (from the
/// middle for TS; Debian's mpv cannot seek fMP4 HLS) and VLC (to the end, every file fetched).
@Suite("Byte-range packages in real players", .timeLimit(.minutes(5)))
struct ByteRangePlaybackTests {
    struct Case: Sendable, CustomTestStringConvertible {
        /// Under Fixtures/media/shaka.
        var encrypted: String
        var clear: String
        var isTransportStream: Bool { encrypted.hasPrefix("ts-") }
        var testDescription: String { "\(encrypted) as one file per stream" }
    }

    static let shaka = DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/media/shaka")
    static let cases = [Case(encrypted: "ts-sample-aes-aac", clear: "ts-clear-aac"), Case(encrypted: "fmp4-cbcs", clear: "fmp4-clear")]

    /// Copies the Shaka output in `directory` to `target`, each media playlist's init section and segments joined into
    /// one file (`video.ts`, `audio.mp4`, ...) that the playlist addresses with byte ranges. Keys and the multivariant
    /// playlist are copied as they are.
    static func singleFile(from directory: URL, to target: URL) throws {
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            let source = directory.appendingPathComponent(name)
            if name.hasSuffix(".key") || name == "master.m3u8" {
                try FileManager.default.copyItem(at: source, to: target.appendingPathComponent(name))
                continue
            }
            guard name.hasSuffix(".m3u8") else { continue }
            let stem = String(name.dropLast(".m3u8".count))
            var joined = Data()
            var single = ""
            var lines: [String] = []
            for line in try String(contentsOf: source, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
                if line.hasPrefix("#EXT-X-MAP:URI=\"") {
                    let uri = String(line.dropFirst("#EXT-X-MAP:URI=\"".count).prefix { $0 != "\"" })
                    single = "\(stem).\((uri as NSString).pathExtension)"
                    let bytes = try Data(contentsOf: directory.appendingPathComponent(uri))
                    lines.append("#EXT-X-MAP:URI=\"\(single)\",BYTERANGE=\"\(bytes.count)@\(joined.count)\"")
                    joined.append(bytes)
                } else if !line.isEmpty, !line.hasPrefix("#") {
                    if single.isEmpty { single = "\(stem).\((line as NSString).pathExtension)" }
                    let bytes = try Data(contentsOf: directory.appendingPathComponent(line))
                    lines += ["#EXT-X-BYTERANGE:\(bytes.count)@\(joined.count)", single]
                    joined.append(bytes)
                } else {
                    lines.append(line)
                }
            }
            try Data(lines.joined(separator: "\n").utf8).write(to: target.appendingPathComponent(name))
            try joined.write(to: target.appendingPathComponent(single))
        }
    }

    /// Downloads the single-file copy of `testCase` from the origin and runs `body` on a play session of it.
    static func withPlayback<T: Sendable>(
        _ testCase: Case,
        _ body: @Sendable (PlaybackHandle, PackageManifest, DownloadFixture) async throws -> T
    )
        async throws -> T
    {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try singleFile(from: shaka.appendingPathComponent(testCase.encrypted), to: fixture.originRoot.appendingPathComponent("single"))
        let library = try OfflineLibrary(dataDirectory: fixture.clientDirectory)
        let manifest = try await fixture.withServers { origin, _ in
            let request = DownloadRequest(url: origin.appendingPathComponent("single/master.m3u8").absoluteString, assetId: "single")
            return try await library.download(request).result()
        }
        #expect(manifest.isComplete)
        // Every file came from a range of one file per stream.
        #expect(manifest.files.allSatisfy { $0.byteRange != nil })
        #expect(Set(manifest.files.compactMap { URL(string: $0.sourceURL)?.lastPathComponent }).count == manifest.renditions.count)
        let playback = try await library.play(assetId: "single", online: false)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(playback, manifest, fixture))
        } catch {
            result = .failure(error)
        }
        await playback.stop()
        await library.close()
        return try result.get()
    }

    /// Decoded frames (`framemd5` checksums) of `input`'s first video stream: a playlist URL, or a local file.
    static func frames(_ input: String, hls: Bool = true) async throws -> [String] {
        let result = try await ProcessRunner.run(
            program: "ffmpeg",
            ["-nostdin", "-v", "error"] + (hls ? ["-allowed_extensions", "ALL"] : []) + ["-i", input, "-map", "0:v:0", "-f", "framemd5", "-"],
            timeout: .seconds(120)
        )
        #expect(result.status == 0, "ffmpeg \(input): \(String(decoding: result.standardError, as: UTF8.self))")
        return String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map {
            String($0.split(separator: ",").last ?? "").trimmingCharacters(in: .whitespaces)
        }
    }

    @Test("ffmpeg and mpv decode the clear twin's frames", arguments: cases)
    func ffmpegAndMPV(_ testCase: Case) async throws {
        let expected = try await Self.frames(Self.shaka.appendingPathComponent("\(testCase.clear)/master.m3u8").path)
        #expect(expected.count == 144)
        try await Self.withPlayback(testCase) { playback, _, fixture in
            let played = try await Self.frames(playback.address.sessionMultivariantURL.absoluteString)
            #expect(played == expected)

            // mpv's encoding mode demuxes, seeks and decodes as it does to play, and writes what it decoded.
            let output = fixture.root.appendingPathComponent("mpv.nut")
            let seeks = testCase.isTransportStream
            let mpv = try await ProcessRunner.run(
                program: "mpv",
                ["--no-config", "--really-quiet"] + (seeks ? ["--start=50%"] : [])
                    + [
                        playback.address.sessionMultivariantURL.absoluteString, "--o=\(output.path)", "--of=nut", "--ovc=rawvideo",
                        "--oac=pcm_s16le",
                    ],
                timeout: .seconds(120)
            )
            #expect(mpv.status == 0, "mpv: \(String(decoding: mpv.standardError, as: UTF8.self))")
            let decoded = try await Self.frames(output.path, hls: false)
            if seeks {
                #expect(decoded.count >= expected.count / 3 && decoded.count < expected.count, "mpv decoded \(decoded.count) frames")
                #expect(decoded == Array(expected.suffix(decoded.count)))
            } else {
                #expect(decoded == expected)
            }
            let package = try PackageDirectory(assetId: "single", in: fixture.clientDirectory)
            let errors = ((try? String(contentsOf: package.errorLogURL, encoding: .utf8)) ?? "").split(separator: "\n").filter { !$0.hasPrefix("#") }
            #expect(errors.isEmpty, "\(errors)")
        }
    }

    @Test("VLC plays to the end and fetches every file", arguments: cases)
    func vlc(_ testCase: Case) async throws {
        try await Self.withPlayback(testCase) { playback, manifest, fixture in
            let home = fixture.root.appendingPathComponent("vlc-home", isDirectory: true)
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
            let vlc = [
                "cvlc", "--play-and-exit", "--no-video-title-show", "--vout", "dummy", "--aout", "dummy",
                playback.address.sessionMultivariantURL.absoluteString,
            ]
            // VLC refuses to run as root; the suite may, so VLC runs as nobody then.
            let command =
                getuid() == 0
                ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME=\(home.path)"] + vlc
                : ["env", "HOME=\(home.path)"] + vlc
            let result = try await ProcessRunner.run(program: command[0], Array(command.dropFirst()), timeout: .seconds(120))
            // VLC exits 0 even when it cannot open the input: what it fetched is the proof.
            #expect(result.status == 0)
            let package = try PackageDirectory(assetId: "single", in: fixture.clientDirectory)
            let access = try String(contentsOf: package.accessLogURL, encoding: .utf8).split(separator: "\n")
            let video = try #require(manifest.renditions.first { $0.kind == .video })
            for path in video.initSections.map(\.path) + video.segments.compactMap(\.file?.path) {
                #expect(
                    access.contains { $0.contains(" /\(path) ") && ($0.contains(" 200 ") || $0.contains(" 206 ")) },
                    "VLC did not fetch \(path): \(String(decoding: result.standardError, as: UTF8.self).suffix(2_000))"
                )
            }
        }
    }
}
