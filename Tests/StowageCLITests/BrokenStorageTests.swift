import DownloadTestSupport
import Foundation
import OfflinePackage
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 15's broken storage, as a user meets it: a `stowage.sqlite` truncated or overwritten, and a data directory on
/// a read-only mount. Every command says what is wrong in the one error shape, names the file, and loses nothing;
/// `stowage recover` sets the damaged file aside, and `stowage keys fetch` brings the keys back without fetching media,
/// after which ffmpeg reads the same video packets from `stowage play` as from the clear twin.
@Suite("Broken storage: a damaged state database, a read-only data directory, keys fetched again")
struct BrokenStorageTests {
    /// Downloads the fixture's asset with the CLI into the fixture's client directory.
    static func download(_ fixture: DownloadFixture, origin: URL, keyServer: URL) async throws {
        let download = try await ServiceCommandTests.stowage(
            ["download", fixture.sourceURL(origin), "--subtitles", "none", "--key-server", keyServer.absoluteString],
            home: fixture.clientDirectory.url,
            token: try await fixture.token()
        )
        try #require(download.status == 0, "\(String(decoding: download.standardError, as: UTF8.self))")
    }

    /// Every file of the data directory's packages, by path, with its bytes.
    static func packageFiles(_ home: URL) throws -> [String: Data] {
        let packages = home.appendingPathComponent("packages")
        var files: [String: Data] = [:]
        for path in try FileManager.default.subpathsOfDirectory(atPath: packages.path) {
            let url = packages.appendingPathComponent(path)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            // The access and error logs grow with every command that serves; what a package holds is the rest.
            guard !path.contains("/logs/") else { continue }
            files[path] = try Data(contentsOf: url)
        }
        return files
    }

