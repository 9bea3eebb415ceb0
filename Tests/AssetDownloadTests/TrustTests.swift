import AssetDownload
import AsyncHTTPClient
import DownloadTestSupport
import Foundation
import Hummingbird
import KeyDelivery
import Logging
import NIOCore
import NIOHTTP1
import OfflinePackage
import ServiceLifecycle
import StowageCore
import StowageTestSupport
import Synchronization
import Testing

/// A hostile playlist gets nothing it should not (docs/SECURITY.md, "Client: whom to trust"): no bearer token for a key
/// server it names on another host, no pin written for it, no `--header` value for another host, no local file read.
@Suite("Whom a download trusts")
struct TrustTests {
    /// A server on 127.0.0.1 that records every request (the Host it was addressed to, its path and headers) and, when
    /// given an upstream, answers with what the upstream answers for the same path: "another host" for the origin.
    final class Recorder: Sendable {
        struct Seen: Sendable {
            var host: String
            var path: String
            var headers: [String: String]
        }

        private let seen = Mutex<[Seen]>([])
        var requests: [Seen] { seen.withLock { $0 } }

        func record(_ request: Request) {
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            seen.withLock { $0.append(Seen(host: request.head.authority ?? headers["host"] ?? "", path: request.uri.path, headers: headers)) }
        }

        /// Runs while `body` runs with the recorder's port.
        func serve<T: Sendable>(upstream: URL?, _ body: @Sendable (Int) async throws -> T) async throws -> T {
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            let router = Router()
            router.get("**") { [self] request, _ -> Response in
                record(request)
                guard let upstream else { return Response(status: .notFound) }
                let response = try await http.execute(HTTPClientRequest(url: upstream.absoluteString + request.uri.path), timeout: .seconds(10))
                let bytes = try await response.body.collect(upTo: 16 << 20)
                return Response(status: .init(code: Int(response.status.code)), body: .init(byteBuffer: bytes))
            }
            router.post("**") { [self] request, _ -> Response in
                record(request)
                return Response(status: .notFound)
            }
            let result: Result<T, any Error>
            do {
                result = .success(try await withLoopbackServer(router, body))
            } catch {
                result = .failure(error)
            }
            try await http.shutdown()
            return try result.get()
        }
    }

    /// Writes `name` beside the packaged master playlist of `asset` (the fixture's by default): the master's text with
    /// `replacing` applied and `extra` lines added.
    static func writeMaster(
        _ fixture: DownloadFixture,
        asset: String? = nil,
        name: String,
        adding extra: [String] = [],
        replacing: [(String, String)] = []
    ) throws {
        let folder = fixture.originRoot.appendingPathComponent(asset ?? fixture.assetId)
        var text = try String(contentsOf: folder.appendingPathComponent("master.m3u8"), encoding: .utf8)
        for (old, new) in replacing { text = text.replacingOccurrences(of: old, with: new) }
        text += extra.map { $0 + "\n" }.joined()
        try Data(text.utf8).write(to: folder.appendingPathComponent(name))
    }

    static func download(_ fixture: DownloadFixture, _ request: DownloadRequest) async throws -> Result<PackageManifest, any Error> {
        let session = try fixture.session()
        let result = await DownloadFixture.run(try session.start(request)).result
        try await session.shutdown()
        return result
    }

    static let audioOnly = MediaSelectionOptions(audio: .defaults, subtitles: .none)

    @Test("a key server advertised on another host gets no token and no pin; the error names the flag")
    func untrustedAdvertisedKeyServer() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let recorder = Recorder()
        try await fixture.withServers { origin, _ in
            try await recorder.serve(upstream: nil) { port in
                let advertised = "http://localhost:\(port)"
                try Self.writeMaster(
                    fixture,
                    name: "advertising.m3u8",
                    adding: [#"#EXT-X-SESSION-DATA:DATA-ID="com.stowage.key-server",VALUE="\#(advertised)""#]
                )
                let request = DownloadRequest(
                    url: origin.appendingPathComponent("\(fixture.assetId)/advertising.m3u8").absoluteString,
                    assetId: fixture.assetId,
                    selection: Self.audioOnly,
                    token: try await fixture.token()
                )
                let result = try await Self.download(fixture, request)
                guard case .failure(let error as DownloadError) = result else {
                    Issue.record("the download was not refused: \(result)")
                    return
                }
                #expect(error.code == "untrusted_key_server")
                #expect(error.description.contains("--trust-key-server \(advertised)"))
                #expect(recorder.requests.isEmpty, "\(recorder.requests.map(\.path))")
                let client = fixture.clientDirectory.url
                #expect(!FileManager.default.fileExists(atPath: client.appendingPathComponent(KeyStore.pinsFileName).path))
            }
        }
    }

