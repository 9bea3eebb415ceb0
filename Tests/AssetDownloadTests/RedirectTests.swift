import AssetDownload
import DownloadTestSupport
import Foundation
import Hummingbird
import Logging
import OfflinePackage
import OriginServer
import ServiceLifecycle
import StowageTestSupport
import Testing

@Suite("Redirects")
struct RedirectTests {
    /// Runs a server on 127.0.0.1 that answers every `/r/PATH` with a 302 to `target/PATH`, while `body` runs.
    static func withRedirector<T: Sendable>(to target: String, _ body: @Sendable (URL) async throws -> T) async throws -> T {
        let router = Router()
        router.get("r/**") { request, _ -> Response in
            let rest = request.uri.path.dropFirst("/r".count)
            return Response(status: .found, headers: [.location: target + rest])
        }
        return try await withLoopbackServer(router) { port in try await body(URL(string: "http://127.0.0.1:\(port)")!) }
    }

    @Test("a playlist redirected to another host resolves against where it ended up; files still land inside the package")
    func redirectToAnotherHost() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = OriginRequestLog()
        try await fixture.withServers(log: log) { origin, keyServer in
            // The origin under another host name: localhost instead of 127.0.0.1.
            let elsewhere = "http://localhost:\(origin.port ?? 0)"
            try await Self.withRedirector(to: elsewhere) { redirector in
                let session = try fixture.session()
                let request = DownloadRequest(
                    url: redirector.appendingPathComponent("r/\(fixture.assetId)/master.m3u8").absoluteString,
                    assetId: fixture.assetId,
                    selection: MediaSelectionOptions(audio: .defaults, subtitles: .none),
                    keyServerURL: keyServer.absoluteString,
                    token: try await fixture.token()
                )
                let manifest = try await DownloadFixture.run(try session.start(request)).result.get()
                try await session.shutdown()
                #expect(manifest.sourceURL.hasPrefix(elsewhere))
                #expect(manifest.files.allSatisfy { $0.sourceURL.hasPrefix(elsewhere) })
                #expect(manifest.files.allSatisfy { $0.path.hasPrefix("video/") || $0.path.hasPrefix("audio-en/") })
                let root = fixture.package.url.standardizedFileURL.path
                for file in manifest.files {
                    #expect(try fixture.package.url(forRelativePath: file.path).standardizedFileURL.path.hasPrefix(root + "/"))
                }
                // Byte for byte what the origin holds.
                for file in manifest.files {
                    let sourcePath = String(file.sourceURL.dropFirst(elsewhere.count))
                    let expected = try Data(contentsOf: fixture.originRoot.appendingPathComponent(sourcePath))
                    #expect(try Data(contentsOf: fixture.package.url(forRelativePath: file.path)) == expected)
                }
            }
        }
    }
}
