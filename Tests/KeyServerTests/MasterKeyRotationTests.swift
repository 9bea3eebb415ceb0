import AsyncHTTPClient
import Foundation
import KeyDelivery
import StowageCore
import StowageCrypto
import Testing

@testable import KeyServer

#if canImport(Glibc)
import Glibc
#endif

/// `rotateMasterKey`: every content key re-sealed under a new master key while servers keep serving, on SQLite and on
/// PostgreSQL, and carried on after a kill at either stage.
@Suite("Master key rotation")
struct MasterKeyRotationTests {
    static let assetCount = 25

    /// Two keys per asset `a00`...`a24`, each unlike any other.
    static func contentKey(_ asset: Int, _ index: Int) -> SecretBytes {
        SecretBytes((0..<16).map { UInt8(truncatingIfNeeded: asset * 31 + index * 7 + $0 * 3 + 1) })
    }

    static func keyID(_ asset: Int, _ index: Int) -> String {
        String(format: "%030x%02x", asset, index)
    }

    static func assetID(_ asset: Int) -> String { String(format: "a%02d", asset) }

    /// A data directory on `kind`'s database holding the 25 assets, removed after `body`.
    static func withDirectory(_ kind: StoreKind, _ body: (KeyServerDataDirectory) async throws -> Void) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keyserver-tests-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        func fill(_ database: String?) async throws {
            let directory = try await KeyServerDataDirectory.initialize(at: path, database: database)
            var configuration = try directory.loadConfiguration()
            configuration.allowWildcardAssets = true
            configuration.rateLimit = .init(requestsPerSecond: 1_000, burst: 1_000)
            // The whole suite runs in parallel on two cores: a database operation may wait longer than the default 10 s
            // there, and this test is about rotation, not about the database's speed.
            configuration.databaseTimeout = 120
            try KeyServerFixture.write(configuration, to: directory)
            for asset in 0..<assetCount {
                for index in 0..<2 {
                    try await directory.addAsset(id: assetID(asset), keyID: keyID(asset, index), key: contentKey(asset, index))
                }
            }
            try await body(directory)
        }
        switch kind {
        case .sqlite: try await fill(nil)
        case .postgres:
            guard let server = StoreKind.postgresURL else { return }
            try await TestDatabase.with(server) { try await fill($0) }
        }
    }

    /// Runs `server` on a free port while `body` runs with a client for it.
    static func serving<T: Sendable>(_ server: KeyServerApplication, _ body: (LiveClient) async throws -> T) async throws -> T {
        let directory = KeyServerDataDirectory(path: "/nonexistent")
        // The server reads the system clock, so the devices' clientTime is the system's time too.
        let now = ManualClock(Int64(Date().timeIntervalSince1970))
        return try await KeyServerFixture(directory: directory, clock: now, server: server).withLiveServer(body)
    }

    /// Fetches the assets' keys (every asset's by default) from `client` as `device` and expects each to be the key added.
    static func expectEveryKey(
        from client: LiveClient,
        server: KeyServerApplication,
        device: TestDevice,
        token: String,
        assets: Range<Int> = 0..<assetCount
    ) async throws {
        for asset in assets {
            let keyIDs = [keyID(asset, 0), keyID(asset, 1)]
            let reply = try await client.requestKeys(try device.keyRequest(asset: assetID(asset), keyIDs: keyIDs), token: token)
            try #require(reply.status == 200, "asset \(assetID(asset)): \(reply.status) \(reply.errorCode ?? "")")
            let payload = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: server.serverPublicKey)
            let keys = try device.unwrapKeys(of: payload)
            #expect(keys[keyIDs[0]] == contentKey(asset, 0) && keys[keyIDs[1]] == contentKey(asset, 1), "asset \(assetID(asset))")
        }
    }

    /// A server freshly started on `directory` hands out every asset's keys.
    static func expectServed(by directory: KeyServerDataDirectory) async throws {
        let server = try await KeyServerApplication(dataDirectory: directory)
        let device = try TestDevice()
        let token = try await directory.makeToken(subject: "alice", assets: ["*"], ttl: 3_600)
        do {
            try await serving(server) { client in try await expectEveryKey(from: client, server: server, device: device, token: token) }
        } catch {
            await server.close()
            throw error
        }
        await server.close()
    }

    /// Every stored row, page by page.
    static func allRows(_ directory: KeyServerDataDirectory) async throws -> [ContentKeyRecord] {
        try await directory.withStore { store in
            var rows: [ContentKeyRecord] = []
            var position: ContentKeyPosition?
            while true {
                let page = try await store.contentKeys(after: position, limit: 10)
                rows += page
                guard let last = page.last else { return rows }
                position = ContentKeyPosition(after: last)
            }
        }
    }

    static func exists(_ directory: KeyServerDataDirectory, _ file: String) -> Bool {
        FileManager.default.fileExists(atPath: directory.path(of: file))
    }

    @Test(
        "rotation re-seals every key in batches while two running servers keep serving (one has the new key only as master-key.next)",
        arguments: StoreKind.available
    )
    func rotationWhileServing(_ kind: StoreKind) async throws {
        try await Self.withDirectory(kind) { directory in
            // A second instance's data directory: a copy, as a fleet deploys it (on SQLite it shares the file too).
            let copy = directory.path + "-copy"
            try FileManager.default.copyItem(atPath: directory.path, toPath: copy)
            defer { try? FileManager.default.removeItem(atPath: copy) }
            let other = KeyServerDataDirectory(path: copy, database: directory.database)
            let oldKey = try directory.loadMasterKey()
            let first = try await KeyServerApplication(dataDirectory: directory)
            let second = try await KeyServerApplication(dataDirectory: kind == .sqlite ? directory : other)
            let device = try TestDevice()
            let token = try await directory.makeToken(subject: "alice", assets: ["*"], ttl: 3_600)

            try await Self.serving(first) { firstClient in
                try await Self.serving(second) { secondClient in
                    // Both cache some sealed keys before the rotation (those still open after it); the others they read
                    // afterwards, sealed under the new key.
                    try await Self.expectEveryKey(from: firstClient, server: first, device: device, token: token, assets: 0..<5)
                    try await Self.expectEveryKey(from: secondClient, server: second, device: device, token: token, assets: 0..<5)

                    if kind == .postgres {
                        // A fleet must hand out the new key before any row is sealed under it.
                        do {
                            _ = try await directory.rotateMasterKey()
                            Issue.record("a fleet's rotation ran without --prepare")
                        } catch let error as KeyServerSetupError {
                            #expect(error.code == "rotation_not_prepared")
                            #expect(error.message.contains("--prepare"))
                        }
                        #expect(try directory.prepareMasterKeyRotation())
                        #expect(try !directory.prepareMasterKeyRotation())  // kept, not replaced
                        try FileManager.default.copyItem(
                            atPath: directory.path(of: KeyServerDataDirectory.nextMasterKeyFile),
                            toPath: other.path(of: KeyServerDataDirectory.nextMasterKeyFile)
                        )
                    }
                    let newKey = kind == .postgres ? try SecretFile.read(directory.path(of: "master-key.next"), byteCount: 32, directory: "") : nil

                    let report = try await directory.rotateMasterKey(batchSize: 7)
                    #expect(report.keys == 2 * Self.assetCount)
                    #expect(report.resealed == 2 * Self.assetCount)
                    #expect(report.resealedInFinalPass == 0)
                    #expect(!report.finishedEarlierRotation)

                    // The files: a new master-key, nothing left of the rotation.
                    let rotated = try directory.loadMasterKey()
                    #expect(rotated != oldKey)
                    if let newKey { #expect(rotated == newKey) }
                    #expect(!Self.exists(directory, KeyServerDataDirectory.nextMasterKeyFile))
                    #expect(!Self.exists(directory, KeyServerDataDirectory.oldMasterKeyFile))
                    // Every row opens under the new key and no longer under the old one.
                    let rows = try await Self.allRows(directory)
                    #expect(rows.count == 2 * Self.assetCount)
                    let newSealer = try ContentKeySealer(masterKey: rotated)
                    let oldSealer = try ContentKeySealer(masterKey: oldKey)
                    #expect(rows.allSatisfy { newSealer.opens($0) && !oldSealer.opens($0) })

                    // The running servers, never restarted, still hand out every key: the first reads the new
                    // master-key, the second its master-key.next.
                    try await Self.expectEveryKey(from: firstClient, server: first, device: device, token: token)
                    try await Self.expectEveryKey(from: secondClient, server: second, device: device, token: token)
                }
            }
            await first.close()
            await second.close()

            // Fresh servers too: on the rotated directory, and on the copy that holds the new key as master-key.next.
            for fresh in [directory, kind == .sqlite ? directory : other] { try await Self.expectServed(by: fresh) }
            // The old master key is in no file of the rotated directory.
            let oldBytes = oldKey.withUnsafeBytes { Array($0) }
            for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
                let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.path(of: file))))
                #expect(!data.indices.contains { data[$0...].starts(with: oldBytes) }, "\(file)")
            }
        }
    }

    @Test("a rotation killed before or after master-key was replaced carries on when run again")
    func interruptedRotationsCarryOn() async throws {
        try await Self.withDirectory(.sqlite) { directory in
            let oldKey = try directory.loadMasterKey()
            let oldSealer = try ContentKeySealer(masterKey: oldKey)
            #expect(try directory.prepareMasterKeyRotation())
            let nextKey = try SecretFile.read(directory.path(of: "master-key.next"), byteCount: 32, directory: "")
            let nextSealer = try ContentKeySealer(masterKey: nextKey)
            // Killed half-way through the re-sealing: rows under both keys.
            let rows = try await Self.allRows(directory)
            let half = try rows.prefix(20).map {
                SealedKeyChange(old: $0, new: try nextSealer.seal(oldSealer.open($0), assetID: $0.assetID, keyID: $0.keyID))
            }
            #expect(try await directory.withStore { try await $0.replaceSealedKeys(half) } == 20)
            // Killed after master-key.old was written and master-key.next renamed over master-key.
            try PrivateFile.createExclusively(directory.path(of: "master-key.old"), contents: oldKey)
            #expect(rename(directory.path(of: "master-key.next"), directory.path(of: "master-key")) == 0)

            // A server started now opens rows under either key.
            try await Self.expectServed(by: directory)

            let report = try await directory.rotateMasterKey(batchSize: 6)
            #expect(report.finishedEarlierRotation)
            #expect(report.resealedInFinalPass == 2 * Self.assetCount - 20)
            #expect(try directory.loadMasterKey() == nextKey)
            #expect(!Self.exists(directory, KeyServerDataDirectory.oldMasterKeyFile))
            #expect(try await Self.allRows(directory).allSatisfy { nextSealer.opens($0) })

            // And a rotation killed before the rename: master-key.next exists and master-key.old holds master-key.
            #expect(try directory.prepareMasterKeyRotation())
            try PrivateFile.createExclusively(directory.path(of: "master-key.old"), contents: nextKey)
            let again = try await directory.rotateMasterKey(batchSize: 6)
            #expect(!again.finishedEarlierRotation)
            #expect(again.resealed == 2 * Self.assetCount)
            let third = try directory.loadMasterKey()
            #expect(third != nextKey && third != oldKey)
            #expect(try await Self.allRows(directory).allSatisfy { (try? ContentKeySealer(masterKey: third).opens($0)) == true })
            #expect(!Self.exists(directory, KeyServerDataDirectory.oldMasterKeyFile))
        }
    }

    @Test("a row no key opens stops the rotation before anything is renamed, naming the asset and key")
    func anUnreadableRowStopsTheRotation() async throws {
        try await Self.withDirectory(.sqlite) { directory in
            let oldKey = try directory.loadMasterKey()
            let stranger = try ContentKeySealer(masterKey: SecretBytes.random(count: 32))
            try await directory.withStore { store in
                try await store.saveAsset(
                    AssetRecord(id: "zz-foreign", policy: "default", createdAt: 0),
                    keys: [try stranger.seal(Self.contentKey(99, 0), assetID: "zz-foreign", keyID: Self.keyID(99, 0))]
                )
            }
            do {
                _ = try await directory.rotateMasterKey(batchSize: 8)
                Issue.record("the rotation went ahead over a row no key opens")
            } catch let error as KeyServerSetupError {
                #expect(error.code == "sealed_key_unreadable")
                #expect(error.message.contains("zz-foreign") && error.message.contains(Self.keyID(99, 0)))
            }
            #expect(try directory.loadMasterKey() == oldKey)
            #expect(Self.exists(directory, KeyServerDataDirectory.nextMasterKeyFile))
            #expect(!Self.exists(directory, KeyServerDataDirectory.oldMasterKeyFile))
            // Every other key still opens (under one key or the other) for a server.
            try await Self.expectServed(by: directory)
        }
    }

    @Test("keys added while a rotation runs end up sealed under the new key; a second rotation at once is refused")
    func keysAddedDuringARotation() async throws {
        try await Self.withDirectory(.sqlite) { directory in
            // Enough rows that the rotation is still running while keys are added.
            let sealer = try ContentKeySealer(masterKey: directory.loadMasterKey())
            try await directory.withStore { store in
                for batch in 0..<8 {
                    let keys = try (0..<50).map { index in
                        try sealer.seal(Self.contentKey(batch, index + 2), assetID: "bulk\(batch)", keyID: Self.keyID(100 + batch, index))
                    }
                    try await store.saveAsset(AssetRecord(id: "bulk\(batch)", policy: "default", createdAt: 0), keys: keys)
                }
            }
            let rotation = Task { try await directory.rotateMasterKey(batchSize: 3) }
            // An asset ID that sorts before every other: the passes have gone past its rows when they are added, so
            // only the final pass (after master-key was replaced, while add-asset waits) finds them.
            for index in 0..<12 {
                try await directory.addAsset(id: "0late", keyID: Self.keyID(200, index), key: Self.contentKey(200, index))
            }
            let report = try await rotation.value
            #expect(report.keys >= 2 * Self.assetCount + 400)
            let rotated = try ContentKeySealer(masterKey: directory.loadMasterKey())
            let rows = try await Self.allRows(directory)
            #expect(rows.count == 2 * Self.assetCount + 400 + 12)
            #expect(rows.allSatisfy { rotated.opens($0) })

            // The rotation lock held elsewhere: refused at once, nothing changed.
            let descriptor = open(directory.path(of: "master-key.rotation.lock"), O_RDWR | O_CREAT, 0o600)
            defer { close(descriptor) }
            #expect(flock(descriptor, LOCK_EX | LOCK_NB) == 0)
            do {
                _ = try await directory.rotateMasterKey()
                Issue.record("a second rotation ran beside the first")
            } catch let error as KeyServerSetupError {
                #expect(error.code == "rotation_in_progress")
            }
            #expect(!Self.exists(directory, KeyServerDataDirectory.nextMasterKeyFile))
        }
    }
}

