import DownloadTestSupport
import Foundation
import KeyServer
import OfflinePackage
import OriginServer
import StowageCore
import StowageCrypto
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The attack suite of the lease (docs/SECURITY.md): each test performs one attack the way a curious user, another
/// local user or a hostile peer would, with the stock `stowage` command, `sqlite3`, `rm`, `cp`, a second Unix user,
/// libfaketime, `curl` and a second key server, against real servers on loopback, and checks the lease holds.
/// `scripts/attack.sh` runs this suite (and the key server's, `AttackServerTests`) on its own.
@Suite("Attacks on the lease, through the command line and the files")
struct AttackTests {
    // MARK: Helpers

    /// `stowage ARGUMENTS` for `fixture`'s client, to completion.
    static func stowage(
        _ arguments: [String],
        _ fixture: DownloadFixture,
        token: String? = nil,
        environment extra: [String: String] = [:],
        standardInput: URL? = nil,
        under wrapper: [String] = []
    ) async throws -> (status: Int32, output: String, error: String) {
        let environment = ServiceCommandTests.environment(home: fixture.clientDirectory.url, token: token).merging(extra) { $1 }
        let binary = try TestSupport.stowageBinary
        let result = try await ProcessRunner.run(
            wrapper.first.map { URL(fileURLWithPath: $0) } ?? binary,
            wrapper.isEmpty ? arguments : Array(wrapper.dropFirst()) + [binary.path] + arguments,
            environment: environment,
            standardInput: standardInput,
            timeout: .seconds(120)
        )
        return (result.status, String(decoding: result.standardOutput, as: UTF8.self), String(decoding: result.standardError, as: UTF8.self))
    }

    /// `sqlite3 stowage.sqlite SQL` (with `.mode` commands before it when given), as a curious user edits the database.
    @discardableResult
    static func sqlite(_ fixture: DownloadFixture, _ sql: String, mode: String? = nil) async throws -> String {
        let database = fixture.clientDirectory.url.appendingPathComponent("stowage.sqlite").path
        let result = try await ProcessRunner.run(program: "sqlite3", [database] + (mode.map { [$0] } ?? []) + [sql])
        try #require(result.status == 0, "sqlite3: \(String(decoding: result.standardError, as: UTF8.self))")
        return String(decoding: result.standardOutput, as: UTF8.self)
    }

    /// The rows of `table` as SQL `INSERT` statements, to put back later (`sqlite3 .mode insert`).
    static func dump(_ fixture: DownloadFixture, _ table: String) async throws -> String {
        try await sqlite(fixture, "SELECT * FROM \(table);", mode: ".mode insert \(table)")
    }

    /// The key server's default policy with a playback window of `seconds` (and the rental rule when asked).
    static func policy(_ fixture: DownloadFixture, playbackSeconds: Int64? = nil, _ change: (inout AssetPolicy) -> Void = { _ in }) throws {
        var configuration = try fixture.keyServer.loadConfiguration()
        var policy = try #require(configuration.policies[configuration.defaultPolicy])
        if let playbackSeconds { policy.playbackDuration = playbackSeconds }
        change(&policy)
        configuration.policies[configuration.defaultPolicy] = policy
        try fixture.keyServer.saveConfiguration(configuration)
    }

    static func download(_ fixture: DownloadFixture, origin: URL, keyServer: URL, _ extra: [String] = []) async throws {
        let result = try await stowage(
            ["download", fixture.sourceURL(origin), "--key-server", keyServer.absoluteString] + extra,
            fixture,
            token: try await fixture.token()
        )
        try #require(result.status == 0, "download: \(result.error)")
    }

    /// Plays the asset to its end with headless ffmpeg: the first play, which starts the playback window.
    static func play(_ fixture: DownloadFixture, asset: String? = nil) async throws {
        let played = try await stowage(["play", asset ?? fixture.assetId, "--player", "ffmpeg-null", "--offline"], fixture)
        try #require(played.status == 0, "play: \(played.error)")
    }

