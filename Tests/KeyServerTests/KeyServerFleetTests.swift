import AsyncHTTPClient
import Foundation
import KeyDelivery
import KeyServer
import NIOCore
import NIOHTTP1
import StowageCrypto
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `stowage keyserver` as a fleet runs it: several `run` processes, one data directory's keys, one PostgreSQL database.
@Suite("Key server fleet on PostgreSQL (stowage keyserver init/add-asset/run --database)")
struct KeyServerFleetTests {
    /// `stowage keyserver ARGUMENTS`, to completion.
    static func keyserver(
        _ arguments: [String],
        environment: [String: String] = [:],
        standardInput: String? = nil
    ) async throws -> (status: Int32, output: String) {
        var input: URL?
        if let standardInput {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("stdin-\(UUID().uuidString)")
            try Data(standardInput.utf8).write(to: file)
            input = file
        }
        defer { if let input { try? FileManager.default.removeItem(at: input) } }
        let result = try await ProcessRunner.run(
            try StowageExecutable.url(),
            ["keyserver"] + arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            standardInput: input,
            timeout: .seconds(60)
        )
        return (result.status, String(decoding: result.standardOutput + result.standardError, as: UTF8.self))
    }

    /// `stowage keyserver init --database`, and with `addingMovie` `add-asset movie-1` with the fixture's first movie key.
    static func initialize(_ dataDirectory: String, database: String, addingMovie: Bool = false) async throws {
        let initialized = try await keyserver(["init", "--data-dir", dataDirectory, "--database", database])
        try #require(initialized.status == 0, "\(initialized.output)")
        try generousDatabaseTimeout(KeyServerDataDirectory(path: dataDirectory, database: database))
        guard addingMovie else { return }
        // The content key on standard input: never on a command line.
        let added = try await keyserver(
            ["add-asset", "movie-1", "--key-id", KeyServerFixture.movieKeyIDs[0], "--key", "-", "--data-dir", dataDirectory]
                + ["--database", database],
            standardInput: KeyServerFixture.movieKeys[0]
        )
        try #require(added.status == 0, "\(added.output)")
    }

    /// config.json's databaseTimeout raised from 10 s to 120 s: the whole suite loads the machine, and these tests are
    /// about the fleet's behaviour, not the database's speed.
    static func generousDatabaseTimeout(_ directory: KeyServerDataDirectory) throws {
        var configuration = try directory.loadConfiguration()
        configuration.databaseTimeout = 120
        try KeyServerFixture.write(configuration, to: directory)
    }

    /// A running `stowage keyserver run` and the URL it printed.
    struct Instance {
        let process: RunningProcess
        let baseURL: String
    }

