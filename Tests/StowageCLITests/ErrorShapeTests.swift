import DownloadTestSupport
import Foundation
import KeyServer
import OfflinePackage
import StowageTestSupport
import Testing

/// Issue 12's "one error shape", checked as a user meets it: for a bad URL, a refused connection, a missing asset,
/// an expired lease and a full disk, each command prints exactly one line `error: MESSAGE [code]` on standard error,
/// and with `--json` the same code in `{"error": {...}}` as the last line on standard output. No Foundation or NIO
/// type names, errnos or Unix times reach the user.
@Suite("Every command fails in one shape")
struct ErrorShapeTests {
    struct Failure: CustomStringConvertible {
        let arguments: [String]
        let code: String
        let line: String
        var description: String { "stowage \(arguments.joined(separator: " ")) → [\(code)] \(line)" }
    }

    /// Runs the command twice (plain, then with `--json`) and checks both against the shape; returns the plain line.
    /// `token` goes in `STOWAGE_TOKEN`.
    @discardableResult
    static func expectFailure(
        _ arguments: [String],
        code expected: String,
        home: URL,
        token: String? = nil,
        beforeJSON reset: [String]? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Failure? {
        let plain = try await ServiceCommandTests.stowage(arguments, home: home, token: token)
        let stderr = String(decoding: plain.standardError, as: UTF8.self)
        #expect(plain.status != 0 && !plain.timedOut, "stowage \(arguments): status \(plain.status)", sourceLocation: sourceLocation)
        let lines = stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 1, "stowage \(arguments) printed \(lines.count) lines on stderr:\n\(stderr)", sourceLocation: sourceLocation)
        guard let line = lines.last, let match = line.wholeMatch(of: /error: (.+) \[([a-z0-9_]+)\]/) else {
            Issue.record("stowage \(arguments): not in the error shape: \(stderr)", sourceLocation: sourceLocation)
            return nil
        }
        let code = String(match.output.2)
        #expect(code == expected, "stowage \(arguments): \(line)", sourceLocation: sourceLocation)
        for raw in Self.rawDescriptions where line.contains(raw) {
            Issue.record("stowage \(arguments) shows a raw description (\(raw)): \(line)", sourceLocation: sourceLocation)
        }
        if line.contains(/\b1[6-9]\d{8}\b/) { Issue.record("stowage \(arguments) shows Unix seconds: \(line)", sourceLocation: sourceLocation) }

        if let reset { _ = try await ServiceCommandTests.stowage(reset, home: home) }
        let json = try await ServiceCommandTests.stowage(arguments + ["--json"], home: home, token: token)
        #expect(json.status == plain.status, "stowage \(arguments) --json: status \(json.status)", sourceLocation: sourceLocation)
        // The whole output is one document (a report such as verify's, with its `error`), or the error is the last line
        // of a JSON-lines stream (download's events).
        let output = String(decoding: json.standardOutput, as: UTF8.self)
        let last = output.split(separator: "\n").last.map(String.init) ?? ""
        let document =
            (try? JSONSerialization.jsonObject(with: json.standardOutput) as? [String: Any])
            ?? (try? JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
        let error = document?["error"] as? [String: Any]
        #expect(error?["code"] as? String == code, "stowage \(arguments) --json printed: \(output)", sourceLocation: sourceLocation)
        #expect((error?["message"] as? String)?.isEmpty == false, sourceLocation: sourceLocation)
        return Failure(arguments: arguments, code: code, line: line)
    }

    static let rawDescriptions = [
        "HTTPClientError", "NIOCore", "NIOConnectionError", "errno", "Error(", "NSError", "CocoaError", "The operation could not be completed",
        "Optional(",
    ]

    /// For commands without `--json`: a non-zero status and exactly one line on standard error, in the error shape.
    @discardableResult
    static func expectPlainFailure(
        _ arguments: [String],
        code expected: String,
        home: URL,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> String {
        let plain = try await ServiceCommandTests.stowage(arguments, home: home)
        let stderr = String(decoding: plain.standardError, as: UTF8.self)
        #expect(plain.status != 0 && !plain.timedOut, "stowage \(arguments): status \(plain.status)", sourceLocation: sourceLocation)
        let lines = stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 1, "stowage \(arguments) printed \(lines.count) lines on stderr:\n\(stderr)", sourceLocation: sourceLocation)
        let line = lines.last ?? ""
        #expect(line.hasPrefix("error: ") && line.hasSuffix("[\(expected)]"), "stowage \(arguments): \(line)", sourceLocation: sourceLocation)
        return line
    }

    /// Every command's path, leaves only, read from the argument parser's own description of the tool
    /// (`--experimental-dump-help`), so that a command added later is checked too.
    static func everyCommand(home: URL) async throws -> [[String]] {
        let dump = try await ServiceCommandTests.stowage(["--experimental-dump-help"], home: home)
        let tool = try #require(try JSONSerialization.jsonObject(with: dump.standardOutput) as? [String: Any])
        var leaves: [[String]] = []
        func walk(_ command: [String: Any], _ path: [String]) {
            let subcommands = (command["subcommands"] as? [[String: Any]] ?? []).filter { ($0["commandName"] as? String) != "help" }
            if subcommands.isEmpty { leaves.append(path) }
            for subcommand in subcommands { walk(subcommand, path + [subcommand["commandName"] as? String ?? "?"]) }
        }
        walk(try #require(tool["command"] as? [String: Any]), [])
        return leaves
    }

    @Test("an argument no command takes, and a command missing its argument: invalid_arguments, status 2, in every command")
    func argumentErrors() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("argument-errors-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let commands = try await Self.everyCommand(home: home)
        #expect(commands.count >= 30 && commands.contains(["keys", "renew"]) && commands.contains(["download"]), "\(commands)")
        for command in commands {
            let failure = try await Self.expectFailure(command + ["--no-such-option"], code: "invalid_arguments", home: home)
            // The parser names the first thing wrong: the option, or a missing argument the command needs first.
            #expect(failure?.line.contains("stowage \(command.joined(separator: " ")) --help") == true, "\(failure?.line ?? "")")
            let status = try await ServiceCommandTests.stowage(command + ["--no-such-option"], home: home).status
            #expect(status == 2, "stowage \(command) --no-such-option: status \(status)")
        }
        let unknown = try await Self.expectFailure(["list", "--no-such-option"], code: "invalid_arguments", home: home)
        #expect(unknown?.line.contains("Unknown option '--no-such-option'") == true, "\(unknown?.line ?? "")")
        let missing = try await Self.expectFailure(["play"], code: "invalid_arguments", home: home)
        #expect(missing?.line.contains("<asset-id>") == true, "\(missing?.line ?? "")")
        // A value the command's own validation refuses goes the same way.
        try await Self.expectFailure(["download", "https://cdn.example/a.m3u8", "--concurrency", "0"], code: "invalid_arguments", home: home)
        // A value holding a line feed cannot print a second line that reads as another error (red team, round 4).
        let forged = try await Self.expectFailure(
            ["download", "https://cdn.example/a.m3u8", "--asset-id", "a\nerror: all is well [ok]"],
            code: "invalid_asset_id",
            home: home
        )
        #expect(forged?.line.contains("a\\u000aerror: all is well") == true, "\(forged?.line ?? "")")
        // Help is still the argument parser's, on standard output, status 0.
        let help = try await ServiceCommandTests.stowage(["download", "--help"], home: home)
        #expect(help.status == 0 && String(decoding: help.standardOutput, as: UTF8.self).contains("USAGE: stowage download"))
    }

    @Test("set-up mistakes: a size that is not one, a data directory too deep for a socket, packaging errors, a missing fixture")
    func setupMistakes() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("setup-errors-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let home = root.appendingPathComponent("home")
        try await Self.expectPlainFailure(["service", "run", "--keep-free", "lots"], code: "invalid_quantity", home: home)
        // 120 bytes of path before service.sock: more than a Unix socket path holds.
        let deep = root.appendingPathComponent(String(repeating: "d", count: max(1, 120 - root.path.count)))
        // Refused before the service says it runs.
        let tooDeep = try await Self.expectPlainFailure(["service", "run"], code: "socket_path_too_long", home: deep)
        #expect(tooDeep.contains("107 bytes"))
        let keyServer = root.appendingPathComponent("keyserver").path
        let clear = TestSupport.fixtures.appendingPathComponent("media/ts-clear/index.m3u8").path
        try await Self.expectPlainFailure(
            [
                "package", clear, "--asset-id", "a", "--method", "sample-aes", "--out", root.appendingPathComponent("out").path,
                "--keyserver-data-dir", keyServer,
            ],
            code: "missing_data_dir",
            home: home
        )
        #expect(try await ServiceCommandTests.stowage(["keyserver", "init", "--data-dir", keyServer], home: home).status == 0)
        try await Self.expectPlainFailure(
            [
                "package", TestSupport.fixtures.appendingPathComponent("media/ts-aes128-iv/index.m3u8").path, "--asset-id", "a", "--method",
                "sample-aes", "--out",
                root.appendingPathComponent("out").path, "--keyserver-data-dir", keyServer,
            ],
            code: "already_protected",
            home: home
        )
        try await Self.expectPlainFailure(
            [
                "package", clear, "--asset-id", "bad id!", "--method", "sample-aes", "--out", root.appendingPathComponent("out").path,
                "--keyserver-data-dir", keyServer,
            ],
            code: "invalid_arguments",
            home: home
        )
        // The key server's SQLite file overwritten: the keys cannot be registered, and the error says where and why.
        let store = URL(fileURLWithPath: keyServer).appendingPathComponent("keyserver.sqlite")
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store.path + suffix) }
        try Data(repeating: 0x78, count: 8192).write(to: store)
        let unregistered = try await Self.expectPlainFailure(
            [
                "package", clear, "--asset-id", "a", "--method", "sample-aes", "--out", root.appendingPathComponent("out").path,
                "--keyserver-data-dir", keyServer,
            ],
            code: "key_registration_failed",
            home: home
        )
        #expect(unregistered.contains(store.path) && unregistered.contains("package again"), "\(unregistered)")
        let demo = try await ServiceCommandTests.stowage(["demo", "--fixture", "/nonexistent/master.m3u8"], home: home)
        let line = String(decoding: demo.standardError, as: UTF8.self)
        #expect(demo.status != 0 && line.contains("[fixture_not_found]") && line.contains("/nonexistent/master.m3u8"), "\(line)")
    }