    /// `stowage play` refuses with `code`.
    @discardableResult
    static func expectRefused(
        _ fixture: DownloadFixture,
        code: String,
        asset: String? = nil,
        environment: [String: String] = [:],
        under wrapper: [String] = []
    ) async throws
        -> String
    {
        let refused = try await stowage(
            ["play", asset ?? fixture.assetId, "--player", "ffmpeg-null"],
            fixture,
            environment: environment,
            under: wrapper
        )
        #expect(refused.status != 0, "play was served: \(refused.output)")
        let line = refused.error.split(separator: "\n").last.map(String.init) ?? ""
        #expect(line.hasSuffix("[\(code)]"), "expected \(code): \(refused.error)")
        return line
    }

    /// Starts `stowage play ASSET --player none --offline` and waits for the URL it prints (nil when it refused).
    static func startPlay(_ fixture: DownloadFixture) async throws -> (RunningProcess, URL?) {
        let play = try ProcessRunner.start(
            try TestSupport.stowageBinary,
            ["play", fixture.assetId, "--player", "none", "--offline"],
            environment: ServiceCommandTests.environment(home: fixture.clientDirectory.url)
        )
        for _ in 0..<200 where play.isRunning {
            let line = String(decoding: try play.standardOutput(), as: UTF8.self).split(separator: "\n")
                .first { $0.hasPrefix("playing http://127.0.0.1:") }
            if let line { return (play, URL(string: String(line.dropFirst("playing ".count)))) }
            try await Task.sleep(for: .milliseconds(50))
        }
        return (play, nil)
    }

    static var anchorURL: (DownloadFixture) -> URL { { $0.clientDirectory.url.appendingPathComponent("key-store.anchor") } }

    /// Waits until `deadline` (wall clock): the lease windows here are real seconds, as a user lives them.
    static func wait(until deadline: Date) async throws {
        let left = deadline.timeIntervalSinceNow
        if left > 0 { try await Task.sleep(for: .milliseconds(Int(left * 1000) + 100)) }
    }

    // MARK: Finding 5: erase and restore

    /// Rows of `key_leases` and `key_lease_payloads` saved before the first play; after the playback window ended,
    /// every lease row, the time rows and `key-store.anchor` deleted, any command run (it makes a fresh anchor), the
    /// saved rows put back: the lease is not vouched for by the new ledger and stays refused until renewed online.
    @Test("erase everything, let a command make a fresh anchor, put the saved rows back: refused until renewed")
    func eraseAndRestoreRows() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try Self.policy(fixture, playbackSeconds: 6)
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
            let leases = try await Self.dump(fixture, "key_leases")
            let payloads = try await Self.dump(fixture, "key_lease_payloads")
            #expect(leases.contains("INSERT INTO key_leases") && payloads.contains("INSERT INTO key_lease_payloads"))
            let started = Date()
            try await Self.play(fixture)
            try await Self.wait(until: started.addingTimeInterval(7))
            // Opening the store after the window erases the keys.
            try await Self.expectRefused(fixture, code: "lease_expired")

            try await Self.sqlite(fixture, "DELETE FROM key_leases; DELETE FROM key_lease_payloads; DELETE FROM key_time_anchor;")
            try FileManager.default.removeItem(at: Self.anchorURL(fixture))
            #expect(try await Self.stowage(["list"], fixture).status == 0)
            #expect(FileManager.default.fileExists(atPath: Self.anchorURL(fixture).path))
            try await Self.sqlite(fixture, leases + payloads)

