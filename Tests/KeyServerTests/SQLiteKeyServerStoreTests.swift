import Foundation
import KeyDelivery
import KeyServer
import Testing

struct SQLiteKeyServerStoreTests {
    static func withStore(_ body: (SQLiteKeyServerStore) async throws -> Void) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keyserver-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await body(SQLiteKeyServerStore(path: path + "/keyserver.sqlite"))
    }

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

    /// Saves under a device limit with no payload to sign; the outcome as a short string.
    static func save(_ store: SQLiteKeyServerStore, _ lease: IssuedLease, deviceLimit: Int?, nonce: RequestNonce, now: Int64) async throws -> String {
        switch try await store.saveLease(
            lease,
            limits: IssuanceLimits(maxDevices: deviceLimit),
            nonce: nonce,
            now: now,
            audit: audit,
            sign: { _ in nil }
        ) {
        case .saved: "saved"
        case .replayed: "replayed"
        case .released: "released"
        case .deviceLimitReached(let count): "deviceLimitReached(\(count))"
        case .streamLimitReached(let count): "streamLimitReached(\(count))"
        case .rentalEnded(let end): "rentalEnded(\(end))"
        }
    }

    @Test func nonceWindowAndDeviceLimitAreOneTransaction() async throws {
        try await Self.withStore { store async throws in
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
            #expect(refused == "deviceLimitReached(1)")
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

    @Test func releaseIsIdempotentAndARacingRenewalCannotUndoIt() async throws {
        try await Self.withStore { store async throws in
            var lease = Self.lease("l1", device: "d1")
            #expect(try await Self.save(store, lease, deviceLimit: nil, nonce: Self.nonce(1), now: 10) == "saved")
            #expect(try await store.releaseLease(id: "l1", at: 20, deletedAt: 19, nonce: Self.nonce(2), audit: Self.audit))
            #expect(!(try await store.releaseLease(id: "l1", at: 21, deletedAt: 19, nonce: Self.nonce(2), audit: Self.audit)))
            #expect(try await store.releaseLease(id: "l1", at: 30, deletedAt: 29, nonce: Self.nonce(3), audit: Self.audit))
            let released = try #require(try await store.lease(id: "l1"))
            #expect(released.releasedAt == 20)
            #expect(released.deletedAt == 19)
            // A renewal computed before the release saw it.
            lease.storageExpiresAt = 5_000
            #expect(try await Self.save(store, lease, deviceLimit: nil, nonce: Self.nonce(4), now: 31) == "released")
            #expect(try await store.lease(id: "l1")?.storageExpiresAt == 1_000)
        }
    }

    @Test func devicesKeepTheirFirstKeys() async throws {
        try await Self.withStore { store async throws in
            let first = DeviceRecord(id: "d", signingKey: [1], agreementKey: [2], firstSeenAt: 1)
            #expect(try await store.registerDevice(first) == first)
            #expect(try await store.registerDevice(DeviceRecord(id: "d", signingKey: [3], agreementKey: [4], firstSeenAt: 2)) == first)
            #expect(try await store.device(id: "d") == first)
            #expect(try await store.device(id: "other") == nil)
        }
    }
}