    /// Runs `body` with an HTTP client, shuts the client down, then stops `instance` with SIGINT and expects exit 0.
    static func serving(_ instance: Instance, _ body: (HTTPClient) async throws -> Void) async throws {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            try await body(http)
        } catch {
            try await http.shutdown()
            throw error
        }
        try await http.shutdown()
        instance.process.interrupt()
        let ended = try await instance.process.waitForExit(timeout: .seconds(30))
        #expect(ended.status == 0 && !ended.timedOut, "\(String(decoding: ended.standardError, as: UTF8.self))")
    }

    /// `stowage keyserver run` on an OS-assigned port, once it prints where it listens.
    static func start(_ dataDirectory: String, database: String?, _ extra: [String] = []) async throws -> Instance {
        let process = try ProcessRunner.start(
            try StowageExecutable.url(),
            ["keyserver", "run", "--data-dir", dataDirectory, "--port", "0"] + (database.map { ["--database", $0] } ?? []) + extra
        )
        for _ in 0..<600 where process.isRunning {
            let output = String(decoding: try process.standardOutput(), as: UTF8.self)
            if let line = output.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }) {
                return Instance(process: process, baseURL: String(line.dropFirst("listening on ".count)))
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let errors = String(decoding: try process.standardError(), as: UTF8.self)
        throw FrameHashes.Failure(description: "keyserver run did not start listening: \(errors)")
    }

    @Test(
        "three instances on one database: the device limit and the replay window hold across them, and each opens keys sealed by init's master key",
        StoreKind.needsPostgres
    )
    func threeInstancesShareOneDatabase() async throws {
        guard let server = StoreKind.postgresURL else { return }
        try await TestDatabase.with(server) { database in
            let dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
            let initialized = try await Self.keyserver(["init", "--data-dir", dataDirectory, "--database", database])
            #expect(initialized.status == 0, "\(initialized.output)")
            #expect(initialized.output.contains("database schema at version \(PostgresKeyServerStore.schemaVersion)"))
            // The state is in PostgreSQL, not beside the keys.
            #expect(!FileManager.default.fileExists(atPath: dataDirectory + "/keyserver.sqlite"))
            let directory = KeyServerDataDirectory(path: dataDirectory, database: database)
            var configuration = try directory.loadConfiguration()
            configuration.allowWildcardAssets = true
            configuration.databaseTimeout = 120
            try KeyServerFixture.write(configuration, to: directory)
            // The database from the environment, as a fleet's service manager would set it.
            let added = try await Self.keyserver(
                ["add-asset", "movie-1", "--key-id", KeyServerFixture.movieKeyIDs[0], "--key", "-", "--data-dir", dataDirectory],
                environment: ["STOWAGE_KEYSERVER_DATABASE": database],
                standardInput: KeyServerFixture.movieKeys[0]
            )
            #expect(added.status == 0, "\(added.output)")

            var instances: [Instance] = []
            for _ in 0..<3 { instances.append(try await Self.start(dataDirectory, database: database)) }
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                let clients = instances.map { LiveClient(http: http, baseURL: $0.baseURL) }
                let token = try await directory.makeToken(subject: "alice", assets: ["movie-1"], ttl: 3_600)
                let serverKey = try await clients[0].serverKey()
                // Twelve devices of one account at once, spread over the instances; the default policy allows 3.
                let devices = try (0..<12).map { _ in try TestDevice() }
                let replies = try await withThrowingTaskGroup(of: (TestDevice, LiveClient.Reply).self) { group in
                    for (index, device) in devices.enumerated() {
                        group.addTask {
                            let request = try device.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]])
                            return (device, try await clients[index % clients.count].requestKeys(request, token: token))
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let granted = replies.filter { $0.1.status == 200 }
                #expect(granted.count == 3, "\(replies.map { "\($0.1.status) \($0.1.errorCode ?? "")" })")
                #expect(replies.filter { $0.1.errorCode == "device_limit_reached" }.count == 9)
                for (device, reply) in granted {
                    let payload = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: serverKey)
                    let keys = try device.unwrapKeys(of: payload)
                    #expect(keys[KeyServerFixture.movieKeyIDs[0]] == SecretBytes(Hex.decode(KeyServerFixture.movieKeys[0])!))
                }

                // One signed request sent to two instances at once: one answer, one replay.
                let holder = granted[0].0
                let request = try holder.keyRequest(asset: "movie-1", keyIDs: [KeyServerFixture.movieKeyIDs[0]])
                async let first = clients[1].requestKeys(request, token: token)
                async let second = clients[2].requestKeys(request, token: token)
                let both = try await [first, second]
                #expect(both.filter { $0.status == 200 }.count == 1, "\(both.map { "\($0.status) \($0.errorCode ?? "")" })")
                #expect(both.filter { $0.errorCode == "replayed_request" }.count == 1, "\(both.map { "\($0.status) \($0.errorCode ?? "")" })")
            } catch {
                try await http.shutdown()
                throw error
            }
            try await http.shutdown()

            // SIGINT (as SIGTERM) is a graceful stop: exit 0.
            for instance in instances { instance.process.interrupt() }
            for instance in instances {
                let ended = try await instance.process.waitForExit(timeout: .seconds(30))
                #expect(ended.status == 0 && !ended.timedOut, "\(String(decoding: ended.standardError, as: UTF8.self))")
            }
        }
    }

    @Test(
        "rotate-master-key for a fleet: refused until prepared, then a running instance of another directory keeps serving",
        StoreKind.needsPostgres
    )
    func masterKeyRotationAcrossTheFleet() async throws {
        guard let server = StoreKind.postgresURL else { return }
        let dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)").path
        let otherDirectory = dataDirectory + "-other"
        defer {
            try? FileManager.default.removeItem(atPath: dataDirectory)
            try? FileManager.default.removeItem(atPath: otherDirectory)
        }
        try await TestDatabase.with(server) { database in
            try await Self.initialize(dataDirectory, database: database, addingMovie: true)
            let keyID = KeyServerFixture.movieKeyIDs[0]
            // The other instance's copy of the directory, deployed before the rotation.
            try FileManager.default.copyItem(atPath: dataDirectory, toPath: otherDirectory)
            let instance = try await Self.start(otherDirectory, database: database)

            let unprepared = try await Self.keyserver(["rotate-master-key", "--data-dir", dataDirectory, "--database", database])
            #expect(unprepared.status == 1 && unprepared.output.contains("rotation_not_prepared"), "\(unprepared.output)")
            let prepared = try await Self.keyserver(["rotate-master-key", "--prepare", "--data-dir", dataDirectory, "--database", database])
            #expect(prepared.status == 0 && prepared.output.contains("created "), "\(prepared.output)")
            try FileManager.default.copyItem(atPath: dataDirectory + "/master-key.next", toPath: otherDirectory + "/master-key.next")
            let rotated = try await Self.keyserver(["rotate-master-key", "--data-dir", dataDirectory, "--database", database, "--batch-size", "1"])
            #expect(rotated.status == 0 && rotated.output.contains("re-sealed 1 of 1 content keys"), "\(rotated.output)")
            #expect(!FileManager.default.fileExists(atPath: dataDirectory + "/master-key.next"))

            try await Self.serving(instance) { http in
                let client = LiveClient(http: http, baseURL: instance.baseURL)
                let token = try await KeyServerDataDirectory(path: dataDirectory).makeToken(subject: "alice", assets: ["movie-1"], ttl: 3_600)
                let device = try TestDevice()
                let reply = try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: [keyID]), token: token)
                #expect(reply.status == 200, "\(reply.status) \(reply.errorCode ?? "")")
                let payload = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: try await client.serverKey())
                #expect(try device.unwrapKeys(of: payload)[keyID] == SecretBytes(Hex.decode(KeyServerFixture.movieKeys[0])!))
            }
        }
    }

    @Test(
        "three instances behind nginx (deploy/nginx-keyserver.conf, a throwaway CA): 50 devices race for 3 slots, a replay across instances, renew on one and release on another, one instance killed under load",
        StoreKind.needsPostgres
    )
    func fleetBehindNginx() async throws {
        guard let server = StoreKind.postgresURL else { return }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)").path
        let dataDirectory = work + "/keys"
        defer { try? FileManager.default.removeItem(atPath: work) }
        try await TestDatabase.with(server) { database in
            try await Self.initialize(dataDirectory, database: database, addingMovie: true)
            let keyID = KeyServerFixture.movieKeyIDs[0]
            let contentKey = SecretBytes(Hex.decode(KeyServerFixture.movieKeys[0])!)
            let directory = KeyServerDataDirectory(path: dataDirectory, database: database)
            var configuration = try directory.loadConfiguration()
            // 50 devices from one address (nginx's) in one burst: not what the source limit is for.
            configuration.sourceRateLimit = .init(requestsPerSecond: 1_000, burst: 1_000)
            try KeyServerFixture.write(configuration, to: directory)
            var instances: [Instance] = []
            for _ in 0..<3 { instances.append(try await Self.start(dataDirectory, database: database)) }
            let authority = try await TestCertificateAuthority.make(in: work + "/ca")
            let proxy = try await TLSProxy.start(certificate: authority, upstreams: instances.map(\.baseURL), in: work + "/nginx")
            var trusting = HTTPClient.Configuration()
            try TLSTrust(caFile: authority.caFile).apply(to: &trusting)
            let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: trusting)
            let stranger = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                let balanced = LiveClient(http: http, baseURL: proxy.baseURL)
                let direct = instances.map { LiveClient(http: http, baseURL: $0.baseURL) }
                let serverKey = try await balanced.serverKey()
                let token = try await directory.makeToken(subject: "alice", assets: ["movie-1"], ttl: 3_600)

                // 50 new devices of one account at once through the balancer; the default policy allows 3.
                let devices = try (0..<50).map { _ in try TestDevice() }
                let replies = try await withThrowingTaskGroup(of: (TestDevice, LiveClient.Reply).self) { group in
                    for device in devices {
                        group.addTask {
                            (device, try await balanced.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: [keyID]), token: token))
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let granted = replies.filter { $0.1.status == 200 }
                #expect(granted.count == 3, "\(replies.map { "\($0.1.status) \($0.1.errorCode ?? "")" })")
                #expect(replies.filter { $0.1.errorCode == "device_limit_reached" }.count == 47)
                var leaseIDs: [String] = []
                for (device, reply) in granted {
                    let payload = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: serverKey)
                    #expect(try device.unwrapKeys(of: payload)[keyID] == contentKey)
                    leaseIDs.append(payload.lease.leaseId)
                }
                // Every instance took part.
                let keyLines = proxy.accessLog().split(separator: "\n").filter { $0.contains("\"POST /v1/keys") }
                for instance in instances {
                    let address = String(instance.baseURL.dropFirst("http://".count))
                    #expect(keyLines.contains { $0.contains(" \(address) ") }, "\(keyLines.prefix(5))")
                }

                // One signed request replayed to another instance: 409 replayed_request.
                let holder = try #require(granted.first).0
                let request = try holder.keyRequest(asset: "movie-1", keyIDs: [keyID])
                #expect(try await direct[0].requestKeys(request, token: token).status == 200)
                let replay = try await direct[1].requestKeys(request, token: token)
                #expect(replay.status == 409 && replay.errorCode == "replayed_request", "\(replay.status) \(replay.errorCode ?? "")")

                // The holder's new lease for the same key superseded its first one (released, on another instance).
                let store = try await directory.connect()
                #expect(try await store.lease(id: leaseIDs[0])?.releasedAt != nil)

                // Renewed on one instance, released on another: released, and a renewal on the third is refused.
                let leaseID = leaseIDs[1]
                let owner = try #require(
                    granted.first {
                        (try? PayloadSigning.verify(try $0.1.decode(SignedPayload.self), serverKey: serverKey))?.lease.leaseId == leaseID
                    }
                ).0
                let renewed = try await direct[0].renew(leaseID, try owner.renewRequest(leaseID: leaseID), token: token)
                #expect(renewed.status == 200, "\(renewed.status) \(renewed.errorCode ?? "")")
                let released = try await direct[1].release(leaseID, try owner.releaseRequest(leaseID: leaseID))
                #expect(released.status == 200, "\(released.status) \(released.errorCode ?? "")")
                let late = try await direct[2].renew(leaseID, try owner.renewRequest(leaseID: leaseID), token: token)
                #expect(late.status != 200, "a released lease was renewed")
                #expect(try await store.lease(id: leaseID)?.releasedAt != nil)

                // Under load from 40 accounts, one instance is killed; what was answered 200 is stored, and the others
                // keep answering through the balancer.
                let loadToken = { (account: Int) in try await directory.makeToken(subject: "load-\(account)", assets: ["movie-1"], ttl: 3_600) }
                let load = try await withThrowingTaskGroup(of: (status: Int, leaseID: String?).self) { group in
                    for account in 0..<40 {
                        if account == 12 { instances[2].process.kill() }
                        let device = try TestDevice()
                        let accountToken = try await loadToken(account)
                        group.addTask {
                            let reply = try await balanced.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: [keyID]), token: accountToken)
                            let lease =
                                reply.status == 200
                                ? (try? PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: serverKey))?.lease.leaseId : nil
                            return (reply.status, lease)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let committed = load.compactMap(\.leaseID)
                #expect(committed.count >= 30, "\(load.map(\.status))")
                for lease in committed { #expect(try await store.lease(id: lease) != nil, "lease \(lease) was answered but not stored") }
                // After the kill, every request is answered by the two left.
                for account in 40..<50 {
                    let device = try TestDevice()
                    let reply = try await balanced.requestKeys(
                        try device.keyRequest(asset: "movie-1", keyIDs: [keyID]),
                        token: try await loadToken(account)
                    )
                    #expect(reply.status == 200, "\(reply.status) \(reply.errorCode ?? "")")
                }
                await store.close()

                // A client that does not trust the CA refuses the connection, and says what to do.
                do {
                    _ = try await LiveClient(http: stranger, baseURL: proxy.baseURL).get("/v1/server-key")
                    Issue.record("a client without the test CA accepted its certificate")
                } catch {
                    #expect(NetworkErrorText.isUntrustedCertificate(error), "\(error)")
                    let text = NetworkErrorText.describe(error)
                    #expect(text.contains("not trusted") && text.contains("--ca-file"), "\(text)")
                }
            } catch {
                try await http.shutdown()
                try await stranger.shutdown()
                await proxy.stop()
                for instance in instances { instance.process.kill() }
                throw error
            }
            try await http.shutdown()
            try await stranger.shutdown()
            await proxy.stop()
            for instance in instances.prefix(2) { instance.process.interrupt() }
            for instance in instances.prefix(2) {
                let ended = try await instance.process.waitForExit(timeout: .seconds(30))
                #expect(ended.status == 0 && !ended.timedOut, "\(String(decoding: ended.standardError, as: UTF8.self))")
            }
            _ = try? await instances[2].process.waitForExit(timeout: .seconds(10))
        }
    }

    @Test("docs/deploy.md shows deploy/nginx-keyserver.conf as it is (the file the fleet test runs)")
    func deployDocumentShowsTheTestedConfiguration() throws {
        let configuration = try String(contentsOf: TLSProxy.keyServerTemplate, encoding: .utf8)
        let document = try String(
            contentsOf: TLSProxy.keyServerTemplate.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/deploy.md"),
            encoding: .utf8
        )
        #expect(document.contains("```nginx\n" + configuration + "```"))
    }

    @Test("package --keyserver-database registers its keys in PostgreSQL, where a run instance hands them out", StoreKind.needsPostgres)
    func packageRegistersKeysInTheFleetDatabase() async throws {
        guard let server = StoreKind.postgresURL else { return }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)").path
        let dataDirectory = work + "/keys"
        defer { try? FileManager.default.removeItem(atPath: work) }
        try await TestDatabase.with(server) { database in
            try await Self.initialize(dataDirectory, database: database)
            let packaged = try await ProcessRunner.run(
                try StowageExecutable.url(),
                [
                    "package", PackagingTests.tsClear.appendingPathComponent("master.m3u8").path, "--asset-id", "show-1", "--method", "sample-aes",
                    "--out", work + "/protected", "--keyserver-data-dir", dataDirectory, "--keyserver-database", database, "--rotate-every", "2",
                ]
            )
            let output = String(decoding: packaged.standardOutput + packaged.standardError, as: UTF8.self)
            #expect(packaged.status == 0, "\(output)")
            let keyIDs =
                try #require(output.split(separator: "\n").first { $0.hasPrefix("registered ") }).split(separator: ":").last?
                .split(separator: " ").map(String.init) ?? []
            #expect(keyIDs.count >= 2, "\(output)")
            #expect(!FileManager.default.fileExists(atPath: dataDirectory + "/keyserver.sqlite"))

            let instance = try await Self.start(dataDirectory, database: database)
            try await Self.serving(instance) { http in
                let client = LiveClient(http: http, baseURL: instance.baseURL)
                let token = try await KeyServerDataDirectory(path: dataDirectory).makeToken(subject: "alice", assets: ["show-1"], ttl: 3_600)
                let device = try TestDevice()
                let reply = try await client.requestKeys(try device.keyRequest(asset: "show-1", keyIDs: keyIDs), token: token)
                #expect(reply.status == 200, "\(reply.status) \(reply.errorCode ?? "")")
                let payload = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: try await client.serverKey())
                #expect(Set(try device.unwrapKeys(of: payload).keys) == Set(keyIDs))
            }
        }
    }

    @Test("readyz follows the database (ready, schema_outdated, database_unavailable) while healthz stays up", StoreKind.needsPostgres)
    func readinessFollowsTheDatabase() async throws {
        guard let server = StoreKind.postgresURL else { return }
        let dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        try await TestDatabase.with(server) { database in
            try await Self.initialize(dataDirectory, database: database)
            let instance = try await Self.start(dataDirectory, database: database)
            try await Self.serving(instance) { http in
                func get(_ path: String, token: String? = nil) async throws -> (status: Int, body: String) {
                    var request = HTTPClientRequest(url: instance.baseURL + path)
                    if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
                    let response = try await http.execute(request, timeout: .seconds(30))
                    return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 1 << 16)))
                }
                #expect(try await get("/readyz") == (200, #"{"status":"ready"}"#))
                // Another member of the fleet, newer than this one, migrated the schema: take this one out of rotation.
                try await TestDatabase.execute(
                    database,
                    "INSERT INTO stowage_schema (version, applied_at) VALUES (\(PostgresKeyServerStore.schemaVersion + 1), 0)"
                )
                let newer = try await get("/readyz")
                #expect(newer.status == 503 && newer.body.contains("schema_outdated"), "\(newer)")
                // The database is gone.
                let name = String(try #require(URLComponents(string: database)).path.dropFirst())
                try await TestDatabase.execute(server, "DROP DATABASE \(name) WITH (FORCE)")
                let gone = try await get("/readyz")
                #expect(gone == (503, #"{"status":"unavailable","error":{"code":"database_unavailable"}}"#), "\(gone)")
                // Whoever can reach the port learns nothing of the database's address; the operator's log has it.
                #expect(!newer.body.contains("127.0.0.1") && !gone.body.contains(name))
                let log = String(decoding: try instance.process.standardError(), as: UTF8.self)
                #expect(log.contains("not ready") && log.contains(name), "\(log.suffix(2000))")
                #expect(try await get("/healthz").status == 200)
                let metricsToken = try String(contentsOfFile: dataDirectory + "/" + KeyServerDataDirectory.metricsTokenFile, encoding: .utf8)
                let metrics = try await get("/metrics", token: metricsToken)
                // Metrics still answer the operator's scraper, and say the database is down.
                #expect(metrics.status == 200 && metrics.body.contains("stowage_keyserver_database_up 0.0"), "\(metrics)")
            }
        }
    }

    @Test("SIGTERM lets a request in flight finish: its body, sent after the signal, is answered, and run exits 0")
    func gracefulShutdownAnswersARequestInFlight() async throws {
        let dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        #expect(try await Self.keyserver(["init", "--data-dir", dataDirectory]).status == 0)
        let instance = try await Self.start(dataDirectory, database: nil, ["--log-format", "json"])
        let process = instance.process
        let port = Int(instance.baseURL.split(separator: ":").last ?? "")
        let connection = try RawConnection(port: try #require(port))
        defer { connection.close() }
        // The head, then nothing: the request is in flight when the signal comes.
        #expect(connection.send("POST /v1/keys HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"))
        try await Task.sleep(for: .milliseconds(300))
        kill(process.processIdentifier, SIGTERM)
        try await Task.sleep(for: .milliseconds(500))
        #expect(process.isRunning, "run exited with a request in flight")
        #expect(connection.send("{}"))
        let answer = await connection.receive()
        #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer)")
        #expect(answer.contains("malformed_request"), "\(answer)")
        let ended = try await process.waitForExit(timeout: .seconds(30))
        #expect(ended.status == 0 && !ended.timedOut, "\(String(decoding: ended.standardError, as: UTF8.self))")
        // --log-format json: every line on standard error is an object; the request's line names its route and ID.
        let lines = ended.standardError.split(separator: UInt8(ascii: "\n"))
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: String] }
        #expect(!lines.isEmpty && objects.count == lines.count, "\(String(decoding: ended.standardError, as: UTF8.self))")
        let request = try #require(objects.first { $0["message"] == "request" })
        #expect(request["route"] == "/v1/keys" && request["status"] == "400" && request["code"] == "malformed_request")
        #expect(request["request_id"].map { UUID(uuidString: $0) != nil } == true, "\(request)")
    }

    @Test(
        "migrate copies an SQLite key server into PostgreSQL, verified; leases, devices and limits carry over; a wrong master key or a full database commits nothing",
        StoreKind.needsPostgres
    )
    func migrateFromSQLite() async throws {
        guard let server = StoreKind.postgresURL else { return }
        // Real time: the PostgreSQL instance below runs on the system clock.
        let fixture = try await KeyServerFixture.make(clock: ManualClock(Int64(Date().timeIntervalSince1970)))
        defer { fixture.remove() }
        let token = try await fixture.token()
        let renter = try TestDevice()
        let owner = try TestDevice()
        // History on SQLite: a rental (1 device allowed), a movie lease, a refusal in the audit log.
        let (rentalLease, movieLease) = try await fixture.withLiveServer { client in
            let rental = try await client.requestKeys(try renter.keyRequest(asset: "rental", keyIDs: [KeyServerFixture.rentalKeyID]), token: token)
            let movie = try await client.requestKeys(try owner.keyRequest(asset: "movie-1", keyIDs: KeyServerFixture.movieKeyIDs), token: token)
            #expect(rental.status == 200 && movie.status == 200)
            #expect(
                try await client.requestKeys(try owner.keyRequest(asset: "movie-1", keyIDs: KeyServerFixture.movieKeyIDs), token: nil).status == 401
            )
            let key = fixture.server.serverPublicKey
            return (
                try PayloadSigning.verify(try rental.decode(SignedPayload.self), serverKey: key),
                try PayloadSigning.verify(try movie.decode(SignedPayload.self), serverKey: key)
            )
        }
        let source = try fixture.directory.openStore()
        let auditRows = try await source.auditRecords(limit: 1_000).count
        #expect(auditRows >= 3)

        try await TestDatabase.with(server) { database in
            // With another master key in the directory, the sample keys do not open the same: nothing is committed.
            let masterKey = fixture.directory.path(of: KeyServerDataDirectory.masterKeyFile)
            let original = try Data(contentsOf: URL(fileURLWithPath: masterKey))
            try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: masterKey))
            let wrongKey = try await Self.keyserver(["migrate", "--from", fixture.directory.path, "--database", database])
            #expect(wrongKey.status == 1 && wrongKey.output.contains("migration_mismatch"), "\(wrongKey.output)")
            try original.write(to: URL(fileURLWithPath: masterKey))

            let migrated = try await Self.keyserver(["migrate", "--from", fixture.directory.path, "--database", database])
            #expect(migrated.status == 0, "\(migrated.output)")
            #expect(migrated.output.contains("asset: 3 rows") && migrated.output.contains("content_key: 4 rows"), "\(migrated.output)")
            #expect(migrated.output.contains("device: 2 rows") && migrated.output.contains("lease: 2 rows"), "\(migrated.output)")
            #expect(migrated.output.contains("audit: \(auditRows) rows"), "\(migrated.output)")
            #expect(migrated.output.contains("4 content keys open the same"), "\(migrated.output)")
            // Into a database that is no longer empty: refused, nothing doubled.
            let again = try await Self.keyserver(["migrate", "--from", fixture.directory.path, "--database", database])
            #expect(again.status == 1 && again.output.contains("database_not_empty"), "\(again.output)")

            let instance = try await Self.start(fixture.directory.path, database: database)
            try await Self.serving(instance) { http in
                let client = LiveClient(http: http, baseURL: instance.baseURL)
                // The rental's one device is taken: another is refused, on PostgreSQL as on SQLite.
                let second = try await client.requestKeys(
                    try TestDevice().keyRequest(asset: "rental", keyIDs: [KeyServerFixture.rentalKeyID]),
                    token: token
                )
                #expect(second.errorCode == "device_limit_reached", "\(second.status) \(second.errorCode ?? "")")
                // The movie lease renews, with its keys, for its own device (bound to the device key stored on SQLite).
                let renewed = try await client.renew(
                    movieLease.lease.leaseId,
                    try owner.renewRequest(leaseID: movieLease.lease.leaseId),
                    token: token
                )
                #expect(renewed.status == 200, "\(renewed.errorCode ?? "")")
                let payload = try PayloadSigning.verify(try renewed.decode(SignedPayload.self), serverKey: fixture.server.serverPublicKey)
                #expect(try owner.unwrapKeys(of: payload)[KeyServerFixture.movieKeyIDs[1]] == SecretBytes(Hex.decode(KeyServerFixture.movieKeys[1])!))
                // The released-or-not state carries over: the rental lease is still there to release.
                let released = try await client.release(rentalLease.lease.leaseId, try renter.releaseRequest(leaseID: rentalLease.lease.leaseId))
                #expect(released.status == 200)
            }
        }
    }

    @Test("run refuses a database it cannot use: malformed URL, unreachable server, schema never created", StoreKind.needsPostgres)
    func runRefusesADatabaseItCannotUse() async throws {
        guard let server = StoreKind.postgresURL else { return }
        let dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        #expect(try await Self.keyserver(["init", "--data-dir", dataDirectory]).status == 0)

        let malformed = try await Self.keyserver(["run", "--data-dir", dataDirectory, "--database", "mysql://root:hunter2@db/keys"])
        #expect(malformed.status == 1)
        #expect(malformed.output.contains("invalid_database_url"), "\(malformed.output)")
        #expect(!malformed.output.contains("hunter2"), "a password was printed: \(malformed.output)")

        // A port bound but not listening: connections are refused.
        let closed = try HeldPort()
        defer { closed.release() }
        let unreachable = try await Self.keyserver([
            "run", "--data-dir", dataDirectory, "--database", "postgres://stowage:hunter2@127.0.0.1:\(closed.port)/keys?sslmode=disable",
        ])
        #expect(unreachable.status == 1)
        #expect(unreachable.output.contains("database_unavailable"), "\(unreachable.output)")
        // The reason, not a timeout: setup asks once outside the pool.
        #expect(unreachable.output.contains("connection refused"), "\(unreachable.output)")
        #expect(!unreachable.output.contains("hunter2"), "a password was printed: \(unreachable.output)")

        var missing = try #require(URLComponents(string: server))
        missing.path = "/no_such_database"
        let absent = try await Self.keyserver(["run", "--data-dir", dataDirectory, "--database", try #require(missing.string)])
        #expect(absent.status == 1)
        #expect(absent.output.contains(#"database "no_such_database" does not exist"#), "\(absent.output)")
        // PostgreSQL answered: the advice is about the URL, not about reaching the server.
        #expect(absent.output.contains("check the user, password and database name"), "\(absent.output)")
        #expect(unreachable.output.contains("accepts connections from this machine"), "\(unreachable.output)")

        try await TestDatabase.with(server) { database in
            let empty = try await Self.keyserver(["run", "--data-dir", dataDirectory, "--database", database])
            #expect(empty.status == 1)
            #expect(empty.output.contains("schema_outdated"), "\(empty.output)")
            #expect(empty.output.contains("stowage keyserver init --database"), "\(empty.output)")
            // What the message says to run makes the next start work.
            try await Self.initialize(dataDirectory, database: database)
            let instance = try await Self.start(dataDirectory, database: database)
            instance.process.interrupt()
            #expect(try await instance.process.waitForExit(timeout: .seconds(30)).status == 0)
        }
    }
}
