import Foundation
import StowageCore
import StowageCrypto
import Testing

@testable import KeyDelivery

/// Where a token or a content key may come from: standard input, a file nobody else can read, or the environment;
/// never the command line (docs/SECURITY.md, "Another local user").
struct SecretInputTests {
    static let token = "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl"

    /// A file of this user's with `contents` and `mode`, in a folder of its own.
    static func file(_ contents: String, mode: Int = 0o600) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("secret-input-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent("secret")
        try Data(contents.utf8).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: url.path)
        return url.path
    }

    static func code(_ body: () throws -> Any?) -> String? {
        do {
            _ = try body()
            return nil
        } catch let error as SecretInputError {
            return error.code.rawValue
        } catch let error as PrivateFileError {
            return error.code.rawValue
        } catch {
            return "\(error)"
        }
    }

    @Test func aTokenComesFromStandardInputAFileOrTheEnvironment() throws {
        #expect(try SecretInput.token(option: "-", file: nil, environment: [:]) { Array("\(Self.token)\n".utf8) } == Self.token)
        #expect(try SecretInput.token(option: nil, file: try Self.file("  \(Self.token)  \n"), environment: [:]) == Self.token)
        #expect(try SecretInput.token(option: nil, file: nil, environment: ["STOWAGE_TOKEN": Self.token]) == Self.token)
        #expect(try SecretInput.token(option: nil, file: nil, environment: [:]) == nil)
        #expect(try SecretInput.token(option: nil, file: nil, environment: ["STOWAGE_TOKEN": ""]) == nil)
        // An option given on the command line overrides the environment.
        #expect(try SecretInput.token(option: "-", file: nil, environment: ["STOWAGE_TOKEN": "other"]) { Array(Self.token.utf8) } == Self.token)
        #expect(try SecretInput.token(option: nil, file: try Self.file(Self.token), environment: ["STOWAGE_TOKEN": "other"]) == Self.token)
    }

    @Test func aTokenIsRefusedOnTheCommandLineAndFromTwoPlacesOrNowhere() throws {
        #expect(Self.code { try SecretInput.token(option: Self.token, file: nil, environment: [:]) } == "secret_on_command_line")
        let both = Self.code { try SecretInput.token(option: "-", file: try Self.file(Self.token), environment: [:]) { [] } }
        #expect(both == "secret_sources_conflict")
        #expect(Self.code { try SecretInput.token(option: "-", file: nil, environment: [:]) { Array("\n \n".utf8) } } == "secret_unreadable")
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("no-such-token-\(UUID().uuidString)").path
        #expect(Self.code { try SecretInput.token(option: nil, file: missing, environment: [:]) } == "secret_unreadable")
        // A file others can read may have been read: refused, as ssh refuses a loose key.
        #expect(
            Self.code { try SecretInput.token(option: nil, file: try Self.file(Self.token, mode: 0o644), environment: [:]) } == "insecure_permissions"
        )
        // The refusal never repeats the secret.
        do {
            _ = try SecretInput.token(option: Self.token, file: nil, environment: [:])
        } catch let error as SecretInputError {
            #expect(!error.message.contains(Self.token))
        }
    }

    @Test func aContentKeyComesFromStandardInputOrAFile() throws {
        let hex = "00112233445566778899aabbccddeeff"
        let expected = try #require(Hex.decode(hex))
        func bytes(_ key: SecretBytes) -> [UInt8] { key.withUnsafeBytes { [UInt8]($0) } }
        #expect(bytes(try SecretInput.contentKey(option: "-", file: nil) { Array("\(hex)\n".utf8) }) == expected)
        #expect(bytes(try SecretInput.contentKey(option: nil, file: try Self.file(hex))) == expected)
        #expect(bytes(try SecretInput.contentKey(option: "-", file: nil) { expected }) == expected)
        let long = try SecretInput.contentKey(option: "-", file: nil, lengths: [16, 32]) { Array((hex + hex).utf8) }
        #expect(long.count == 32)
        // 32 hex digits with no newline (`printf %s`) are hex, even where a 32-byte raw key would also be taken.
        #expect(bytes(try SecretInput.contentKey(option: nil, file: try Self.file(hex), lengths: [16, 32])) == expected)
        let raw = [UInt8](repeating: 0xa5, count: 32)
        #expect(bytes(try SecretInput.contentKey(option: "-", file: nil, lengths: [16, 32]) { raw }) == raw)

        #expect(Self.code { try SecretInput.contentKey(option: hex, file: nil) } == "secret_on_command_line")
        #expect(Self.code { try SecretInput.contentKey(option: "-", file: try Self.file(hex)) } == "secret_sources_conflict")
        #expect(Self.code { try SecretInput.contentKey(option: nil, file: nil) } == "secret_missing")
        #expect(Self.code { try SecretInput.contentKey(option: "-", file: nil) { Array("0011".utf8) } } == "invalid_content_key")
        #expect(Self.code { try SecretInput.contentKey(option: "-", file: nil) { Array((hex + hex).utf8) } } == "invalid_content_key")
        let short = #expect(throws: SecretInputError.self) { try SecretInput.contentKey(option: "-", file: nil) { Array("0011".utf8) } }
        #expect(short?.message.contains("4 bytes") == true && short?.message.contains("32 hex digits or 16 raw bytes") == true)
    }

    /// A value sealed for one purpose opens for it only, and not once altered.
    @Test func sealedDataOpensOnlyForItsContextAndUnaltered() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("data-sealer-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try KeyStore(dataDirectory: directory, machineID: MachineID("0123456789abcdef0123456789abcdef"), clock: TestClock(now: 1_000))
        let sealer = try store.dataSealer()
        let sealed = try sealer.seal(SecretBytes(Array(Self.token.utf8)), context: "download secrets of movie-1")
        #expect(!String(decoding: sealed, as: UTF8.self).contains(Self.token))
        let opened = try sealer.open(sealed, context: "download secrets of movie-1")
        #expect(opened.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } == Self.token)
        var altered = sealed
        altered[14] ^= 1
        for (bytes, context) in [(sealed, "download secrets of movie-2"), (altered, "download secrets of movie-1"), ([1, 2, 3], "x")] {
            let error = #expect(throws: KeyStoreError.self) { try sealer.open(bytes, context: context) }
            #expect(error?.code == "sealed_data_damaged")
        }
    }

    /// Credential headers are never taken from the command line; a header file (the user's own) gives them.
    @Test func headersFromTheCommandLineAndAFile() throws {
        #expect(try SecretInput.headers(commandLine: ["X-Client: stowage"], file: nil).map { "\($0.0)=\($0.1)" } == ["X-Client=stowage"])
        for credential in [
            "Authorization: Bearer abc", "cookie: session=1", "Proxy-Authorization: Basic eA==", "X-Api-Key: abc", "X-Auth-Token: abc",
            "CDN-Signature: abc",
        ] {
            #expect(Self.code { try SecretInput.headers(commandLine: [credential], file: nil) } == "secret_on_command_line")
        }
        let file = try Self.file("# the CDN's session\nAuthorization: Bearer abc\n\nCookie:  a=b \n")
        let read = try SecretInput.headers(commandLine: ["X-Client: stowage"], file: file)
        #expect(read.map { "\($0.0)=\($0.1)" } == ["X-Client=stowage", "Authorization=Bearer abc", "Cookie=a=b"])
        #expect(Self.code { try SecretInput.headers(commandLine: ["no colon"], file: nil) } == "invalid_header")
        #expect(Self.code { try SecretInput.headers(commandLine: [], file: try Self.file("Bad Name: x")) } == "invalid_header")
        let numbered = #expect(throws: SecretInputError.self) {
            try SecretInput.headers(commandLine: [], file: try Self.file("# one\nX-A: 1\nno colon\n"))
        }
        #expect(numbered?.message.contains("line 3 of") == true, "\(numbered?.message ?? "")")
        #expect(Self.code { try SecretInput.headers(commandLine: [], file: try Self.file("Cookie: a", mode: 0o640)) } == "insecure_permissions")
    }

    /// The user's headers go to the playlist's own origin and the hosts named for them, never in the clear when the
    /// playlist came over https, and not to another port of the playlist's host.
    @Test func headersGoToThePlaylistsOriginOnly() throws {
        let https = ScopedHeaders(
            [("Authorization", "Bearer abc")],
            playlistURL: URL(string: "https://cdn.example.com/a/master.m3u8"),
            extraHosts: ["keys.example.com"]
        )
        for (url, sent) in [
            ("https://cdn.example.com/a/seg.ts", true), ("https://CDN.example.com:443/b", true), ("http://cdn.example.com/a/seg.ts", false),
            ("https://cdn.example.com:8443/a/seg.ts", false), ("https://keys.example.com:8443/k", true), ("http://keys.example.com/k", false),
            ("https://evil.example.com/a", false), ("file:///etc/passwd", false),
        ] {
            let headers = https.for(try #require(URL(string: url)))
            #expect(headers.contains { $0.0 == "Authorization" } == sent, "\(url)")
        }
        let plain = ScopedHeaders([("Cookie", "a=b")], playlistURL: URL(string: "http://127.0.0.1:8080/master.m3u8"))
        #expect(plain.allows(try #require(URL(string: "http://127.0.0.1:8080/seg.ts"))))
        #expect(!plain.allows(try #require(URL(string: "http://127.0.0.1:8081/seg.ts"))))
        #expect(!plain.allows(try #require(URL(string: "http://localhost:8080/seg.ts"))))
    }
}