            let refused = try await Self.expectRefused(fixture, code: "lease_tampered")
            #expect(refused.contains("ledger"), "\(refused)")
            // The way out is the key server's to give.
            let renewed = try await Self.stowage(["keys", "renew", fixture.assetId], fixture, token: try await fixture.token())
            #expect(renewed.status == 0, "\(renewed.error)")
            #expect(try await Self.stowage(["play", fixture.assetId, "--player", "ffmpeg-null", "--offline"], fixture).status == 0)
        }
    }

    /// The same with the sealed anchor itself saved (`cp`) before the first play and put back with the rows: the anchor
    /// is then older than the moment it was put in place, which no unprivileged program can hide, and every lease it
    /// vouches for is held until renewed. Hiding the change time (every `statx` of the process failing, as strace can
    /// make it) does not help: an anchor whose change time cannot be read is not trusted.
    @Test(
        "save the anchor file and the rows before the first play, put them all back after the window: refused",
        arguments: ["as is", "statx failing under strace"]
    )
    func restoreRowsAndAnchor(_ how: String) async throws {
        let wrapper =
            how == "as is" ? [] : ["/usr/bin/strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=statx", "-e", "inject=statx:error=ENOSYS"]
        if let tool = wrapper.first {
            try #require(FileManager.default.isExecutableFile(atPath: tool), "strace is not installed (scripts/ensure-deps.sh installs it)")
        }
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try Self.policy(fixture, playbackSeconds: 6)
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
            let saved = try await Self.dump(fixture, "key_leases") + Self.dump(fixture, "key_lease_payloads") + Self.dump(fixture, "key_time_anchor")
            let copy = fixture.root.appendingPathComponent("anchor-copy")
            try FileManager.default.copyItem(at: Self.anchorURL(fixture), to: copy)
            let started = Date()
            try await Self.play(fixture)
            // Past the playback window: the restore comes from an earlier copy, of another generation than the record's.
            try await Self.wait(until: started.addingTimeInterval(7))
            // Opening the store after the window erases the keys.
            try await Self.expectRefused(fixture, code: "lease_expired")
            try await Self.sqlite(fixture, "DELETE FROM key_leases; DELETE FROM key_lease_payloads; DELETE FROM key_time_anchor;")
            try await Self.sqlite(fixture, saved)
            try FileManager.default.removeItem(at: Self.anchorURL(fixture))
            try FileManager.default.copyItem(at: copy, to: Self.anchorURL(fixture))
            // Backdated by hand as well: what `touch -d` can set (the modification time) is not what is checked.
            try FileManager.default.setAttributes([.modificationDate: started.addingTimeInterval(-3_600)], ofItemAtPath: Self.anchorURL(fixture).path)
            try await Self.expectRefused(fixture, code: "lease_tampered", under: wrapper)
        }
    }

    // MARK: Finding 6: a clock held back

    /// `stowage` under libfaketime frozen before the playback window's end, after it ended: the kernel's clock is read
    /// without the C library, and the disagreement is refused.
    @Test("play under an LD_PRELOAD time shim frozen before the window's end, after it ended: refused")
    func timeShim() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/faketime"),
            "faketime is not installed (scripts/ensure-deps.sh installs Debian's faketime)"
        )
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        // Long enough for the first play and the check while it is valid under a loaded run (at 6 s the window once
        // closed before the check, which then met lease_expired first).
        let window: TimeInterval = 15
        try Self.policy(fixture, playbackSeconds: Int64(window))
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
            let started = Date()
            try await Self.play(fixture)
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
            // Frozen (no "@"); monotonic clocks left alone.
            func underShim(at time: Date, _ arguments: [String], home: Bool = true) async throws -> (status: Int32, output: String, error: String) {
                let environment = ["FAKETIME_DONT_FAKE_MONOTONIC": "1", "TZ": "UTC"]
                let result = try await ProcessRunner.run(
                    URL(fileURLWithPath: "/usr/bin/faketime"),
                    ["-f", formatter.string(from: time)] + arguments,
                    environment: ServiceCommandTests.environment(home: fixture.clientDirectory.url).merging(environment) { $1 }
                )
                return (result.status, String(decoding: result.standardOutput, as: UTF8.self), String(decoding: result.standardError, as: UTF8.self))
            }
            let stowage = try TestSupport.stowageBinary.path
            // The shim works: the C library's clock is held where it is told.
            let shown = try await underShim(at: started.addingTimeInterval(-3_600), ["date", "-u", "+%s"])
            #expect(Int64(shown.output.trimmingCharacters(in: .whitespacesAndNewlines)) == Int64(started.timeIntervalSince1970) - 3_600)
            // While the lease is valid, a process whose clock disagrees with the kernel's is refused for that alone.
            let disagreeing = try await underShim(
                at: started.addingTimeInterval(-3_600),
                [stowage, "play", fixture.assetId, "--player", "ffmpeg-null"]
            )
            #expect(disagreeing.status != 0 && disagreeing.error.contains("[clock_untrustworthy]"), "\(disagreeing.error)")
            #expect(disagreeing.error.contains("LD_PRELOAD"), "\(disagreeing.error)")
            // After the window, the user runs stowage under the shim only, held before the window's end: the kernel's
            // clock says the window is over.
            try await Self.wait(until: started.addingTimeInterval(window + 1))
            let held = try await underShim(at: started.addingTimeInterval(2), [stowage, "play", fixture.assetId, "--player", "ffmpeg-null"])
            #expect(held.status != 0, "played after the window under a clock held back: \(held.output)")
            // The kernel's clock decides that the lease ended, before any comparison of clocks.
            #expect(["[lease_expired]", "[playback_window_expired]"].contains { held.error.contains($0) }, "\(held.error)")
        }
    }

    // MARK: Red team: the data directory mounted over

    /// In a user namespace of one's own, an overlay mounted over the data directory keeps every write away from the
    /// real files (and every change time as it was), so each session would start from the same state: playback refuses
    /// to run there.
    @Test("play in a user namespace with an overlay over the data directory: refused")
    func overlayInAUserNamespace() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
        }
        let home = fixture.clientDirectory.url.path
        let upper = fixture.root.appendingPathComponent("upper").path
        let work = fixture.root.appendingPathComponent("work").path
        let script = """
            set -e
            mkdir -p \(upper) \(work)
            mount -t overlay overlay -o lowerdir=\(home),upperdir=\(upper),workdir=\(work) \(home)
            echo mounted
            exec "\(try TestSupport.stowageBinary.path)" play \(fixture.assetId) --player ffmpeg-null --offline
            """
        let result = try await ProcessRunner.run(
            program: "unshare",
            ["-r", "-m", "sh", "-c", script],
            environment: ServiceCommandTests.environment(home: fixture.clientDirectory.url)
        )
        let output = String(decoding: result.standardOutput, as: UTF8.self)
        let error = String(decoding: result.standardError, as: UTF8.self)
        #expect(output.contains("mounted"), "the overlay was not mounted: \(error)")
        #expect(result.status != 0 && error.contains("[user_namespace_refused]"), "\(error)")
        // Outside, in the machine's own namespace, the same package plays.
        #expect(try await Self.stowage(["play", fixture.assetId, "--player", "ffmpeg-null", "--offline"], fixture).status == 0)
    }

    // MARK: Finding 7: a second key server's clock

    /// A lease held by a latch (its time record deleted with sqlite3) stays held when a second key server the user
    /// trusts, running six hours in the past, issues a lease for another asset; only a renewal of that very lease from
    /// its own key server clears it.
    @Test("a second key server with its clock in the past neither lowers the mark nor clears another lease's latch")
    func secondKeyServerInThePast() async throws {
        let first = try await DownloadFixture.make()
        defer { first.remove() }
        let past = KeyServerClock { Date().timeIntervalSince1970 - 6 * 3_600 }
        let second = try await DownloadFixture.make(assetId: "other-1", serverClock: past)
        defer { second.remove() }
        // It takes requests six hours off its own clock, so the user's device gets its lease.
        var configuration = try second.keyServer.loadConfiguration()
        configuration.maxClockSkew = 12 * 3_600
        try second.keyServer.saveConfiguration(configuration)
        try await first.withServers { origin, keyServer in
            try await Self.download(first, origin: origin, keyServer: keyServer)
            try await Self.sqlite(first, "DELETE FROM key_time_anchor;")
            try await Self.expectRefused(first, code: "lease_tampered")

            try await second.withServers { otherOrigin, otherKeyServer in
                let other = try await Self.stowage(
                    ["download", second.sourceURL(otherOrigin), "--key-server", otherKeyServer.absoluteString],
                    first,
                    token: try await second.token()
                )
                try #require(other.status == 0, "\(other.error)")
            }
            // The new lease plays; the held one is still held.
            #expect(try await Self.stowage(["play", "other-1", "--player", "ffmpeg-null", "--offline"], first).status == 0)
            try await Self.expectRefused(first, code: "lease_tampered")
            let renewed = try await Self.stowage(["keys", "renew", first.assetId], first, token: try await first.token())
            #expect(renewed.status == 0, "\(renewed.error)")
            #expect(try await Self.stowage(["play", first.assetId, "--player", "ffmpeg-null", "--offline"], first).status == 0)
        }
    }

    // MARK: Red team: a lease from a key server of one's own

    /// Before the first play: the real lease's rows set aside, a lease for the same asset and key ID fetched from a key
    /// server the user runs (its key random, its windows endless), the real rows put back. The asset may play under the
    /// user's lease, but only with that lease's keys: playing the real keys under it would never start the real lease's
    /// playback window. And a lease from another key server is not stored beside one that still holds keys.
    @Test("a lease from a key server of one's own never plays another lease's keys")
    func ownKeyServerLease() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        // The user's key server runs an hour in the past, so its lease is the older one: a store that took keys from
        // every lease, newest first, would then hand out the real lease's key.
        let own = try await DownloadFixture.make(assetId: "unrelated", serverClock: KeyServerClock { Date().timeIntervalSince1970 - 3_600 })
        defer { own.remove() }
        try Self.policy(own) { policy in
            policy.playbackDuration = nil
            policy.storageDuration = 3_650 * 86_400
        }
        var configuration = try own.keyServer.loadConfiguration()
        configuration.maxClockSkew = 12 * 3_600
        try own.keyServer.saveConfiguration(configuration)
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
            let clear = try Data(contentsOf: DownloadFixture.demoFixture.deletingLastPathComponent().appendingPathComponent("video/360p/seg_0.ts"))
            let keyID = try await Self.sqlite(fixture, "SELECT json_extract(key_ids, '$[0]') FROM key_leases;")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            try #require(keyID.count == 32)
            try await own.keyServer.addAsset(id: fixture.assetId, keyID: keyID, key: SecretBytes(try SecureRandom.bytes(count: 16)))
            let ownURL = try await own.withServers { _, ownKeyServer in
                let fetch = ["keys", "fetch", fixture.assetId, "--key-server", ownKeyServer.absoluteString]
                // With only the real lease's payload set aside (its row still there): refused.
                let payloads = try await Self.dump(fixture, "key_lease_payloads")
                try await Self.sqlite(fixture, "DELETE FROM key_lease_payloads;")
                let beside = try await Self.stowage(fetch, fixture, token: try await own.token())
                #expect(beside.status != 0 && beside.error.contains("[lease_from_another_key_server]"), "\(beside.error)")
                try await Self.sqlite(fixture, payloads)
                // With the real lease's rows set aside while the other is fetched, then put back.
                let saved = try await Self.dump(fixture, "key_leases") + Self.dump(fixture, "key_lease_payloads")
                try await Self.sqlite(fixture, "DELETE FROM key_lease_payloads; DELETE FROM key_leases;")
                let fetched = try await Self.stowage(fetch, fixture, token: try await own.token())
                try #require(fetched.status == 0, "\(fetched.error)")
                try await Self.sqlite(fixture, saved)
                return ownKeyServer.absoluteString
            }
            // Whatever plays, it is not the real content.
            if let served = try await Self.firstVideoSegment(fixture) {
                #expect(!served.isEmpty && served != clear, "the real content was served under a lease of the user's own key server")
            }
            // The oracle holds: with the user's own lease gone, the real lease plays the clear segment byte for byte
            // (whole-segment AES).
            let own = "(SELECT lease_id FROM key_leases WHERE key_server LIKE '\(ownURL.trimmingCharacters(in: ["/"]))%')"
            try await Self.sqlite(
                fixture,
                "DELETE FROM key_lease_payloads WHERE lease_id IN \(own); DELETE FROM key_leases WHERE lease_id IN \(own);"
            )
            #expect(try await Self.firstVideoSegment(fixture) == clear)
        }
    }

    /// The first video segment `stowage play` serves (fetched with curl, as a player would), nil when play refused.
    static func firstVideoSegment(_ fixture: DownloadFixture) async throws -> Data? {
        let (play, playing) = try await startPlay(fixture)
        defer { play.kill() }
        guard let entry = playing else { return nil }
        let master = String(decoding: try await ProcessRunner.run(program: "curl", ["-s", entry.absoluteString]).standardOutput, as: UTF8.self)
        let variant = try #require(master.split(separator: "\n").first { !$0.hasPrefix("#") && $0.contains("video") })
        let variantURL = try #require(URL(string: String(variant), relativeTo: entry))
        let media = String(decoding: try await ProcessRunner.run(program: "curl", ["-s", variantURL.absoluteString]).standardOutput, as: UTF8.self)
        let segment = try #require(media.split(separator: "\n").first { !$0.hasPrefix("#") })
        let segmentURL = try #require(URL(string: String(segment), relativeTo: variantURL))
        return try await ProcessRunner.run(program: "curl", ["-s", segmentURL.absoluteString]).standardOutput
    }

    // MARK: Finding 2: an edited manifest

    /// After the offline lease ended (returned), `manifest.json` edited so that the package seems to hold no key and
    /// only clear subtitles: `stowage play` must not offer the source's renditions online with a streaming lease.
    @Test("keys emptied and the encrypted renditions removed from manifest.json after the lease ended: no online stream")
    func editedManifest() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer, ["--subtitles", "all"])
            #expect(try await Self.stowage(["keys", "return", fixture.assetId], fixture).status == 0)
            let manifestURL = fixture.package.url.appendingPathComponent("manifest.json")
            var manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: manifestURL)) as? [String: Any])
            manifest["keys"] = [Any]()
            let renditions = try #require(manifest["renditions"] as? [[String: Any]])
            manifest["renditions"] = renditions.filter { ($0["kind"] as? String) == "subtitles" }
            #expect((manifest["renditions"] as? [Any])?.isEmpty == false)
            try JSONSerialization.data(withJSONObject: manifest).write(to: manifestURL)

            try await Self.expectRefused(fixture, code: "released")
            // The key server issued the download's lease and nothing after it.
            let audit = try await fixture.keyServer.openStore().auditRecords(limit: 1_000)
            #expect(audit.filter { $0.event == .issued }.count == 1, "\(audit.map { "\($0.event) \($0.operation)" })")
        }
    }

    // MARK: The lease row's authentication code

    /// A lease row whose state code was set to NULL with sqlite3 is tampered with, not unchecked.
    @Test("a lease row's state_mac set to NULL: refused as tampered")
    func nullStateCode() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
            try await Self.sqlite(fixture, "UPDATE key_leases SET state_mac = NULL;")
            try await Self.expectRefused(fixture, code: "lease_tampered")
        }
    }

    // MARK: Finding 3: secrets on command lines and at rest

    /// The token is never on the command line (a value there is refused), another user reading the running download's
    /// command line does not find it, and the data directory keeps it sealed: not in the database or its WAL.
    @Test("the token: refused on the command line, not on it for another user while the download runs, sealed at rest")
    func tokenStaysSecret() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withServers(conditions: try #require(NetworkConditions.profile(named: "3g"))) { origin, keyServer in
            let refused = try await Self.stowage(
                ["download", fixture.sourceURL(origin), "--key-server", keyServer.absoluteString, "--token", token],
                fixture
            )
            #expect(refused.status != 0 && refused.error.contains("[secret_on_command_line]"), "\(refused.error)")
            #expect(!refused.error.contains(token))
            // The same for a credential header, and a proxy's password.
            for extra in [["--header", "Authorization: Bearer \(token)"], ["--proxy", "http://user:\(token)@127.0.0.1:3128"]] {
                let other = try await Self.stowage(["download", fixture.sourceURL(origin)] + extra, fixture, token: token)
                #expect(other.status != 0 && other.error.contains("[secret_on_command_line]") && !other.error.contains(token), "\(other.error)")
            }

            // From standard input, in a download slow enough to look at while it runs.
            let input = fixture.root.appendingPathComponent("token-input")
            try Data(token.utf8).write(to: input)
            let running = try ProcessRunner.start(
                try TestSupport.stowageBinary,
                ["download", fixture.sourceURL(origin), "--key-server", keyServer.absoluteString, "--token", "-"],
                environment: ServiceCommandTests.environment(home: fixture.clientDirectory.url),
                standardInput: input
            )
            let pid = running.processIdentifier
            var commandLine = Data()
            for _ in 0..<100 where running.isRunning {
                commandLine = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
                if String(decoding: commandLine, as: UTF8.self).contains("download") { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(String(decoding: commandLine, as: UTF8.self).contains("download"), "the download ended before it could be looked at")
            #expect(!String(decoding: commandLine, as: UTF8.self).contains(token))
            if getuid() == 0 {
                // Another user reads the command line as that user can: it shows the command, and no token.
                let other = try await ProcessRunner.run(program: "runuser", ["-u", "nobody", "--", "cat", "/proc/\(pid)/cmdline"])
                let seen = String(decoding: other.standardOutput, as: UTF8.self)
                #expect(seen.contains("download") && !seen.contains(token), "\(seen)")
            }
            let finished = try await running.waitForExit(timeout: .seconds(120))
            #expect(finished.status == 0, "\(String(decoding: finished.standardError, as: UTF8.self))")
            // Sealed, it still serves what the data directory keeps it for: keys fetched again with the download's token.
            #expect(try await Self.stowage(["keys", "return", fixture.assetId], fixture).status == 0)
            let fetched = try await Self.stowage(["keys", "fetch", fixture.assetId], fixture)
            #expect(fetched.status == 0, "\(fetched.error)")
        }
        let stored = try await Self.sqlite(fixture, "SELECT request || hex(ifnull(secrets, '')) FROM download_tasks;")
        #expect(!stored.isEmpty && !stored.contains(token))
        for file in ["stowage.sqlite", "stowage.sqlite-wal"] {
            let bytes = (try? Data(contentsOf: fixture.clientDirectory.url.appendingPathComponent(file))) ?? Data()
            #expect(bytes.range(of: Data(token.utf8)) == nil, "the token is in the clear in \(file)")
        }
    }

    /// A player (and whatever plugin it loads) started by `stowage play` does not see the token the user exported for
    /// Stowage: its environment is Stowage's without `STOWAGE_TOKEN`.
    @Test("a player started by stowage play does not inherit STOWAGE_TOKEN")
    func thePlayerDoesNotInheritTheToken() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
        }
        // A stand-in for ffmpeg, first on PATH, that writes down the environment it was given.
        let bin = fixture.root.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let dump = fixture.root.appendingPathComponent("player-environment")
        let player = bin.appendingPathComponent("ffmpeg")
        try Data("#!/bin/sh\nenv > '\(dump.path)'\n".utf8).write(to: player)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: player.path)
        let path = bin.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let played = try await Self.stowage(
            ["play", fixture.assetId, "--player", "ffmpeg-null", "--offline"],
            fixture,
            token: token,
            environment: ["PATH": path]
        )
        #expect(played.status == 0, "\(played.error)")
        let seen = try String(contentsOf: dump, encoding: .utf8)
        #expect(seen.contains("PATH=\(bin.path)") && !seen.contains(token), "\(seen)")
    }

    // MARK: Finding 4: another user and the one-time URL

    /// Another local user who reads the player's command line and asks for the one-time URL first gets nothing and
    /// leaves the URL to the real player; the refusal is logged.
    @Test(
        "another user asking for the one-time play URL first: 404, and the real player still gets it",
        .enabled(if: getuid() == 0, "needs root to run curl as another user (runuser)")
    )
    func anotherUserCannotClaimThePlayURL() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
            let (play, url) = try await Self.startPlay(fixture)
            defer { play.kill() }
            let stderr = String(decoding: (try? play.standardError()) ?? Data(), as: UTF8.self)
            let entry = try #require(url, "play printed no URL: \(stderr)").absoluteString
            let stolen = try await ProcessRunner.run(
                program: "runuser",
                ["-u", "nobody", "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", entry]
            )
            #expect(String(decoding: stolen.standardOutput, as: UTF8.self) == "404")
            let real = try await ProcessRunner.run(program: "curl", ["-s", "-w", "\n%{http_code}", entry])
            let answer = String(decoding: real.standardOutput, as: UTF8.self)
            #expect(answer.hasSuffix("\n200") && answer.contains("#EXTM3U"), "\(answer)")
            play.interrupt()
            _ = try await play.waitForExit(timeout: .seconds(30))
            let errors = try String(contentsOf: fixture.package.errorLogURL, encoding: .utf8)
            #expect(errors.contains("playback_url_other_user"), "\(errors)")
        }
    }
}