    /// ffmpeg's video packets of the asset as `stowage play --offline` serves it.
    static func playedVideo(_ assetId: String, home: URL) async throws -> [String] {
        let play = try ProcessRunner.start(
            try TestSupport.stowageBinary,
            ["play", assetId, "--player", "none", "--offline"],
            environment: ServiceCommandTests.environment(home: home)
        )
        defer {
            play.interrupt()
        }
        var served: URL?
        for _ in 0..<200 where served == nil {
            let output = String(decoding: (try? play.standardOutput()) ?? Data(), as: UTF8.self)
            if let match = output.firstMatch(of: /http:\/\/127\.0\.0\.1:\d+\/\S+\.m3u8/) { served = URL(string: String(match.output)) }
            guard play.isRunning else { break }
            if served == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard let served else {
            throw FrameHashes.Failure(
                description: "stowage play printed no URL: \(String(decoding: (try? play.standardError()) ?? Data(), as: UTF8.self))"
            )
        }
        let hashes = try await FrameHashes.of(served, map: "0:v:0")
        play.interrupt()
        _ = try await play.waitForExit(timeout: .seconds(20))
        return hashes
    }

    /// The clear twin of the package's video rendition: the fixture's playlist of the variant it was downloaded from.
    static func clearVideo(_ fixture: DownloadFixture) throws -> URL {
        let manifest = try fixture.package.readManifest()
        let video = try #require(manifest.renditions.first { $0.kind == .video })
        let variant = try #require(video.sourceURL.firstMatch(of: /video\/([^\/]+)\/index\.m3u8/)).output.1
        return DownloadFixture.repositoryRoot.appendingPathComponent("Fixtures/demo/video/\(variant)/index.m3u8")
    }

    /// ffmpeg reads from `stowage play` the video packets it reads from the clear twin, and there are some.
    static func expectClearPackets(_ fixture: DownloadFixture, home: URL, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let clear = try await FrameHashes.of(try clearVideo(fixture), map: "0:v:0")
        #expect(clear.count > 10, sourceLocation: sourceLocation)
        let played = try await playedVideo(fixture.assetId, home: home)
        #expect(played == clear, "\(played.count) packets played, \(clear.count) in the clear twin", sourceLocation: sourceLocation)
    }

    @Test(
        "a damaged stowage.sqlite: every command says database_damaged naming the file; recover sets it aside, keys fetch brings the keys back, and play serves the clear twin's packets",
        arguments: ["truncated", "header overwritten"]
    )
    func damagedDatabase(damage: String) async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let home = fixture.clientDirectory.url
        let database = home.appendingPathComponent("stowage.sqlite")
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
            let before = try Self.packageFiles(home)
            #expect(!before.isEmpty)

            // Into the file goes what its WAL holds (SQLite reads a page from the WAL before the file), so the damage is
            // all there is; Python's sqlite3 is an SQLite nobody here configured.
            let checkpoint = try await ProcessRunner.run(
                program: "python3",
                [
                    "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchall(); c.close()",
                    database.path,
                ]
            )
            try #require(checkpoint.status == 0, "\(String(decoding: checkpoint.standardError, as: UTF8.self))")
            let wal = (try? FileManager.default.attributesOfItem(atPath: database.path + "-wal")[.size] as? Int) ?? 0
            try #require(wal == 0, "the WAL still holds \(wal) bytes")
            let handle = try FileHandle(forUpdating: database)
            switch damage {
            case "truncated":
                try handle.truncate(atOffset: 8192)
            default:
                try handle.seek(toOffset: 0)
                handle.write(Data(repeating: 0x5a, count: 100))
            }
            try handle.close()

            for arguments in [["list"], ["info", fixture.assetId], ["verify", fixture.assetId], ["keys", "list"]] {
                let failure = try await ErrorShapeTests.expectFailure(arguments, code: "database_damaged", home: home)
                #expect(failure?.line.contains(database.path) == true, "the file is not named: \(failure?.line ?? "")")
                #expect(failure?.line.contains("stowage recover") == true)
            }
            try await ErrorShapeTests.expectPlainFailure(["play", fixture.assetId, "--player", "none"], code: "database_damaged", home: home)
            #expect(try Self.packageFiles(home) == before, "a failing command changed a package")

            // Not while a download holds an asset (flock(1) standing in, named in the file as a holder names itself).
            let lock = home.appendingPathComponent("locks/\(fixture.assetId).lock")
            // Like a Stowage holder, flock(1) names itself in the file once it holds the lock (its command writes the
            // name, flock keeping the lock to itself with -o); the test waits for the name, never probing the lock.
            let holder = try ProcessRunner.start(
                URL(fileURLWithPath: "/usr/bin/flock"),
                ["-o", lock.path, "/bin/sh", "-c", #"echo "process $PPID (a download)" > "$0" && exec sleep 30"#, lock.path]
            )
            let name = "process \(holder.processIdentifier) (a download)"
            for _ in 0..<500 where (try? String(contentsOf: lock, encoding: .utf8))?.hasPrefix(name) != true {
                try await Task.sleep(for: .milliseconds(20))
            }
            let busy = try await ErrorShapeTests.expectFailure(["recover"], code: "data_directory_busy", home: home)
            #expect(busy?.line.contains("process \(holder.processIdentifier)") == true, "\(busy?.line ?? "")")
            holder.killProcessGroup()
            _ = try await holder.waitForExit(timeout: .seconds(10))

            // Recovery: the damaged file is renamed, never deleted, and the packages stay as they were.
            let recover = try await ServiceCommandTests.stowage(["recover", "--json"], home: home)
            try #require(recover.status == 0, "\(String(decoding: recover.standardError, as: UTF8.self))")
            let report = try #require(try JSONSerialization.jsonObject(with: recover.standardOutput) as? [String: Any])
            let aside = try #require(report["setAsideAt"] as? String)
            #expect(aside.hasPrefix(database.path + ".damaged-"))
            #expect(FileManager.default.fileExists(atPath: aside))
            let assets = report["assets"] as? [[String: Any]] ?? []
            #expect(assets.map { $0["assetId"] as? String } == [fixture.assetId])
            #expect(assets.first?["needsKeys"] as? Bool == true)
            #expect(try Self.packageFiles(home) == before, "recover changed a package")
            try await ErrorShapeTests.expectFailure(["recover"], code: "database_not_damaged", home: home)

            // The leases went with the file: play refuses until the keys are fetched again, here with no download
            // record to take the key server and token from.
            try await ErrorShapeTests.expectPlainFailure(["play", fixture.assetId, "--player", "none"], code: "no_lease", home: home)
            try await ErrorShapeTests.expectFailure(["keys", "fetch", fixture.assetId], code: "no_key_server", home: home)
            try await ErrorShapeTests.expectFailure(
                ["keys", "fetch", fixture.assetId, "--key-server", keyServer.absoluteString],
                code: "no_token",
                home: home
            )
            let fetch = try await ServiceCommandTests.stowage(
                ["keys", "fetch", fixture.assetId, "--key-server", keyServer.absoluteString, "--json"],
                home: home,
                token: try await fixture.token()
            )
            try #require(fetch.status == 0, "\(String(decoding: fetch.standardOutput + fetch.standardError, as: UTF8.self))")
            let fetched = try #require(try JSONSerialization.jsonObject(with: fetch.standardOutput) as? [String: Any])
            #expect((fetched["leaseIds"] as? [String])?.count == 1)
            #expect(fetched["skdKeys"] as? Int ?? 0 > 0)

            let verify = try await ServiceCommandTests.stowage(["verify", fixture.assetId, "--deep"], home: home)
            #expect(verify.status == 0, "\(String(decoding: verify.standardOutput, as: UTF8.self))")
            try await Self.expectClearPackets(fixture, home: home)
            #expect(try Self.packageFiles(home) == before)
        }
    }

