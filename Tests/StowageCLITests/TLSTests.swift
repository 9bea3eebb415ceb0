import DownloadTestSupport
import Foundation
import OfflinePackage
import StowageTestSupport
import Testing

/// HTTPS origins and key servers behind nginx with a certificate from a throwaway CA: trusted with `--ca-file` (or
/// `STOWAGE_CA_FILE`), refused with a clear error otherwise, and nothing half-downloaded reported complete.
@Suite("stowage over HTTPS: --ca-file and untrusted certificates")
struct TLSTests {
    @Test("download through nginx with --ca-file; without it the playlist and the key server are refused as untrusted")
    func httpsOriginAndKeyServer() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let work = fixture.root.appendingPathComponent("tls").path
        let authority = try await TestCertificateAuthority.make(in: work + "/ca")
        try await fixture.withServers { origin, keyServer in
            let proxy = try await TLSProxy.start(
                certificate: authority,
                routes: ["/v1/": [keyServer.absoluteString], "/": [origin.absoluteString]],
                in: work + "/nginx"
            )
            do {
                try await Self.exercise(fixture, proxy: proxy, authority: authority, origin: origin)
            } catch {
                await proxy.stop()
                throw error
            }
            await proxy.stop()
        }
    }

    static func exercise(_ fixture: DownloadFixture, proxy: TLSProxy, authority: TestCertificateAuthority, origin: URL) async throws {
        let token = try await fixture.token()
        let source = fixture.sourceURL(URL(string: proxy.baseURL)!)
        let home = fixture.clientDirectory.url
        func download(
            _ source: String,
            home: URL,
            _ extra: [String],
            environment: [String: String] = [:]
        ) async throws -> (status: Int32, output: String) {
            try await LibraryCommandTests.run(
                ["download", source, "--subtitles", "none", "--key-server", proxy.baseURL] + extra,
                home: home,
                environment: environment,
                token: token
            )
        }

        // Not trusted: the playlist over https is refused before anything is stored, and the message says what to do.
        let strangerHome = fixture.root.appendingPathComponent("stranger", isDirectory: true)
        let refused = try await download(source, home: strangerHome, [])
        #expect(refused.status != 0)
        #expect(refused.output.contains("not trusted") && refused.output.contains("--ca-file"), "\(refused.output)")
        // Its own code, not a network error a download service would wait out.
        #expect(refused.output.contains("[untrusted_certificate]") && !refused.output.contains("check the URL and the network"), "\(refused.output)")
        // The key server over https, the playlist over plain loopback http: refused with its own code, no keys stored.
        let keyRefused = try await download(fixture.sourceURL(origin), home: strangerHome, [])
        #expect(keyRefused.status != 0)
        #expect(keyRefused.output.contains("untrusted_certificate") && keyRefused.output.contains("--ca-file"), "\(keyRefused.output)")
        let list = try await LibraryCommandTests.run(["list", "--json"], home: strangerHome)
        #expect(!list.output.contains("\"complete\""), "\(list.output)")

        // A file that is not a CA certificate: a clear error naming it.
        let notPEM = fixture.root.appendingPathComponent("not-a-ca.txt")
        try Data("hello\n".utf8).write(to: notPEM)
        let invalid = try await download(source, home: strangerHome, ["--ca-file", notPEM.path])
        #expect(invalid.status != 0 && invalid.output.contains("invalid_ca_file") && invalid.output.contains(notPEM.path), "\(invalid.output)")

        // Trusted with --ca-file: the whole download over https, keys from the key server behind the same proxy.
        let trusted = try await download(source, home: home, ["--ca-file", authority.caFile])
        #expect(trusted.status == 0, "\(trusted.output)")
        #expect(trusted.output.contains("complete: \(fixture.assetId)"), "\(trusted.output)")
        let verify = try await LibraryCommandTests.run(["verify", fixture.assetId, "--deep"], home: home)
        #expect(verify.status == 0, "\(verify.output)")
        // Both the origin and the key server were reached through nginx.
        let log = proxy.accessLog()
        #expect(log.contains("POST /v1/keys") && log.contains("GET /\(fixture.assetId)/master.m3u8"), "\(log.suffix(2000))")

        // STOWAGE_CA_FILE does the same for every command (here inspect).
        let inspected = try await LibraryCommandTests.run(["inspect", source], home: home, environment: ["STOWAGE_CA_FILE": authority.caFile])
        #expect(inspected.status == 0, "\(inspected.output)")
        let inspectRefused = try await LibraryCommandTests.run(["inspect", source], home: home)
        #expect(inspectRefused.status != 0 && inspectRefused.output.contains("not trusted"), "\(inspectRefused.output)")
    }

    @Test("a certificate from a trusted CA but for another host name is refused, and the error says so")
    func certificateForAnotherHost() async throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let authority = try await TestCertificateAuthority.make(in: work.path + "/ca", subjectAltName: "DNS:other.example")
        // The handshake fails before anything is proxied: the upstream is never reached.
        let proxy = try await TLSProxy.start(certificate: authority, routes: ["/": ["http://127.0.0.1:9"]], in: work.path + "/nginx")
        let home = work.appendingPathComponent("home", isDirectory: true)
        let result = try await LibraryCommandTests.run(["inspect", proxy.baseURL + "/master.m3u8", "--ca-file", authority.caFile], home: home)
        await proxy.stop()
        #expect(result.status != 0 && result.output.contains("issued for another host name"), "\(result.output)")
    }
}
