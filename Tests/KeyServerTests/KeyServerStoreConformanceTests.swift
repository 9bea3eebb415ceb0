import Foundation
import KeyDelivery
import KeyServer
import Logging
import PostgresNIO
import StowageCore
import StowageTestSupport
import Testing

/// The stores a key server can run on, each a real database: an SQLite file, and a database of its own in the
/// PostgreSQL that `.ci/run` starts (scripts/postgres.sh exports STOWAGE_TEST_POSTGRES).
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// Whether this run has no PostgreSQL on purpose (`STOWAGE_SKIP_POSTGRES=1`): its cases and tests are then skipped,
    /// and say so, rather than passing without running.
    static var skipsPostgres: Bool { ProcessInfo.processInfo.environment["STOWAGE_SKIP_POSTGRES"] == "1" }

    /// The kinds this run tests: both, or SQLite alone when PostgreSQL is skipped.
    static var available: [StoreKind] { skipsPostgres ? [.sqlite] : allCases }

    /// The trait of a test that needs the PostgreSQL server.
    static var needsPostgres: ConditionTrait {
        .disabled(if: skipsPostgres, "needs the PostgreSQL server scripts/test.sh starts; STOWAGE_SKIP_POSTGRES=1 skips it")
    }

    /// The server `scripts/postgres.sh` started; nil (and a recorded failure, unless STOWAGE_SKIP_POSTGRES=1) when the
    /// suite runs without it.
    static var postgresURL: String? {
        let environment = ProcessInfo.processInfo.environment
        if let url = environment["STOWAGE_TEST_POSTGRES"], !url.isEmpty { return url }
        if environment["STOWAGE_SKIP_POSTGRES"] != "1" {
            Issue.record("STOWAGE_TEST_POSTGRES is not set: run the suite with scripts/test.sh (or set STOWAGE_SKIP_POSTGRES=1)")
        }
        return nil
    }

    /// A fresh, empty database of this kind, removed after `body`: `instances` stores on it (separate connection
    /// pools, as separate key server instances behind a load balancer would have).
    func withStores(instances: Int = 1, _ body: ([any KeyServerStore]) async throws -> Void) async throws {
        switch self {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("keyserver-store-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: path) }
            try await body(try (0..<instances).map { _ in try SQLiteKeyServerStore(path: path + "/keyserver.sqlite") })
        case .postgres:
            guard let url = Self.postgresURL else { return }
            try await TestDatabase.with(url) { databaseURL in
                // Correctness, not speed: the whole suite loads the machine; a generous bound keeps a slow moment from failing it.
                let stores = try (0..<instances).map { _ in try PostgresKeyServerStore(url: databaseURL, operationTimeout: .seconds(60)) }
                do {
                    try await stores[0].migrate()
                    try await body(stores)
                } catch {
                    for store in stores { await store.close() }
                    throw error
                }
                for store in stores { await store.close() }
            }
        }
    }

    func withStore(_ body: (any KeyServerStore) async throws -> Void) async throws {
        try await withStores { try await body($0[0]) }
    }
}

/// A database of its own on the test PostgreSQL server, dropped afterwards.
enum TestDatabase {
    /// Runs `body` with a client on the database at `url` (another database than the URL's when `database` is given).
    static func withClient(_ url: String, database: String? = nil, _ body: (PostgresClient) async throws -> Void) async throws {
        let components = try #require(URLComponents(string: url))
        let client = PostgresClient(
            configuration: .init(
                host: components.host ?? "127.0.0.1",
                port: components.port ?? 5432,
                username: components.user ?? "stowage",
                password: components.password,
                database: database ?? String(components.path.drop { $0 == "/" }),
                tls: .disable
            ),
            backgroundLogger: Logger(label: "test.postgres")
        )
        let runner = Task { await client.run() }
        defer { runner.cancel() }
        try await body(client)
    }

