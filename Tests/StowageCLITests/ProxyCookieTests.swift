import DownloadTestSupport
import Foundation
import OfflinePackage
import OriginServer
import StowageTestSupport
import Testing

/// The HTTP habits users bring from yt-dlp and N_m3u8DL-RE: a proxy (`--proxy`, or `HTTP_PROXY` and `NO_PROXY`), a
/// Netscape cookie file, a user agent and a referer, through a `CONNECT` proxy (what AsyncHTTPClient speaks
/// for http and https alike) that alone knows the origin's host name.
@Suite("stowage download through a proxy, with a cookie file, a user agent and a referer")
struct ProxyCookieTests {
    /// A host name that never resolves (RFC 6761 reserves `.test`): only the proxy, which sends every request to the
    /// origin, reaches it.
    static let originHost = "origin.stowage.test"

    @Test("the origin is reached only through the proxy, with the cookies its lines name; the key server in NO_PROXY directly")
    func proxyAndCookies() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let work = fixture.root.appendingPathComponent("forward", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let cookies = work.appendingPathComponent("cookies.txt")
        let nextYear = Int(Date().timeIntervalSince1970) + 365 * 86_400
        try """
        # Netscape HTTP Cookie File
        # test material: made-up values
        \(Self.originHost)\tFALSE\t/\tFALSE\t\(nextYear)\tsession\ts3cr3t
        .stowage.test\tTRUE\t/\tFALSE\t0\tlang\ten
        #HttpOnly_\(Self.originHost)\tFALSE\t/demo-1\tFALSE\t0\tpathcookie\tp1
        \(Self.originHost)\tFALSE\t/elsewhere\tFALSE\t0\twrongpath\tw
        \(Self.originHost)\tFALSE\t/\tTRUE\t0\tsecurecookie\tx
        \(Self.originHost)\tFALSE\t/\tFALSE\t1000000000\texpired\told
        other.example\tTRUE\t/\tFALSE\t0\tother\tleak

        """.write(to: cookies, atomically: true, encoding: .utf8)
        let log = OriginRequestLog()
        try await fixture.withServers(log: log) { origin, keyServer in
            let proxy = try ConnectProxy(hosts: [Self.originHost: "127.0.0.1"])
            defer { proxy.stop() }
            try await Self.exercise(fixture, proxy: proxy, log: log, origin: origin, keyServer: keyServer, cookies: cookies.path)
        }
    }

    static func exercise(
        _ fixture: DownloadFixture,
        proxy: ConnectProxy,
        log: OriginRequestLog,
        origin: URL,
        keyServer: URL,
        cookies: String
    ) async throws {
        let token = try await fixture.token()
        let source = fixture.sourceURL(origin).replacingOccurrences(of: "127.0.0.1", with: originHost)
        #expect(source.contains(originHost))
        // The token goes in STOWAGE_TOKEN.
        let common = ["--subtitles", "none", "--key-server", keyServer.absoluteString]
        let agent = "Mozilla/5.0 (X11; Linux x86_64) StowageTest/1"
        let referer = "https://site.stowage.test/watch/demo"
        let originTarget = "\(originHost):\(origin.port ?? 0)"

        // --proxy, with NO_PROXY keeping the key server (on 127.0.0.1) direct.
        let download = try await LibraryCommandTests.run(
            ["download", source, "--cookies", cookies, "--user-agent", agent, "--referer", referer, "--proxy", proxy.url] + common,
            home: fixture.clientDirectory.url,
            environment: ["NO_PROXY": "localhost,127.0.0.1"],
            token: token
        )
        #expect(download.status == 0, "\(download.output)")
        let manifest = try fixture.package.readManifest()
        #expect(manifest.isComplete)
        #expect(manifest.files.allSatisfy { $0.sourceURL.contains(originHost) })
        let verify = try await LibraryCommandTests.run(["verify", fixture.assetId, "--deep"], home: fixture.clientDirectory.url)
        #expect(verify.status == 0, "\(verify.output)")

        // Every tunnel went to the origin's name (which resolves nowhere but in the proxy); none to the key server.
        #expect(!proxy.targets.isEmpty && proxy.targets.allSatisfy { $0 == originTarget }, "\(proxy.targets)")
        let served = log.entries.filter { $0.status == 200 || $0.status == 206 }
        #expect(served.count >= manifest.files.count + 1, "\(served.count) requests for \(manifest.files.count) files")
        for entry in served {
            #expect(entry.headers["host"] == originTarget, "\(entry)")
            // The cookies whose lines name the origin, and only those: not another host's, not a secure one over http,
            // not an expired one, not one for another path.
            let sent = Set((entry.headers["cookie"] ?? "").components(separatedBy: "; "))
            #expect(sent.isSuperset(of: ["session=s3cr3t", "lang=en"]), "\(entry)")
            #expect(sent.isDisjoint(with: ["other=leak", "securecookie=x", "expired=old", "wrongpath=w"]), "\(entry)")
            #expect(sent.contains("pathcookie=p1") == entry.path.hasPrefix("/demo-1/"), "\(entry)")
            #expect(entry.headers["user-agent"] == agent && entry.headers["referer"] == referer, "\(entry)")
        }

        // The environment alone (HTTP_PROXY for http URLs), into another data directory.
        let tunnels = proxy.targets.count
        log.reset()
        let second = fixture.root.appendingPathComponent("env-home", isDirectory: true)
        let viaEnvironment = try await LibraryCommandTests.run(
            ["download", source] + common,
            home: second,
            environment: ["HTTP_PROXY": proxy.url, "NO_PROXY": "127.0.0.1"],
            token: token
        )
        #expect(viaEnvironment.status == 0, "\(viaEnvironment.output)")
        #expect(proxy.targets.count > tunnels && proxy.targets.allSatisfy { $0 == originTarget }, "\(proxy.targets)")
        #expect(log.entries.filter { $0.status == 200 }.count >= manifest.files.count + 1)
        #expect(log.entries.allSatisfy { $0.headers["cookie"] == nil }, "cookies sent without --cookies")

        // A proxy that cannot be used and a file that is not a cookie file: refused before anything is fetched, saying
        // which variable or line.
        log.reset()
        let third = fixture.root.appendingPathComponent("refused-home", isDirectory: true)
        let badProxy = try await LibraryCommandTests.run(
            ["download", source] + common,
            home: third,
            environment: ["HTTP_PROXY": "ftp://127.0.0.1:21"],
            token: token
        )
        #expect(badProxy.status != 0 && badProxy.output.contains("[invalid_proxy]") && badProxy.output.contains("HTTP_PROXY"), "\(badProxy.output)")
        let notCookies = fixture.root.appendingPathComponent("cookies.json")
        try #"{"session": "s3cr3t"}"#.write(to: notCookies, atomically: true, encoding: .utf8)
        let badCookies = try await LibraryCommandTests.run(
            ["download", source, "--cookies", notCookies.path] + common,
            home: third,
            token: token
        )
        #expect(
            badCookies.status != 0 && badCookies.output.contains("[invalid_cookie_file]") && badCookies.output.contains("line 1"),
            "\(badCookies.output)"
        )
        #expect(!badCookies.output.contains("s3cr3t"), "a cookie value in an error message: \(badCookies.output)")
        #expect(log.entries.isEmpty, "a refused download reached the origin: \(log.entries)")
    }
}
