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

/// The players in Debian, for real, against the gate: mpv decodes from the middle (or, for fMP4, from the start) and
/// its frames are the clear twin's; VLC plays to the end and fetches every segment. `.ci/run` installs both.
@Suite(.timeLimit(.minutes(5)))
struct RealPlayerTests {
    static let cases: [PackageCase] = [
        PackageCase(fixture: "ts-clear/index.m3u8", method: .sampleAES),
        PackageCase(fixture: "fmp4-clear/index.m3u8", method: .sampleAES),
        PackageCase(fixture: "ts-clear/index.m3u8", method: .aes128, rotationPeriod: 1),
    ]

    @Test(arguments: cases)
    func mpvDecodesWhatTheClearTwinHolds(_ testCase: PackageCase) async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let clear = testCase.clear
        let package = try await testCase.make(in: root)
        // Debian's mpv 0.35 cannot seek into fMP4 HLS even on a clear copy ("Invalid NAL unit size").
        let mpvSeeks = testCase.isTransportStream
        let expected = try await DecodedFrames.of(clear, map: "0:v:0").map(Self.checksum)
        let output = root.appendingPathComponent("mpv.nut")
        let (result, _) = try await PlaybackHarness.withSession(package) { address in
            // mpv's encoding mode: it demuxes, seeks and decodes as it does to play, and writes the frames it decoded.
            try await ProcessRunner.run(
                program: "mpv",
                ["--no-config", "--really-quiet"] + (mpvSeeks ? ["--start=50%"] : [])
                    + [address.multivariantURL.absoluteString, "--o=\(output.path)", "--of=nut", "--ovc=rawvideo", "--oac=pcm_s16le"],
                timeout: .seconds(120)
            )
        }
        #expect(result.status == 0, "mpv: \(String(decoding: result.standardError, as: UTF8.self))")
        let decoded = try await Self.frames(of: output)
        if mpvSeeks {
            // From the middle to the end: the clear twin's last frames, in order.
            #expect(decoded.count >= expected.count / 3 && decoded.count < expected.count)
            #expect(decoded == Array(expected.suffix(decoded.count)))
        } else {
            #expect(decoded == expected)
        }
        #expect(PlaybackHarness.logLines(package.package.errorLogURL).isEmpty)
    }

    @Test(arguments: cases)
    func vlcPlaysToTheEnd(_ testCase: PackageCase) async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await testCase.make(in: root)
        let home = root.appendingPathComponent("vlc-home", isDirectory: true)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
        // VLC refuses to run as root; the suite may, so VLC runs as nobody then, the user the entry URL is for.
        var configuration = PlaybackServer.Configuration()
        if getuid() == 0 { configuration.playerUser = 65534 }
        let (result, _) = try await PlaybackHarness.withSession(package, configuration: configuration) { address in
            let vlc = [
                "cvlc", "--play-and-exit", "--no-video-title-show", "--vout", "dummy", "--aout", "dummy",
                address.multivariantURL.absoluteString,
            ]
            // VLC refuses to run as root; the suite may, so VLC runs as nobody then.
            let command =
                getuid() == 0
                ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME=\(home.path)"] + vlc
                : ["env", "HOME=\(home.path)"] + vlc
            return try await ProcessRunner.run(program: command[0], Array(command.dropFirst()), timeout: .seconds(120))
        }
        // VLC exits 0 even when it cannot open the input: what it fetched is the proof.
        #expect(result.status == 0)
        let access = PlaybackHarness.logLines(package.package.accessLogURL)
        let rendition = try #require(package.manifest.renditions.first)
        for path in rendition.initSections.map(\.path) + rendition.segments.compactMap(\.file?.path) {
            #expect(
                access.contains { $0.contains(" /\(path) ") && ($0.contains(" 200 ") || $0.contains(" 206 ")) },
                "VLC did not fetch \(path): \(String(decoding: result.standardError, as: UTF8.self).suffix(2_000))"
            )
        }
        #expect(PlaybackHarness.logLines(package.package.errorLogURL).isEmpty)
    }

    /// The MD5 of each decoded frame, from a `framemd5` line (`stream, dts, pts, duration, size, md5`): timestamps
    /// differ between a seeking player's output and the source.
    static func checksum(_ line: String) -> String {
        String(line.split(separator: ",").last ?? "").trimmingCharacters(in: .whitespaces)
    }

    static func frames(of file: URL) async throws -> [String] {
        let list = file.deletingLastPathComponent().appendingPathComponent("frames.txt")
        let result = try await ProcessRunner.run(
            program: "ffmpeg",
            ["-nostdin", "-v", "error", "-i", file.path, "-map", "0:v:0", "-f", "framemd5", "-y", list.path]
        )
        guard result.status == 0 else { return [] }
        return try String(contentsOf: list, encoding: .utf8).split(separator: "\n").filter { !$0.hasPrefix("#") }.map { checksum(String($0)) }
    }
}