    /// Runs one statement on the database at `url` (as a curious or careless operator would with psql).
    static func execute(_ url: String, _ sql: String) async throws {
        try await withClient(url) { try await $0.query(PostgresQuery(unsafeSQL: sql)) }
    }

    static func with(_ serverURL: String, _ body: (String) async throws -> Void) async throws {
        var components = try #require(URLComponents(string: serverURL))
        let name = "stowage_test_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())"
        try await withClient(serverURL, database: "postgres") { admin in
            try await admin.query("CREATE DATABASE \(unescaped: name)")
            components.path = "/\(name)"
            let result: Result<Void, any Error>
            do {
                try await body(try #require(components.string))
                result = .success(())
            } catch {
                result = .failure(error)
            }
            try await admin.query("DROP DATABASE IF EXISTS \(unescaped: name) WITH (FORCE)")
            try result.get()
        }
    }
}

/// Every store passes the same tests: the contract of ``KeyServerStore`` on SQLite and on PostgreSQL, including the
/// races several key server instances on one database run.
@Suite("Key server stores (SQLite and PostgreSQL)")
struct KeyServerStoreConformanceTests {
    static func lease(_ id: String, device: String, account: String = "a", expires: Int64 = 1_000) -> IssuedLease {
        IssuedLease(
            id: id,
            account: account,
            assetID: "movie",
            deviceID: device,
            keyIDs: ["k1", "k2"],
            type: .persistent,
            createdAt: 0,
            issuedAt: 0,
            storageExpiresAt: expires,
            playbackDuration: nil,
            renewableUntil: 2_000
        )
    }

    static func nonce(_ byte: UInt8) -> RequestNonce { RequestNonce([UInt8](repeating: byte, count: 16), window: 100) }

    static let audit = AuditRecord(time: 0, event: .issued, operation: "keys")

    /// A policy with no limit but `maxDevices`.
    static func policy(maxDevices: Int? = nil, maxStreams: Int? = nil, oncePerAccount: Bool = false) -> AssetPolicy {
        AssetPolicy(
            storageDuration: 1_000,
            playbackDuration: nil,
            renewable: true,
            renewalExtension: 1_000,
            renewableFor: 2_000,
            maxDevices: maxDevices,
            maxStreams: maxStreams,
            identityAllowed: true,
            oncePerAccount: oncePerAccount
        )
    }

    static func request(
        _ kind: IssuanceRequest.Kind,
        _ lease: IssuedLease,
        policy: AssetPolicy,
        nonce: RequestNonce?,
        now: Int64,
        reportedFirstPlay: Int64? = nil
    ) -> IssuanceRequest {
        IssuanceRequest(
            kind: kind,
            lease: lease,
            policy: policy,
            entitlement: Entitlement(account: lease.account, assets: ["*"]),
            nonce: nonce,
            now: now,
            reportedFirstPlay: reportedFirstPlay
        )
    }

    /// Saves under a device limit with no payload to sign; the outcome as a short string.
    static func save(
        _ store: any KeyServerStore,
        _ lease: IssuedLease,
        deviceLimit: Int?,
        nonce: RequestNonce,
        now: Int64,
        kind: IssuanceRequest.Kind = .persistent,
        reportedFirstPlay: Int64? = nil
    ) async throws -> String {
        let request = Self.request(kind, lease, policy: policy(maxDevices: deviceLimit), nonce: nonce, now: now, reportedFirstPlay: reportedFirstPlay)
        switch try await store.saveLease(request, audit: audit, sign: { _ in nil }) {
        case .saved: return "saved"
        case .replayed: return "replayed"
        case .refused(let refusal): return refusal.code.rawValue
        }
    }

