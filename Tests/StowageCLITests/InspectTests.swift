import AssetDownload
import AsyncHTTPClient
import Foundation
import HLS
import Hummingbird
import Logging
import NIOCore
import StowageCore
import StowageTestSupport
import Testing

struct InspectTests {
    private static let playlists = TestSupport.fixtures.appendingPathComponent("playlists")

    @Test func deepInspectionOverLoopbackLoadsEveryMediaPlaylist() async throws {
        try await TestSupport.withOrigin(root: Self.playlists) { base in
            let inspection = try await TestSupport.inspect(base.absoluteString + "/master.m3u8", deep: true)
            guard case .multivariant(let master) = inspection.playlist else {
                Issue.record("expected a multivariant playlist")
                return
            }
            #expect(master.variants.map(\.bandwidth) == [400_000, 900_000])
            let media = try #require(inspection.mediaPlaylists)
            #expect(media.map(\.role) == ["variant", "variant", "audio", "audio", "subtitles", "iframe"])
            #expect(media.allSatisfy { $0.error == nil && $0.playlist != nil })
            let video = try #require(media.first?.resolvedSegments)
            #expect(video.count == 4)
            #expect(video[2].url?.absoluteString == base.absoluteString + "/video_180_2.ts")
            #expect(video[2].keys.first?.uri == "skd://demo-movie/101112131415161718191a1b1c1d1e1f")
            #expect(video[3].startTime == 12)
            let iframes = try #require(media.last?.resolvedSegments)
            #expect(iframes[1].byteRange == ResolvedByteRange(offset: 752, length: 1504))
        }
    }

    @Test("inspect reads a playlist as players do and lists each deviation; --strict refuses it as a validator does")
    func lenientAndStrict() async throws {
        let path = Self.playlists.appendingPathComponent("lenient/float-bandwidth.m3u8").path
        let lenient = try await TestSupport.runStowage(["inspect", path])
        #expect(lenient.status == 0, "\(lenient.standardError)")
        #expect(lenient.standardOutput.contains("Warnings (2):"))
        #expect(lenient.standardOutput.contains("line 2: BANDWIDTH should be a decimal integer; read BANDWIDTH=800000.0 as 800000"))
        let strict = try await TestSupport.runStowage(["inspect", "--strict", path])
        #expect(strict.status == 1)
        #expect(strict.standardError.contains("line 2: attribute BANDWIDTH: expected a decimal integer, found 800000.0"))
        #expect(strict.standardError.contains("[invalid_attribute_value]"))
        let json = try await TestSupport.runStowage(["inspect", "--json", path])
        #expect(json.standardOutput.contains("\"warnings\""))
    }

    /// A hostile playlist's attributes carry terminal escape sequences (retitle the window, clear the screen, fake a
    /// message): inspect shows them as `\uXXXX`, in its summary, its errors and its JSON, and never writes them raw.
    @Test("escape sequences in a playlist's names never reach the terminal raw")
    func escapeSequencesAreShownNotObeyed() async throws {
        let folder = try TestSupport.temporaryDirectory("escapes")
        defer { try? FileManager.default.removeItem(at: folder) }
        let attack = "\u{1b}]0;PWNED\u{07}\u{1b}[2J\u{1b}[1;31mLEASE EXTENDED\u{1b}[0m\u{9b}2J\u{202e}"
        let playlist = folder.appendingPathComponent("master.m3u8")
        try Data(
            """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="\(attack)",LANGUAGE="en",URI="audio.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=800000.0,AUDIO="a"
            video.m3u8

            """.utf8
        ).write(to: playlist)
        for arguments in [["inspect", playlist.path], ["inspect", "--json", playlist.path], ["inspect", "--strict", playlist.path]] {
            let result = try await TestSupport.runStowage(arguments)
            let written = result.standardOutput + result.standardError
            #expect(!written.unicodeScalars.contains { [0x1b, 0x07, 0x9b, 0x202e].contains($0.value) }, "\(arguments): \(written)")
            if arguments.count == 2 { #expect(written.contains("\\u001b]0;PWNED\\u0007"), "\(written)") }
        }
    }

    @Test func relativeURIsResolveAgainstTheURLAfterRedirects() async throws {
        let router = Router()
        router.get("moved/master.m3u8") { _, _ -> Response in
            Response(status: .found, headers: [.location: "/playlists/master.m3u8"])
        }
        router.add(middleware: FileMiddleware(TestSupport.fixtures.path, searchForIndexHtml: false))
        try await withLoopbackServer(router) { port in try await Self.inspectAfterRedirects(port: port) }
    }

    static func inspectAfterRedirects(port: Int) async throws {
        let inspection = try await TestSupport.inspect("http://127.0.0.1:\(port)/moved/master.m3u8", deep: true)
        #expect(inspection.url.path == "/playlists/master.m3u8")
        let media = try #require(inspection.mediaPlaylists)
        #expect(media.count == 6)
        #expect(media.allSatisfy { $0.error == nil })
        #expect(media.first?.url?.path == "/playlists/video_180.m3u8")
    }

    @Test func aMissingMediaPlaylistIsReportedNotFatal() async throws {
        let root = try TestSupport.temporaryDirectory("inspect")
        defer { try? FileManager.default.removeItem(at: root) }
        try """
        #EXTM3U
        #EXT-X-STREAM-INF:BANDWIDTH=1000
        present.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2000
        absent.m3u8
        """.write(to: root.appendingPathComponent("master.m3u8"), atomically: true, encoding: .utf8)
        try "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\na.ts\n#EXT-X-ENDLIST\n"
            .write(to: root.appendingPathComponent("present.m3u8"), atomically: true, encoding: .utf8)
        try await TestSupport.withOrigin(root: root) { base in
            let media = try #require(try await TestSupport.inspect(base.absoluteString + "/master.m3u8", deep: true).mediaPlaylists)
            #expect(media[0].error == nil)
            #expect(media[1].error?.contains("HTTP 404") == true)
            // Inspected by itself, the missing playlist is the command's error, with its own code.
            var caught: PlaylistLoadError?
            do { _ = try await TestSupport.inspect(base.absoluteString + "/absent.m3u8", deep: false) } catch let error as PlaylistLoadError {
                caught = error
            }
            #expect(caught?.code == "playlist_http_status", "\(String(describing: caught))")
        }
    }

    @Test func anInvalidPlaylistOverHTTPIsATypedErrorWithTheLine() async throws {
        let root = try TestSupport.temporaryDirectory("inspect-bad")
        defer { try? FileManager.default.removeItem(at: root) }
        try "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:URI=\"k\"\n#EXTINF:2,\na.ts\n"
            .write(to: root.appendingPathComponent("bad.m3u8"), atomically: true, encoding: .utf8)
        try await TestSupport.withOrigin(root: root) { base in
            var caught: PlaylistLoadError?
            do { _ = try await TestSupport.inspect(base.absoluteString + "/bad.m3u8", deep: false) } catch let error as PlaylistLoadError {
                caught = error
            }
            guard case .invalidPlaylist(_, let error) = try #require(caught) else {
                Issue.record("expected invalidPlaylist, got \(String(describing: caught))")
                return
            }
            #expect(error.code == "missing_attribute")
            #expect(error.line == 3)
        }
    }
}
