import KeyDelivery
import StowageCore
import Testing

struct LeaseLifecycleTests {
    let terms = makeRecord().terms

    @Test func theWholeLifeOfALease() throws {
        var lease = LeaseLifecycle(acquired: terms)
        #expect(lease.state == .acquired)
        #expect(try lease.persist() == .store)
        #expect(lease.state == .persisted)
        #expect(try lease.startPlayback(at: 1_500_000) == .recordFirstPlay(at: 1_500_000))
        #expect(lease.state == .playing)
        var renewed = terms
        renewed.storageExpiresAt += 1_000
        #expect(try lease.renew(with: renewed) == .replacePayload)
        #expect(lease.record.terms.storageExpiresAt == terms.storageExpiresAt + 1_000)
        #expect(lease.record.firstPlayedAt == 1_500_000)
        #expect(try lease.returnLease(at: 1_600_000) == .eraseKeyMaterialAndQueueRelease(deletedAt: 1_600_000))
        #expect(lease.state == .returned)
        #expect(try lease.confirmRelease() == .markReleased)
        #expect(lease.state == .released)
    }

    @Test func firstPlayIsRecordedOnce() throws {
        var lease = LeaseLifecycle(record: makeRecord())
        #expect(try lease.startPlayback(at: 10) == .recordFirstPlay(at: 10))
        #expect(try lease.startPlayback(at: 20) == .none)
        #expect(lease.record.firstPlayedAt == 10)
    }

    @Test func repeatedEndingsAndConfirmationsAreIdempotent() throws {
        var lease = LeaseLifecycle(record: makeRecord())
        #expect(try lease.expire(at: 5) == .eraseKeyMaterialAndQueueRelease(deletedAt: 5))
        #expect(try lease.expire(at: 6) == .none)
        #expect(try lease.returnLease(at: 7) == .none)
        #expect(lease.state == .expired)
        #expect(try lease.confirmRelease() == .markReleased)
        #expect(try lease.confirmRelease() == .none)
    }

    @Test func nonsenseTransitionsThrow() throws {
        var persisted = LeaseLifecycle(record: makeRecord())
        #expect(throws: LeaseError.self) { try persisted.persist() }
        #expect(throws: LeaseError.self) { try persisted.confirmRelease() }
        var other = terms
        other.leaseId = "lease-2"
        #expect(throws: LeaseError.self) { try persisted.renew(with: other) }
        var otherDevice = terms
        otherDevice.deviceId = "ffffffffffffffffffffffffffffffff"
        #expect(throws: LeaseError.self) { try persisted.renew(with: otherDevice) }

        var returned = LeaseLifecycle(record: makeRecord(state: .returned))
        let error = #expect(throws: LeaseError.self) { try returned.renew(with: terms) }
        #expect(error?.reason == .invalidLeaseTransition)
        #expect(error?.code == "invalid_lease_transition")
        #expect(throws: LeaseError.self) { try returned.startPlayback(at: 1) }
        #expect(returned.state == .returned)
    }
}