    @Test("a key server on the playlist's own loopback host, or one the user trusts, is used without --key-server")
    func trustedAdvertisedKeyServers() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            // Same host as the playlist (127.0.0.1), plain http on loopback.
            try Self.writeMaster(
                fixture,
                name: "same-host.m3u8",
                adding: [#"#EXT-X-SESSION-DATA:DATA-ID="com.stowage.key-server",VALUE="\#(keyServer.absoluteString)""#]
            )
            let sameHost = DownloadRequest(
                url: origin.appendingPathComponent("\(fixture.assetId)/same-host.m3u8").absoluteString,
                assetId: fixture.assetId,
                selection: Self.audioOnly,
                token: try await fixture.token()
            )
            let manifest = try await Self.download(fixture, sameHost).get()
            #expect(manifest.isComplete)
            let store = try KeyStore(dataDirectory: fixture.clientDirectory.url, clock: SystemClock())
            #expect(try store.leases().map(\.keyServer) == [KeyServerURL.normalized(keyServer)])

            // Another host name for the same server: used once the user trusts it, for one download or in the data
            // directory's list.
            let elsewhere = "http://localhost:\(keyServer.port ?? 0)"
            for (asset, perDownload) in [("second", true), ("third", false)] {
                try await fixture.addAsset(asset)
                try Self.writeMaster(
                    fixture,
                    asset: asset,
                    name: "elsewhere.m3u8",
                    adding: [#"#EXT-X-SESSION-DATA:DATA-ID="com.stowage.key-server",VALUE="\#(elsewhere)""#]
                )
                if !perDownload { try TrustedKeyServers.update(URL(string: elsewhere)!, in: fixture.clientDirectory.url) }
                let trusted = DownloadRequest(
                    url: origin.appendingPathComponent("\(asset)/elsewhere.m3u8").absoluteString,
                    assetId: asset,
                    selection: Self.audioOnly,
                    trustedKeyServers: perDownload ? [elsewhere] : [],
                    token: try await fixture.token()
                )
                #expect(try await Self.download(fixture, trusted).get().isComplete, "\(asset)")
            }
        }
    }

