import Foundation
import KeyDelivery
import StowageCore
import Testing

@Suite("proxies, NO_PROXY and Netscape cookie files, as curl and yt-dlp read them")
struct BrowserHabitsTests {
    let cdn = URL(string: "https://cdn.example.com/show/master.m3u8")!
    let plain = URL(string: "http://cdn.example.com/show/master.m3u8")!

    @Test("the environment: HTTPS_PROXY for https, HTTP_PROXY for http, ALL_PROXY for both, lower case first")
    func environment() throws {
        let settings = try ProxySettings.fromEnvironment([
            "HTTPS_PROXY": "http://upper:1", "https_proxy": "http://secure.proxy:3128", "HTTP_PROXY": "plain.proxy:8080",
        ])
        #expect(settings.server(for: cdn)?.description == "http://secure.proxy:3128")
        #expect(settings.server(for: plain)?.description == "http://plain.proxy:8080")
        let all = try ProxySettings.fromEnvironment(["ALL_PROXY": "socks5h://socks.local"])
        #expect(all.server(for: cdn) == all.server(for: plain))
        #expect(all.server(for: cdn)?.kind == .socks5 && all.server(for: cdn)?.port == 1080)
        #expect(try ProxySettings.fromEnvironment([:]).server(for: cdn) == nil)
        // An empty --proxy means direct, whatever the environment says.
        #expect(try ProxySettings(proxy: "").server(for: cdn) == nil)
    }

    @Test("NO_PROXY: *, host names with their subdomains (leading dot or not), addresses, ports ignored")
    func noProxy() throws {
        let settings = try ProxySettings(proxy: "http://proxy:3128", noProxy: " example.com, .internal ,10.0.0.1:8080,[::1],localhost")
        #expect(settings.server(for: cdn) == nil)
        #expect(settings.server(for: URL(string: "https://example.com/a")!) == nil)
        #expect(settings.server(for: URL(string: "http://keys.internal/v1/keys")!) == nil)
        #expect(settings.server(for: URL(string: "http://10.0.0.1/x")!) == nil)
        #expect(settings.server(for: URL(string: "http://[::1]:8080/x")!) == nil)
        #expect(settings.server(for: URL(string: "http://localhost:8080/x")!) == nil)
        // Not a suffix match on a partial label, and other hosts go through the proxy.
        #expect(settings.server(for: URL(string: "https://notexample.com/a")!) != nil)
        #expect(settings.server(for: URL(string: "http://10.0.0.10/x")!) != nil)
        #expect(try ProxySettings(proxy: "http://proxy:3128", noProxy: "*").server(for: cdn) == nil)
    }

    @Test("proxy URLs Stowage cannot use are refused, naming the variable and never showing the password")
    func invalidProxies() throws {
        for text in ["ftp://proxy:21", "https://proxy:443", "http://", "http://proxy:99999", "http://proxy:3128/path", "socks5://u:p@proxy"] {
            #expect(throws: ProxyError.self, "\(text)") { try ProxyServer(parsing: text) }
        }
        let error = #expect(throws: ProxyError.self) { try ProxySettings.fromEnvironment(["https_proxy": "https://user:hunter2@proxy:443"]) }
        #expect(error?.code == "invalid_proxy")
        #expect(error?.message.contains("https_proxy") == true)
        #expect(error?.message.contains("hunter2") == false, "\(error?.message ?? "")")
        let credentials = try ProxyServer(parsing: "http://alice:p%40ss@proxy.example:3128")
        #expect(credentials.username == "alice" && credentials.password == "p@ss" && !credentials.description.contains("p@ss"))
    }

    @Test("a Netscape cookie file: domain, subdomains, path, secure, expiry, #HttpOnly_ lines")
    func cookieFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cookies-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("cookies.txt").path
        try """
        # Netscape HTTP Cookie File\r
        .example.com\tTRUE\t/\tFALSE\t0\twide\t1\r
        cdn.example.com\tFALSE\t/show\tTRUE\t4102444800\tsecure\t2
        #HttpOnly_cdn.example.com\tFALSE\t/\tFALSE\t0\thttponly\t3
        other.example\tTRUE\t/\tFALSE\t0\tother\t4
        cdn.example.com\tFALSE\t/\tFALSE\t1000000000\told\t5

        """.write(toFile: file, atomically: true, encoding: .utf8)
        let cookies = try BrowserHeaders.cookies(inFile: file, at: Date(timeIntervalSince1970: 2_000_000_000))
        #expect(cookies.map(\.name) == ["wide", "secure", "httponly", "other"])
        func sent(_ url: String) -> String? {
            BrowserHeaders(cookies: cookies).headers(for: URL(string: url)!).first { $0.0 == "Cookie" }?.1
        }
        #expect(sent("https://cdn.example.com/show/seg1.ts") == "wide=1; secure=2; httponly=3")
        #expect(sent("http://cdn.example.com/show/seg1.ts") == "wide=1; httponly=3")  // secure: https only
        #expect(sent("https://cdn.example.com/showcase/x") == "wide=1; httponly=3")  // /show is not a prefix of /showcase
        #expect(sent("https://a.b.example.com/x") == "wide=1")
        #expect(sent("https://evil.example.net/x") == nil)
        #expect(sent("https://example.com.evil.net/x") == nil)
        let browser = BrowserHeaders(userAgent: "UA/1", referer: "https://site.example/", cookies: cookies)
        let headers = browser.headers(for: URL(string: "https://evil.example.net/x")!)
        #expect(headers.map(\.0) == ["User-Agent", "Referer"])
        // The user's own --header of the same name wins.
        let scoped = ScopedHeaders([("User-Agent", "mine")], playlistURL: cdn, browser: browser)
        #expect(scoped.for(cdn).filter { $0.0 == "User-Agent" }.map(\.1) == ["mine"])
    }

    @Test("a file that is not a cookie file is refused with its line; one whose cookies all expired says when")
    func badCookieFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cookies-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cases: [(String, String)] = [
            ("# comment\n{\"session\": \"x\"}\n", "line 2 has 1 field"),
            ("example.com\tMAYBE\t/\tFALSE\t0\ta\tb\n", "neither TRUE nor FALSE"),
            ("example.com\tTRUE\t/\tFALSE\tsoon\ta\tb\n", "expiry"),
            ("example.com\tTRUE\t/\tFALSE\t0\ta\tb;c=d\n", "cannot go in a Cookie header"),
            ("# nothing\n\n", "holds no cookie lines"),
            ("example.com\tTRUE\t/\tFALSE\t1000000000\ta\tb\n", "expired, the last on 2001-09-09"),
        ]
        for (index, (text, reason)) in cases.enumerated() {
            let file = directory.appendingPathComponent("\(index).txt").path
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let error = #expect(throws: CookieFileError.self) { try BrowserHeaders.cookies(inFile: file, at: Date()) }
            #expect(error?.code == "invalid_cookie_file")
            #expect(error?.message.contains(reason) == true, "\(error?.message ?? "")")
            #expect(error?.message.contains(file) == true)
        }
        let missing = #expect(throws: CookieFileError.self) { try BrowserHeaders.cookies(inFile: directory.path + "/none.txt", at: Date()) }
        #expect(missing?.message.contains("no such file") == true, "\(missing?.message ?? "")")
    }
}