    @Test("a bad URL: not a playlist, a scheme Stowage does not fetch, a path that does not exist")
    func badURLs() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("error-shape-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        for command in ["download", "inspect"] {
            try await Self.expectFailure([command, "/etc/passwd"], code: "not_a_playlist", home: home)
            try await Self.expectFailure([command, "ftp://example.com/show.m3u8"], code: "unsupported_uri", home: home)
            try await Self.expectFailure([command, "/nonexistent/show.m3u8"], code: "playlist_unreadable", home: home)
        }
        // A download that failed before anything was stored leaves nothing behind: the same command fails the same way
        // again (not with download_exists), and the library is empty.
        try await Self.expectFailure(["download", "/etc/passwd"], code: "not_a_playlist", home: home)
        let list = try await ServiceCommandTests.stowage(["list", "--json"], home: home)
        #expect(String(decoding: list.standardOutput, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "[\n\n]")
    }

    @Test("a token or a content key written on the command line: refused with secret_on_command_line, the secret not repeated")
    func secretOnCommandLine() async throws {
        let root = try TestSupport.temporaryDirectory("secret-on-command-line")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = root.appendingPathComponent("home")
        let token = "eyJhbGciOi.fake.token"
        // Refused before anything is fetched: the URL is never asked for.
        let download = try await Self.expectFailure(
            ["download", "https://cdn.example/master.m3u8", "--token", token],
            code: "secret_on_command_line",
            home: home
        )
        #expect(download?.line.contains(token) == false, "\(download?.line ?? "")")
        let renew = try await Self.expectFailure(["keys", "renew", "movie-1", "--token", "abc"], code: "secret_on_command_line", home: home)
        #expect(renew?.line.contains("STOWAGE_TOKEN") == true, "\(renew?.line ?? "")")
        let missing = try await Self.expectFailure(["keys", "renew", "movie-1"], code: "secret_missing", home: home)
        #expect(missing?.line.contains("renewing a lease needs the entitlement token") == true, "\(missing?.line ?? "")")
        // A credential in a header of any name (an API key here) goes in --header-file.
        let header = try await Self.expectFailure(
            ["download", "https://cdn.example/master.m3u8", "--header", "X-Api-Key: \(token)"],
            code: "secret_on_command_line",
            home: home
        )
        #expect(header?.line.contains(token) == false && header?.line.contains("--header-file") == true, "\(header?.line ?? "")")
        // The key server's `add-asset` (no --json) refuses a content key written on its command line, in an initialized
        // data directory where it would otherwise be added.
        let dataDirectory = root.appendingPathComponent("keyserver").path
        #expect(try await ServiceCommandTests.stowage(["keyserver", "init", "--data-dir", dataDirectory], home: home).status == 0)
        let key = "00112233445566778899aabbccddeeff"
        let added = try await Self.expectPlainFailure(
            ["keyserver", "add-asset", "movie-1", "--key-id", "000102030405060708090a0b0c0d0e0f", "--key", key, "--data-dir", dataDirectory],
            code: "secret_on_command_line",
            home: home
        )
        #expect(!added.contains(key), "\(added)")
    }

    @Test("a refused connection, to the origin and to the key server, and a missing asset in every command that names one")
    func refusedConnectionsAndMissingAssets() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let home = fixture.clientDirectory.url
        let token = try await fixture.token()
        // Servers that were up a moment ago: their ports now refuse connections.
        let (origin, keyServer) = try await fixture.withServers { origin, keyServer in
            let download = try await ServiceCommandTests.stowage(
                ["download", fixture.sourceURL(origin), "--subtitles", "none", "--key-server", keyServer.absoluteString],
                home: home,
                token: token
            )
            #expect(download.status == 0, "\(String(decoding: download.standardError, as: UTF8.self))")
            return (origin, keyServer)
        }
        // Refused at once rather than waited on for the network-down grace (the run's 60 s limit catches a wait).
        for command in ["download", "inspect"] {
            let failure = try await Self.expectFailure(
                [command, fixture.sourceURL(origin, asset: "other")],
                code: "playlist_network_error",
                home: home
            )
            #expect(failure?.line.contains("refused") == true)
        }
        try await Self.expectFailure(["keys", "renew", fixture.assetId], code: "key_server_unreachable", home: home, token: token)
        _ = keyServer

        for arguments in [
            ["info", "nosuch"], ["verify", "nosuch"], ["play", "nosuch", "--player", "none"], ["pause", "nosuch"], ["resume", "nosuch"],
            ["stop", "nosuch"],
            ["cancel", "nosuch"], ["add-media", "nosuch", "--audio", "all"], ["keys", "renew", "nosuch"],
        ] {
            let code =
                arguments[0] == "keys"
                ? "lease_not_stored" : ["info", "verify", "play"].contains(arguments[0]) ? "package_not_found" : "download_not_found"
            // `keys renew` with its token, as a user passes it.
            try await Self.expectFailure(arguments, code: code, home: home, token: arguments[0] == "keys" ? token : nil)
        }
    }

    @Test("an expired lease: play and verify refuse it in the same shape, with the end as a date")
    func expiredLease() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        var configuration = try fixture.keyServer.loadConfiguration()
        configuration.policies[configuration.defaultPolicy]?.storageDuration = 6
        try fixture.keyServer.saveConfiguration(configuration)
        let home = fixture.clientDirectory.url
        try await fixture.withServers { origin, keyServer in
            let download = try await ServiceCommandTests.stowage(
                ["download", fixture.sourceURL(origin), "--subtitles", "none", "--key-server", keyServer.absoluteString],
                home: home,
                token: try await fixture.token()
            )
            #expect(download.status == 0, "\(String(decoding: download.standardError, as: UTF8.self))")
        }
        try await Task.sleep(for: .seconds(7))
        let play = try await Self.expectFailure(["play", fixture.assetId, "--player", "none"], code: "lease_expired", home: home)
        #expect(play?.line.contains(/20\d\d-\d\d-\d\d \d\d:\d\d/) == true, "no date in: \(play?.line ?? "")")
        try await Self.expectFailure(["verify", fixture.assetId], code: "lease_expired", home: home)
    }

    @Test("a --port another server listens on: play says playback_server_failed with the port's trouble in words")
    func playOnAPortInUse() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let home = fixture.clientDirectory.url
        try await fixture.withServers { origin, keyServer in
            try await BrokenStorageTests.download(fixture, origin: origin, keyServer: keyServer)
            // The origin listens on its port all along.
            let port = try #require(origin.port)
            let failure = try await Self.expectFailure(
                ["play", fixture.assetId, "--player", "none", "--offline", "--port", String(port)],
                code: "playback_server_failed",
                home: home
            )
            #expect(failure?.line.contains("already in use") == true, "\(failure?.line ?? "")")
        }
    }

    @Test("a full disk (below --keep-free): download refuses before any segment, in the same shape")
    func fullDisk() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let home = fixture.clientDirectory.url
        try await fixture.withServers { origin, keyServer in
            let arguments = [
                "download", fixture.sourceURL(origin), "--subtitles", "none", "--key-server", keyServer.absoluteString, "--keep-free", "100000G",
            ]
            // The first run leaves a paused download to resume later; it is cancelled before the run with --json.
            let failure = try await Self.expectFailure(
                arguments,
                code: "insufficient_storage",
                home: home,
                token: try await fixture.token(),
                beforeJSON: ["cancel", fixture.assetId]
            )
            #expect(failure?.line.contains("MB") == true || failure?.line.contains("GB") == true)
            // It paused, with no segment on disk; `resume` with room to spare finishes it.
            let files = (try? FileManager.default.subpathsOfDirectory(atPath: fixture.package.url.path)) ?? []
            #expect(!files.contains { $0.hasSuffix(".ts") || $0.hasSuffix(".m4s") })
            try await Self.expectFailure(["resume", fixture.assetId, "--keep-free", "100000G"], code: "insufficient_storage", home: home)
            let resume = try await ServiceCommandTests.stowage(["resume", fixture.assetId], home: home)
            #expect(resume.status == 0, "\(String(decoding: resume.standardError, as: UTF8.self))")
        }
    }
}