    @Test(arguments: StoreKind.available)
    func nonceWindowAndDeviceLimitAreOneTransaction(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            #expect(
                try await Self.save(store, Self.lease("l1", device: "d1"), deviceLimit: 1, nonce: Self.nonce(1), now: 10) == "saved"
            )
            // The same nonce again, inside its window: nothing written.
            #expect(
                try await Self.save(store, Self.lease("l2", device: "d1"), deviceLimit: 1, nonce: Self.nonce(1), now: 109)
                    == "replayed"
            )
            #expect(try await store.lease(id: "l2") == nil)
            // Another device over the limit: refused, but its nonce is spent.
            let refused = try await Self.save(store, Self.lease("l3", device: "d2"), deviceLimit: 1, nonce: Self.nonce(2), now: 20)
            #expect(refused == "device_limit_reached")
            #expect(
                try await Self.save(store, Self.lease("l3", device: "d2"), deviceLimit: 2, nonce: Self.nonce(2), now: 21)
                    == "replayed"
            )
            // Once the window has passed the nonce is accepted again; an expired lease frees its slot.
            #expect(
                try await Self.save(store, Self.lease("l3", device: "d2"), deviceLimit: 1, nonce: Self.nonce(1), now: 1_001)
                    == "saved"
            )
            let stored = try #require(try await store.lease(id: "l3"))
            #expect(stored.keyIDs == ["k1", "k2"])
            #expect(stored.type == .persistent)
            #expect(try await store.auditRecords(limit: 10).count == 2)
        }
    }

    /// Step 6 of saveLease: a device's new persistent lease releases its older active leases of the asset whose keys it
    /// covers, in the same transaction, and takes their earliest first play; other keys, devices and accounts are left.
    @Test(arguments: StoreKind.available)
    func aNewLeaseSupersedesTheDevicesLeasesItCovers(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            var old = Self.lease("old", device: "d1")
            old.firstPlayedAt = 5
            #expect(try await Self.save(store, old, deviceLimit: 1, nonce: Self.nonce(1), now: 10) == "saved")
            var group = Self.lease("group", device: "d1")
            group.keyIDs = ["k3"]
            #expect(try await Self.save(store, group, deviceLimit: nil, nonce: Self.nonce(2), now: 20) == "saved")
            #expect(
                try await Self.save(store, Self.lease("elsewhere", device: "d1", account: "b"), deviceLimit: nil, nonce: Self.nonce(3), now: 25)
                    == "saved"
            )
            #expect(
                try await Self.save(store, Self.lease("other", device: "d2"), deviceLimit: 1, nonce: Self.nonce(4), now: 30)
                    == "device_limit_reached"
            )

            #expect(try await Self.save(store, Self.lease("new", device: "d1"), deviceLimit: 1, nonce: Self.nonce(5), now: 40) == "saved")
            #expect(try await store.lease(id: "old")?.releasedAt == 40)
            #expect(try await store.lease(id: "old")?.deletedAt == nil)
            #expect(try await store.lease(id: "new")?.firstPlayedAt == 5)
            #expect(try await store.lease(id: "group")?.releasedAt == nil)
            #expect(try await store.lease(id: "elsewhere")?.releasedAt == nil)
            let superseded = try await store.auditRecords(limit: 20).filter { $0.leaseID == "old" && $0.event == .released }
            #expect(superseded.count == 1 && superseded.first?.detail?.contains("superseded by lease new") == true)

            // The device releases what it knows of: the other device then has a slot.
            #expect(try await store.releaseLease(id: "new", at: 50, deletedAt: 50, nonce: Self.nonce(6), audit: Self.audit))
            #expect(try await store.releaseLease(id: "group", at: 50, deletedAt: 50, nonce: Self.nonce(7), audit: Self.audit))
            #expect(try await Self.save(store, Self.lease("other", device: "d2"), deviceLimit: 1, nonce: Self.nonce(8), now: 60) == "saved")
        }
    }

    @Test(arguments: StoreKind.available)
    func expiredNoncesAreForgottenInBatchesAndTheWindowStillHolds(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            // Five nonces seen early (window 100), two late.
            for byte in UInt8(1)...5 {
                #expect(
                    try await Self.save(store, Self.lease("e\(byte)", device: "d"), deviceLimit: nil, nonce: Self.nonce(byte), now: Int64(byte))
                        == "saved"
                )
            }
            for byte in UInt8(6)...7 {
                #expect(
                    try await Self.save(store, Self.lease("l\(byte)", device: "d"), deviceLimit: nil, nonce: Self.nonce(byte), now: 500) == "saved"
                )
            }
            #expect(try await store.forgetNonces(seenAtOrBefore: 450, limit: 3) == 3)
            #expect(try await store.forgetNonces(seenAtOrBefore: 450, limit: 3) == 2)
            #expect(try await store.forgetNonces(seenAtOrBefore: 450, limit: 3) == 0)
            // The late ones are kept: still replays inside their window.
            #expect(try await Self.save(store, Self.lease("x", device: "d"), deviceLimit: nil, nonce: Self.nonce(7), now: 550) == "replayed")
        }
    }

    @Test(arguments: StoreKind.available)
    func releaseIsIdempotentAndARacingRenewalCannotUndoIt(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            var lease = Self.lease("l1", device: "d1")
            #expect(try await Self.save(store, lease, deviceLimit: nil, nonce: Self.nonce(1), now: 10) == "saved")
            #expect(try await store.releaseLease(id: "l1", at: 20, deletedAt: 19, nonce: Self.nonce(2), audit: Self.audit))
            #expect(!(try await store.releaseLease(id: "l1", at: 21, deletedAt: 19, nonce: Self.nonce(2), audit: Self.audit)))
            #expect(try await store.releaseLease(id: "l1", at: 30, deletedAt: 29, nonce: Self.nonce(3), audit: Self.audit))
            let released = try #require(try await store.lease(id: "l1"))
            #expect(released.releasedAt == 20)
            #expect(released.deletedAt == 19)
            // A renewal asked after the release.
            lease.storageExpiresAt = 5_000
            #expect(try await Self.save(store, lease, deviceLimit: nil, nonce: Self.nonce(4), now: 31, kind: .renewal) == "lease_expired")
            #expect(try await store.lease(id: "l1")?.storageExpiresAt == 1_000)
        }
    }

    @Test(arguments: StoreKind.available)
    func devicesKeepTheirFirstKeys(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            let first = DeviceRecord(id: "d", signingKey: [1], agreementKey: [2], firstSeenAt: 1)
            #expect(try await store.registerDevice(first) == first)
            #expect(try await store.registerDevice(DeviceRecord(id: "d", signingKey: [3], agreementKey: [4], firstSeenAt: 2)) == first)
            #expect(try await store.device(id: "d") == first)
            #expect(try await store.device(id: "other") == nil)
        }
    }

    @Test(arguments: StoreKind.available)
    func assetsAndSealedKeys(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            let nonce = [UInt8](repeating: 7, count: 12)
            try await store.saveAsset(
                AssetRecord(id: "movie", policy: "default", createdAt: 5),
                keys: [
                    ContentKeyRecord(assetID: "movie", keyID: "k1", nonce: nonce, sealedKey: [UInt8](repeating: 1, count: 32)),
                    ContentKeyRecord(assetID: "movie", keyID: "k2", nonce: nonce, sealedKey: [UInt8](repeating: 2, count: 32)),
                ]
            )
            // The policy changes, the creation time stays; a key ID stored again is replaced.
            try await store.saveAsset(
                AssetRecord(id: "movie", policy: "rental", createdAt: 9),
                keys: [ContentKeyRecord(assetID: "movie", keyID: "k2", nonce: nonce, sealedKey: [UInt8](repeating: 3, count: 32))]
            )
            #expect(try await store.asset(id: "movie") == AssetRecord(id: "movie", policy: "rental", createdAt: 5))
            #expect(try await store.asset(id: "other") == nil)
            let keys = try await store.contentKeys(assetID: "movie", keyIDs: ["k2", "k1", "k9"]).sorted { $0.keyID < $1.keyID }
            #expect(keys.map(\.keyID) == ["k1", "k2"])
            #expect(keys.last?.sealedKey == [UInt8](repeating: 3, count: 32))
            #expect(keys.first?.nonce == nonce)
            #expect(try await store.contentKeys(assetID: "movie", keyIDs: []).isEmpty)
            #expect(try await store.contentKeys(assetID: "other", keyIDs: ["k1"]).isEmpty)
        }
    }

    @Test(arguments: StoreKind.available)
    func sealedKeysPageInKeyOrderAndAreReplacedOnlyWhereUnchanged(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            func record(_ asset: String, _ key: String, _ byte: UInt8) -> ContentKeyRecord {
                ContentKeyRecord(
                    assetID: asset,
                    keyID: key,
                    nonce: [UInt8](repeating: byte, count: 12),
                    sealedKey: [UInt8](repeating: byte, count: 32)
                )
            }
            try await store.saveAsset(AssetRecord(id: "b", policy: "default", createdAt: 0), keys: [record("b", "k2", 1), record("b", "k1", 2)])
            try await store.saveAsset(AssetRecord(id: "a", policy: "default", createdAt: 0), keys: [record("a", "k9", 3)])
            let first = try await store.contentKeys(after: nil, limit: 2)
            #expect(first.map { "\($0.assetID)/\($0.keyID)" } == ["a/k9", "b/k1"])
            let rest = try await store.contentKeys(after: ContentKeyPosition(after: first[1]), limit: 2)
            #expect(rest == [record("b", "k2", 1)])
            #expect(try await store.contentKeys(after: ContentKeyPosition(after: rest[0]), limit: 2).isEmpty)

            // One change applies; one whose row changed since it was read (a stale old value) is left alone.
            let changed = try await store.replaceSealedKeys([
                SealedKeyChange(old: record("a", "k9", 3), new: record("a", "k9", 4)),
                SealedKeyChange(old: record("b", "k1", 9), new: record("b", "k1", 5)),
            ])
            #expect(changed == 1)
            let after = try await store.contentKeys(after: nil, limit: 10)
            #expect(after == [record("a", "k9", 4), record("b", "k1", 2), record("b", "k2", 1)])
            #expect(try await store.replaceSealedKeys([]) == 0)
        }
    }

    @Test(arguments: StoreKind.available)
    func streamLimitAndIdentityStreamsReuseTheOpenLease(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            func stream(_ id: String, device: String, nonce: RequestNonce?, now: Int64) async throws -> LeaseSaveResult {
                var lease = Self.lease(id, device: device)
                lease.type = .streaming
                let request = Self.request(nonce == nil ? .identity : .streaming, lease, policy: Self.policy(maxStreams: 1), nonce: nonce, now: now)
                return try await store.saveLease(request, audit: Self.audit) { _ in nil }
            }
            guard case .saved(let first, _) = try await stream("s1", device: "d1", nonce: Self.nonce(1), now: 10) else {
                Issue.record("the first stream was refused")
                return
            }
            #expect(first.id == "s1")
            // Another device: over the limit.
            guard case .refused(let refusal) = try await stream("s2", device: "d2", nonce: Self.nonce(2), now: 11) else {
                Issue.record("a second device streamed past the limit")
                return
            }
            #expect(refusal.code == .streamLimitReached)
            // An identity stream (no nonce) of a device already streaming the asset is that stream: nothing new.
            guard case .saved(let reused, _) = try await stream("s3", device: "d1", nonce: nil, now: 12) else {
                Issue.record("the identity stream was refused")
                return
            }
            #expect(reused.id == "s1")
            #expect(try await store.lease(id: "s3") == nil)
            // Released, the slot is free again.
            #expect(try await store.releaseLease(id: "s1", at: 13, deletedAt: nil, nonce: Self.nonce(3), audit: Self.audit))
            guard case .saved = try await stream("s2", device: "d2", nonce: Self.nonce(4), now: 14) else {
                Issue.record("a freed stream slot was refused")
                return
            }
        }
    }

    @Test(arguments: StoreKind.available)
    func oncePerAccountRentalsInheritAndEnd(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            var rental = Self.policy(oncePerAccount: true)
            rental.playbackDuration = 100
            var first = Self.lease("r1", device: "d1", expires: 1_000)
            first.playbackDuration = 100
            first.createdAt = 1
            _ = try await store.saveLease(Self.request(.persistent, first, policy: rental, nonce: Self.nonce(1), now: 10), audit: Self.audit) { _ in
                nil
            }
            // A second device asks at 50: it inherits the windows, and asking counts as playing (first play = 50).
            var second = Self.lease("r2", device: "d2", expires: 9_000)
            second.createdAt = 50
            guard
                case .saved(let inherited, _) = try await store.saveLease(
                    Self.request(.persistent, second, policy: rental, nonce: Self.nonce(2), now: 50),
                    audit: Self.audit,
                    sign: { _ in nil }
                )
            else {
                Issue.record("the second rental lease was refused")
                return
            }
            #expect(inherited.storageExpiresAt == 1_000 && inherited.playbackDuration == 100 && inherited.firstPlayedAt == 50)
            #expect(try await store.lease(id: "r1")?.firstPlayedAt == 50)
            // After the playback window (50 + 100): the rental has ended for the account.
            var third = Self.lease("r3", device: "d3")
            third.createdAt = 200
            let ended = try await store.saveLease(Self.request(.persistent, third, policy: rental, nonce: Self.nonce(3), now: 200), audit: Self.audit)
            {
                _ in nil
            }
            guard case .refused(let refusal) = ended else {
                Issue.record("a lease was issued after the rental ended")
                return
            }
            #expect(refusal.rule == .rentalWindow && refusal.message.contains(HumanTime.date(150)), "\(refusal)")
        }
    }

    @Test(arguments: StoreKind.available)
    func firstPlayKeepsTheEarliestAndRefusesReplaysAndStrangers(_ kind: StoreKind) async throws {
        try await kind.withStore { store async throws in
            #expect(try await Self.save(store, Self.lease("l1", device: "d1"), deviceLimit: nil, nonce: Self.nonce(1), now: 10) == "saved")
            let audit = AuditRecord(time: 0, event: .firstPlayReported, operation: "first-play")
            #expect(
                try await store.recordFirstPlay(leaseID: "l1", deviceID: "d1", at: 40, nonce: Self.nonce(2), now: 41, audit: audit)
                    == .recorded(firstPlayedAt: 40)
            )
            #expect(
                try await store.recordFirstPlay(leaseID: "l1", deviceID: "d1", at: 30, nonce: Self.nonce(3), now: 42, audit: audit)
                    == .recorded(firstPlayedAt: 30)
            )
            #expect(
                try await store.recordFirstPlay(leaseID: "l1", deviceID: "d1", at: 60, nonce: Self.nonce(4), now: 43, audit: audit)
                    == .recorded(firstPlayedAt: 30)
            )
            #expect(try await store.recordFirstPlay(leaseID: "l1", deviceID: "d1", at: 20, nonce: Self.nonce(4), now: 44, audit: audit) == .replayed)
            #expect(
                try await store.recordFirstPlay(leaseID: "l1", deviceID: "d2", at: 20, nonce: Self.nonce(5), now: 45, audit: audit) == .unknownLease
            )
            #expect(try await store.lease(id: "l1")?.firstPlayedAt == 30)
            // A renewal never moves the first play later.
            #expect(
                try await Self.save(
                    store,
                    Self.lease("l1", device: "d1"),
                    deviceLimit: nil,
                    nonce: Self.nonce(6),
                    now: 50,
                    kind: .renewal,
                    reportedFirstPlay: 90
                )
                    == "saved"
            )
            #expect(try await store.lease(id: "l1")?.firstPlayedAt == 30)
            let events = try await store.auditRecords(limit: 100).map(\.event)
            #expect(events == [.issued, .firstPlayReported, .firstPlayReported, .firstPlayReported, .issued])
        }
    }

    /// Several instances on one database, many requests at once: the device limit and the replay window hold.
    @Test(arguments: StoreKind.available)
    func limitsHoldAcrossInstancesUnderConcurrentLoad(_ kind: StoreKind) async throws {
        try await kind.withStores(instances: 3) { stores async throws in
            // 24 devices of one account race for 5 slots, through 3 instances.
            let saved = try await withThrowingTaskGroup(of: String.self) { group in
                for n in 0..<24 {
                    group.addTask {
                        try await Self.save(
                            stores[n % stores.count],
                            Self.lease("l\(n)", device: "d\(n)"),
                            deviceLimit: 5,
                            nonce: Self.nonce(UInt8(n + 10)),
                            now: 10
                        )
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(saved.filter { $0 == "saved" }.count == 5, "\(saved.sorted())")
            #expect(saved.filter { $0 == "device_limit_reached" }.count == 19)
            // 12 requests with one nonce, at once: exactly one is not a replay.
            let replays = try await withThrowingTaskGroup(of: String.self) { group in
                for n in 0..<12 {
                    group.addTask {
                        try await Self.save(
                            stores[n % stores.count],
                            Self.lease("n\(n)", device: "e\(n)"),
                            deviceLimit: nil,
                            nonce: Self.nonce(200),
                            now: 20
                        )
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(replays.filter { $0 == "saved" }.count == 1, "\(replays.sorted())")
        }
    }

    @Test(StoreKind.needsPostgres) func postgresSchemaIsCheckedAndMigratedOnce() async throws {
        guard let url = StoreKind.postgresURL else { return }
        try await TestDatabase.with(url) { databaseURL in
            // A generous bound, as in withStores: the whole suite loads the machine.
            let store = try PostgresKeyServerStore(url: databaseURL, operationTimeout: .seconds(60))
            let other = try PostgresKeyServerStore(url: databaseURL, operationTimeout: .seconds(60))
            do {
                #expect(try await store.schemaVersionFound() == 0)
                await #expect(throws: KeyServerSetupError.self) { try await store.checkSchema() }
                do {
                    try await store.checkSchema()
                } catch let error as KeyServerSetupError {
                    #expect(error.code == "schema_outdated")
                    #expect(error.message.contains("stowage keyserver init --database"))
                }
                // Two instances migrating at once apply it once.
                async let first: Void = store.migrate()
                async let second: Void = other.migrate()
                _ = try await (first, second)
                try await store.checkSchema()
                #expect(try await other.schemaVersionFound() == PostgresKeyServerStore.schemaVersion)
            } catch {
                await store.close()
                await other.close()
                throw error
            }
            await store.close()
            await other.close()
        }
    }

    @Test func anUnreachableOrMalformedDatabaseIsAClearError() async throws {
        // A port nothing listens on: held bound, not listening, so it refuses connections.
        let nowhere = try HeldPort()
        defer { nowhere.release() }
        let url = "postgres://stowage@127.0.0.1:\(nowhere.port)/keys"
        let store = try PostgresKeyServerStore(url: url + "?sslmode=disable", operationTimeout: .seconds(2))
        do {
            _ = try await store.asset(id: "movie")
            Issue.record("an unreachable database answered")
        } catch let error as KeyServerSetupError {
            #expect(error.code == "database_unavailable")
            #expect(error.message.contains(url), "\(error.message)")
        }
        await store.close()
        #expect(throws: KeyServerSetupError.self) { try PostgresKeyServerStore(url: "mysql://root:secret@host/db") }
        do {
            _ = try PostgresKeyServerStore(url: "postgres://:secret@/db")
        } catch let error as KeyServerSetupError {
            #expect(error.code == "invalid_database_url")
            #expect(!error.message.contains("secret"), "a password was echoed: \(error.message)")
        }
    }
}