    @Test("keys fetch after keys return: the keys come back from the download's key server and token, and are not fetched twice")
    func fetchAfterReturn() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let home = fixture.clientDirectory.url
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
            let returned = try await ServiceCommandTests.stowage(["keys", "return", fixture.assetId], home: home)
            try #require(returned.status == 0)
            let refused = try await ErrorShapeTests.expectPlainFailure(["play", fixture.assetId, "--player", "none"], code: "released", home: home)
            #expect(refused.contains("stowage keys fetch \(fixture.assetId)"), "\(refused)")

            let fetch = try await ServiceCommandTests.stowage(["keys", "fetch", fixture.assetId], home: home)
            let output = String(decoding: fetch.standardOutput, as: UTF8.self)
            try #require(fetch.status == 0, "\(output)\(String(decoding: fetch.standardError, as: UTF8.self))")
            #expect(output.contains("lease "), "\(output)")
            try await Self.expectClearPackets(fixture, home: home)

            let again = try await ServiceCommandTests.stowage(["keys", "fetch", fixture.assetId, "--json"], home: home)
            #expect(again.status == 0)
            let document = try JSONSerialization.jsonObject(with: again.standardOutput) as? [String: Any]
            #expect((document?["leaseIds"] as? [String]) == [], "fetched again: \(String(decoding: again.standardOutput, as: UTF8.self))")
            try await ErrorShapeTests.expectFailure(["keys", "fetch", "nosuch"], code: "package_not_found", home: home)
        }
    }

    /// Runs `stowage` with `home` read-only to it: a read-only bind mount in a mount namespace of its own when run as
    /// root (root passes permission checks), else the directory's write permission taken away for the call.
    static func stowageReadOnly(_ arguments: [String], home: URL) async throws -> ProcessRunner.Output {
        let binary = try TestSupport.stowageBinary
        guard geteuid() == 0 else {
            try FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: home.path)
            defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: home.path) }
            return try await ServiceCommandTests.stowage(arguments, home: home)
        }
        let script = #"mount --bind "$STOWAGE_HOME" "$STOWAGE_HOME" && mount -o remount,bind,ro "$STOWAGE_HOME" && exec "$0" "$@""#
        return try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/unshare"),
            ["-m", "/bin/sh", "-c", script, binary.path] + arguments,
            environment: ServiceCommandTests.environment(home: home),
            timeout: .seconds(60)
        )
    }

    @Test("stowage.sqlite held locked by another process past the busy timeout: database_failure saying so, and nothing lost")
    func lockedStateDatabase() async throws {
        let home = try TestSupport.temporaryDirectory("locked-state")
        defer { try? FileManager.default.removeItem(at: home) }
        let made = try await ServiceCommandTests.stowage(["keys", "list"], home: home)
        try #require(made.status == 0, "\(String(decoding: made.standardError, as: UTF8.self))")
        let database = home.appendingPathComponent("stowage.sqlite").path
        // An sqlite3 shell left open in a write transaction, with the file to itself (a WAL file in exclusive locking
        // mode keeps even readers out). It waits for the lock itself: the probes below may be reading at that moment.
        let script = home.appendingPathComponent("hold.sql")
        try ".timeout 20000\nPRAGMA locking_mode=EXCLUSIVE;\nBEGIN EXCLUSIVE;\n.shell sleep 300\nCOMMIT;\n".write(
            to: script,
            atomically: true,
            encoding: .utf8
        )
        let holder = try ProcessRunner.start(URL(fileURLWithPath: "/usr/bin/sqlite3"), [database], standardInput: script)
        defer { holder.killProcessGroup() }
        var held = false
        var probed = ""
        for _ in 0..<80 where !held {
            let probe = try await ProcessRunner.run(program: "sqlite3", ["-cmd", ".timeout 0", database, "SELECT count(*) FROM sqlite_master"])
            probed = String(decoding: probe.standardOutput + probe.standardError, as: UTF8.self)
            held = probed.contains("locked")
            if !held { try await Task.sleep(for: .milliseconds(250)) }
        }
        let holderSaid = String(decoding: (try? holder.standardError()) ?? Data(), as: UTF8.self)
        try #require(held, "the sqlite3 shell did not take the lock: \(probed) / \(holderSaid) running: \(holder.isRunning)")
        // A command that does not use the file does not wait on its lock (30 s): every command records the time in it
        // first, for a second at most.
        let playlist = TestSupport.fixtures.appendingPathComponent("demo/master.m3u8").path
        let inspected = try await ServiceCommandTests.stowage(["inspect", playlist], home: home, timeout: .seconds(20))
        #expect(inspected.status == 0 && !inspected.timedOut, "\(String(decoding: inspected.standardError, as: UTF8.self))")
        let failure = try await ErrorShapeTests.expectFailure(["keys", "list"], code: "database_failure", home: home)
        let line = failure?.line ?? ""
        #expect(
            line.contains(database) && line.contains("stayed locked by another process for 30 s") && line.contains("nothing was changed"),
            "\(line)"
        )
        holder.killProcessGroup()
        _ = try await holder.waitForExit(timeout: .seconds(10))
        let listed = try await ServiceCommandTests.stowage(["keys", "list"], home: home)
        #expect(listed.status == 0, "\(String(decoding: listed.standardError, as: UTF8.self))")
    }

    /// Runs `stowage` without the power to read files its permissions refuse: as root, with CAP_DAC_OVERRIDE and
    /// CAP_DAC_READ_SEARCH dropped (root passes permission checks otherwise); as anyone else, as it is. `token` goes in
    /// `STOWAGE_TOKEN`.
    static func stowageWithoutOverride(_ arguments: [String], home: URL, token: String? = nil) async throws -> ProcessRunner.Output {
        guard geteuid() == 0 else { return try await ServiceCommandTests.stowage(arguments, home: home, token: token) }
        let drop = "-dac_override,-dac_read_search"
        return try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--inh-caps=\(drop)", "--bounding-set=\(drop)", try TestSupport.stowageBinary.path] + arguments,
            environment: ServiceCommandTests.environment(home: home, token: token),
            timeout: .seconds(60)
        )
    }

    @Test("a packages folder the process may not write to: download fails with package_write_failed naming it; nothing is complete")
    func unwritablePackagesFolder() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let home = fixture.clientDirectory.url
        let packages = home.appendingPathComponent("packages")
        try FileManager.default.createDirectory(at: packages, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: packages.path)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: packages.path) }
        try await fixture.withServers { origin, keyServer in
            let arguments = ["download", fixture.sourceURL(origin), "--subtitles", "none", "--key-server", keyServer.absoluteString, "--json"]
            let token = try await fixture.token()
            let failed = try await Self.stowageWithoutOverride(arguments, home: home, token: token)
            let output = String(decoding: failed.standardOutput, as: UTF8.self)
            #expect(failed.status != 0 && !failed.timedOut, "\(output)")
            let last = output.split(separator: "\n").last.map(String.init) ?? ""
            #expect(last.contains(#""code":"package_write_failed""#), "\(output)")
            #expect(last.contains(packages.path) && last.contains("ermission denied") && last.contains("run the same"), "\(last)")
            // Nothing had begun, so nothing is left to resume: writable again, the same command completes it.
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: packages.path)
            let resume = try await ServiceCommandTests.stowage(["resume", fixture.assetId], home: home)
            #expect(String(decoding: resume.standardError, as: UTF8.self).contains("[download_not_found]"))
            let again = try await ServiceCommandTests.stowage(Array(arguments.dropLast()), home: home, token: token, timeout: .seconds(120))
            #expect(again.status == 0, "\(String(decoding: again.standardOutput + again.standardError, as: UTF8.self))")
            try fixture.assertPackageMatchesSource(try fixture.package.readManifest(), origin: origin)
        }
    }

    @Test("a segment the process may not read: verify --deep says file_unreadable for it, changes nothing, and passes once readable")
    func unreadableSegment() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let home = fixture.clientDirectory.url
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
        }
        let manifest = try fixture.package.readManifest()
        let segment = try #require(manifest.renditions.first?.segments.dropFirst().first?.file)
        let url = try fixture.package.url(forRelativePath: segment.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: url.path)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path) }
        // The test proves something only when the file is really unreadable to the command.
        let probe = try await Self.stowageWithoutOverride(["verify", fixture.assetId, "--deep", "--json"], home: home)
        let stdout = String(decoding: probe.standardOutput, as: UTF8.self)
        #expect(probe.status != 0 && !probe.timedOut, "status \(probe.status): \(stdout)")
        #expect(stdout.contains(#""file_unreadable""#) && stdout.contains(segment.path), "\(stdout)")
        let plain = try await Self.stowageWithoutOverride(["verify", fixture.assetId, "--deep"], home: home)
        let text = String(decoding: plain.standardOutput + plain.standardError, as: UTF8.self)
        #expect(text.contains("cannot read \(segment.path)") && text.contains("permission"), "\(text)")
        #expect(try fixture.package.readManifest() == manifest)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        let readable = try await Self.stowageWithoutOverride(["verify", fixture.assetId, "--deep"], home: home)
        #expect(readable.status == 0, "\(String(decoding: readable.standardOutput + readable.standardError, as: UTF8.self))")
    }

    @Test("a read-only data directory: every command says data_directory_unwritable in the one shape, and nothing changes")
    func readOnlyDataDirectory() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let home = fixture.clientDirectory.url
        try await fixture.withServers { origin, keyServer in
            try await Self.download(fixture, origin: origin, keyServer: keyServer)
        }
        // The mount works here, or the test says why it could not make the directory read-only.
        let probe = try await Self.stowageReadOnly(["list"], home: home)
        let probeError = String(decoding: probe.standardError, as: UTF8.self)
        try #require(!probeError.contains("mount:") && !probeError.contains("unshare:"), "cannot mount read-only here: \(probeError)")

        let before = try Self.packageFiles(home)
        let database = try Data(contentsOf: home.appendingPathComponent("stowage.sqlite"))
        for arguments in [
            ["list"], ["info", fixture.assetId], ["verify", fixture.assetId], ["keys", "list"], ["play", fixture.assetId, "--player", "none"],
            ["recover"], ["delete", fixture.assetId],
        ] {
            for json in [false, true] where !(json && arguments[0] == "play") {
                let result = try await Self.stowageReadOnly(arguments + (json ? ["--json"] : []), home: home)
                let stderr = String(decoding: result.standardError, as: UTF8.self)
                let stdout = String(decoding: result.standardOutput, as: UTF8.self)
                #expect(result.status != 0 && !result.timedOut, "stowage \(arguments): status \(result.status)")
                if json {
                    #expect(stdout.contains(#""code":"data_directory_unwritable""#), "stowage \(arguments) --json: \(stdout)")
                } else {
                    let lines = stderr.split(separator: "\n")
                    #expect(lines.count == 1 && lines.first?.hasSuffix("[data_directory_unwritable]") == true, "stowage \(arguments): \(stderr)")
                    // The reason in words: a read-only mount as root, the missing write permission otherwise.
                    #expect(stderr.contains(home.path) && stderr.contains(geteuid() == 0 ? "read-only" : "permission denied"), "\(stderr)")
                }
            }
        }
        #expect(try Self.packageFiles(home) == before)
        #expect(try Data(contentsOf: home.appendingPathComponent("stowage.sqlite")) == database)
        // Writable again, the asset plays as before.
        let verify = try await ServiceCommandTests.stowage(["verify", fixture.assetId], home: home)
        #expect(verify.status == 0, "\(String(decoding: verify.standardOutput, as: UTF8.self))")
    }
}