    @Test("--header values reach the playlist's host only, unless --header-host names another")
    func headersAreScopedToHosts() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let recorder = Recorder()
        try await fixture.withServers { origin, keyServer in
            try await recorder.serve(upstream: origin) { port in
                // The master is fetched from 127.0.0.1; everything it names lives on "another host", localhost.
                try await fixture.addAsset("again")
                for asset in [fixture.assetId, "again"] {
                    let elsewhere = "http://localhost:\(port)/\(asset)/"
                    try Self.writeMaster(
                        fixture,
                        asset: asset,
                        name: "split.m3u8",
                        replacing: [("URI=\"", "URI=\"\(elsewhere)"), ("\nvideo/", "\n\(elsewhere)video/")]
                    )
                }
                let secret = ("x-stowage-test-secret", "s3cr3t")
                var request = DownloadRequest(
                    url: "http://127.0.0.1:\(port)/\(fixture.assetId)/split.m3u8",
                    assetId: fixture.assetId,
                    selection: Self.audioOnly,
                    headers: [secret],
                    keyServerURL: keyServer.absoluteString,
                    token: try await fixture.token()
                )
                #expect(try await Self.download(fixture, request).get().isComplete)
                let seen = recorder.requests
                let local = seen.filter { $0.host.hasPrefix("127.0.0.1") }
                let remote = seen.filter { $0.host.hasPrefix("localhost") }
                #expect(local.count == 1 && remote.count > 5, "\(seen.map { "\($0.host)\($0.path)" })")
                #expect(local.allSatisfy { $0.headers[secret.0] == secret.1 })
                #expect(remote.allSatisfy { $0.headers[secret.0] == nil })
                // Named with --header-host, localhost gets them too.
                request.url = "http://127.0.0.1:\(port)/again/split.m3u8"
                request.assetId = "again"
                request.headerHosts = ["localhost"]
                #expect(try await Self.download(fixture, request).get().isComplete)
                let again = recorder.requests.dropFirst(seen.count)
                #expect(!again.isEmpty && again.allSatisfy { $0.headers[secret.0] == secret.1 })
            }
        }
    }

    @Test("a remote playlist naming file: URIs is refused at once, nothing read", arguments: ["file:///etc/passwd", "file:///dev/zero"])
    func remotePlaylistsNeverReadLocalFiles(_ uri: String) async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            try Self.writeMaster(fixture, name: "local.m3u8", replacing: [("\nvideo/180p/index.m3u8", "\n\(uri)")])
            let request = DownloadRequest(
                url: origin.appendingPathComponent("\(fixture.assetId)/local.m3u8").absoluteString,
                assetId: fixture.assetId,
                selection: MediaSelectionOptions(variant: .bitrate(minimum: nil, maximum: 400_000), audio: .none, subtitles: .none),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token()
            )
            let started = ContinuousClock.now
            let result = try await Self.download(fixture, request)
            guard case .failure(let error as DownloadError) = result else {
                Issue.record("not refused: \(result)")
                return
            }
            #expect(error.code == "unsupported_uri")
            #expect(error.description.contains(uri))
            // Reading /dev/zero up to the playlist size limit would take a while; a refusal takes no time.
            #expect(ContinuousClock.now - started < .seconds(10))
            #expect(!FileManager.default.fileExists(atPath: fixture.package.url.appendingPathComponent("video").path))
        }
    }

    /// Loopback is the loopback interface and nothing that might resolve elsewhere: a token in clear HTTP to any other
    /// host is readable on the network.
    @Test(
        "what counts as loopback",
        arguments: [
            ("127.0.0.1", true), ("127.1.2.3", true), ("127.255.255.254", true), ("127.000.000.001", true), ("localhost", true),
            ("LOCALHOST", true), ("::1", true), ("[::1]", true),
            ("10.0.0.1", false), ("128.0.0.1", false), ("192.168.1.1", false), ("126.0.0.1", false), ("0.0.0.0", false),
            ("1.2.3.4", false), ("127.0.0.256", false), ("127.0.0", false), ("127.0.0.1.", false), ("127.0.0.+1", false),
            ("127.1", false), ("2130706433", false), ("0177.0.0.1", false), ("[::ffff:127.0.0.1]", false),
            ("keys.localhost", false), ("localhost.example.com", false), ("127.0.0.1.nip.io", false), ("localhost.", false),
        ]
    )
    func loopbackHosts(host: String, loopback: Bool) throws {
        #expect(KeyServerURL.isLoopback(host: host) == loopback)
        // The same through the trust rule a token obeys.
        let url = try #require(URL(string: "http://\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host):8443"))
        let trust = try KeyServerTrust()
        if loopback {
            #expect(try trust.choose(explicit: url, advertised: nil, playlistURL: nil) != nil)
        } else {
            let refused = #expect(throws: KeySessionError.self) { try trust.choose(explicit: url, advertised: nil, playlistURL: nil) }
            #expect(refused?.code == "insecure_key_server", "\(host)")
        }
    }

    @Test("plain http key servers only on loopback")
    func plainHTTPOnlyOnLoopback() throws {
        let trust = try KeyServerTrust()
        let insecure = #expect(throws: KeySessionError.self) {
            try trust.choose(explicit: URL(string: "http://keys.example.com"), advertised: nil, playlistURL: nil)
        }
        #expect(insecure?.code == "insecure_key_server")
        #expect(try trust.choose(explicit: URL(string: "http://127.0.0.1:8443"), advertised: nil, playlistURL: nil) != nil)
        #expect(try trust.choose(explicit: URL(string: "http://[::1]:8443"), advertised: nil, playlistURL: nil) != nil)
        // Advertised on the playlist's own host, but in the clear over the network.
        let clear = #expect(throws: KeySessionError.self) {
            try trust.choose(
                explicit: nil,
                advertised: URL(string: "http://cdn.example.com/keys"),
                playlistURL: URL(string: "https://cdn.example.com/master.m3u8")
            )
        }
        #expect(clear?.code == "untrusted_key_server")
        #expect(
            try trust.choose(
                explicit: nil,
                advertised: URL(string: "https://cdn.example.com/keys"),
                playlistURL: URL(string: "https://CDN.example.com/master.m3u8")
            ) != nil
        )
        #expect(throws: KeySessionError.self) { try KeyServerTrust(configured: ["http://keys.example.com"]) }
    }
}