/// The ring a server opens content keys with, when the key files change under it.
struct MasterKeyRingTests {
    /// A `master-key.next` that appears but cannot be read (too open to trust) is what the error names, not the row:
    /// "authentication failed" would send the operator looking for a tampered database.
    @Test func aKeyFileThatCannotBeReadIsNamedNotTheRow() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keyserver-tests-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try await KeyServerDataDirectory.initialize(at: path, database: nil)
        let ring = try MasterKeyRing(directory: directory)
        let next = SecretBytes((0..<32).map { UInt8($0 + 7) })
        let record = try ContentKeySealer(masterKey: next).seal(SecretBytes([UInt8](repeating: 9, count: 16)), assetID: "a", keyID: "k")

        // No key of the ring opens the row, and the files did not change: the row is what is wrong.
        #expect(throws: CryptoError.authenticationFailed) { try ring.open(record) }

        // master-key.next written readable by others: the ring refuses to load it and says so.
        let nextPath = directory.path(of: KeyServerDataDirectory.nextMasterKeyFile)
        try Data(next.withUnsafeBytes { Array($0) }).write(to: URL(fileURLWithPath: nextPath))
        chmod(nextPath, 0o644)
        let error = #expect(throws: KeyServerSetupError.self) { try ring.open(record) }
        #expect(error?.description.contains(KeyServerDataDirectory.nextMasterKeyFile) == true, "\(String(describing: error))")

        // Mended (mode 0600), the same ring opens the row with it.
        chmod(nextPath, 0o600)
        #expect(try ring.open(record).withUnsafeBytes { Array($0) } == [UInt8](repeating: 9, count: 16))
    }
}
