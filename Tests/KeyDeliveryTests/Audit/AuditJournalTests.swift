import Foundation
import Testing

@testable import KeyDelivery

struct AuditJournalTests {
    /// Known answers computed independently with Python's hashlib from the encoding documented in `AuditChain`.
    @Test func entryHashesFollowTheDocumentedEncoding() {
        let first = AuditChain.hash(
            sequence: 1,
            time: 1_763_700_000,
            kind: .persist,
            assetId: "movie-1",
            leaseId: "lease-1",
            detail: #"{"keyCount":1,"serverTime":1763700000}"#,
            previousHash: AuditChain.genesisHash
        )
        #expect(first == "0b349915a829c33f4175cfe645917978bc4db43e7fca211616774c26d8453a91")
        let second = AuditChain.hash(
            sequence: 2,
            time: 1_763_700_100,
            kind: .firstPlay,
            assetId: "movie-1",
            leaseId: "lease-1",
            detail: "{}",
            previousHash: first
        )
        #expect(second == "28c22297a06600d58d3a60bde6cb17bc0f149ce42c1e1fedb6bec18f7cde94b9")
        let noSubject = AuditChain.hash(
            sequence: 3,
            time: -5,
            kind: .rollbackDetected,
            assetId: nil,
            leaseId: nil,
            detail: #"{"note":"a\"b"}"#,
            previousHash: first
        )
        #expect(noSubject == "f97ee11d1fcbf31fcf80866a0e47687b21592d992d3f48c6aeb6cd266133adbc")
    }

    @Test func detailsAreCanonicalJSON() throws {
        let detail: AuditDetail = ["zeta": 1, "alpha": "x\"y\\z\n\u{01}", "mid": true, "Beta": -3]
        #expect(detail.canonicalJSON == #"{"Beta":-3,"alpha":"x\"y\\z\n\u0001","mid":true,"zeta":1}"#)
        let object = try JSONSerialization.jsonObject(with: Data(detail.canonicalJSON.utf8)) as? [String: Any]
        #expect(object?["alpha"] as? String == "x\"y\\z\n\u{01}")
        #expect(AuditDetail().canonicalJSON == "{}")
    }

    /// A store with six entries: server key pinned, persist, first play, renewal, time re-anchored, return.
    private func makeJournal(in temporary: TemporaryDirectory) throws -> KeyStore {
        let server = try TestKeyServer()
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.persist(try server.payload(), from: server, at: 1_000_000)
        _ = try store.authorizePlayback(assetId: "movie-1", at: 1_000_100)
        try store.renew(try server.payload(storageExpiresAt: 2_500_000, serverTime: 1_000_200), at: 1_000_200)
        try store.returnLease(leaseId: "lease-1", at: 1_000_300)
        return store
    }

    @Test func everyStoreOperationIsChained() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try makeJournal(in: temporary)
        let entries = try store.auditEntries()
        #expect(entries.map(\.kind) == [.serverKeyPinned, .persist, .firstPlay, .renewal, .timeReanchored, .return])
        #expect(entries.map(\.sequence) == [1, 2, 3, 4, 5, 6])
        #expect(entries[0].previousHash == AuditChain.genesisHash)
        for (earlier, later) in zip(entries, entries.dropFirst()) {
            #expect(later.previousHash == earlier.hash)
        }
        #expect(entries.allSatisfy { AuditChain.recomputedHash(of: $0) == $0.hash })
        let verification = try store.verifyAuditJournal()
        #expect(verification.isIntact && verification.entryCount == 6 && verification.firstBadSequence == nil)
        let appended = try store.appendAuditEntry(.acquire, assetId: "movie-2", leaseId: "lease-2", detail: ["type": "streaming"], at: 1_000_400)
        #expect(appended.sequence == 7 && appended.previousHash == entries[5].hash)
        #expect(try store.verifyAuditJournal().isIntact)
        #expect(
            try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 1_000_500)).verifyAuditJournal()
                .isIntact
        )
    }

    @Test func anEditedEntryIsFound() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try makeJournal(in: temporary)
        try store.executeUncheckedForTesting("UPDATE key_audit_journal SET time = time + 86400 WHERE sequence = 3")
        let verification = try store.verifyAuditJournal()
        #expect(verification.firstBadSequence == 3)
        #expect(verification.problem == .alteredEntry)
        #expect(!verification.isIntact)
    }

    @Test func anEditedEntryWithARecomputedHashIsFoundByTheNextLink() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try makeJournal(in: temporary)
        let entry = try #require(try store.auditEntries().first { $0.sequence == 2 })
        let forged = AuditChain.hash(
            sequence: 2,
            time: entry.time + 86_400,
            kind: entry.kind,
            assetId: entry.assetId,
            leaseId: entry.leaseId,
            detail: entry.detail,
            previousHash: entry.previousHash
        )
        try store.executeUncheckedForTesting("UPDATE key_audit_journal SET time = time + 86400, hash = '\(forged)' WHERE sequence = 2")
        let verification = try store.verifyAuditJournal()
        #expect(verification.firstBadSequence == 2)
        #expect(verification.problem == .brokenLink)
    }

    @Test func aDeletedEntryIsFound() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try makeJournal(in: temporary)
        try store.executeUncheckedForTesting("DELETE FROM key_audit_journal WHERE sequence = 2")
        #expect(try store.verifyAuditJournal().firstBadSequence == 2)
        #expect(try store.verifyAuditJournal().problem == .missingEntry)
        // Renumbering the later entries to close the gap breaks their hashes instead.
        try store.executeUncheckedForTesting("UPDATE key_audit_journal SET sequence = sequence - 1 WHERE sequence > 2")
        #expect(try store.verifyAuditJournal().firstBadSequence == 2)
    }

    @Test func deletingTheLastEntryIsFoundThroughTheHead() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try makeJournal(in: temporary)
        try store.executeUncheckedForTesting("DELETE FROM key_audit_journal WHERE sequence = 5")
        let verification = try store.verifyAuditJournal()
        #expect(verification.firstBadSequence == 5)
        #expect(verification.problem == .missingEntry)
    }

    @Test func reorderedEntriesAreFound() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try makeJournal(in: temporary)
        // Swap entries 2 and 3 whole (fields and hashes), keeping the sequence numbers in order.
        try store.executeUncheckedForTesting(
            """
            UPDATE key_audit_journal SET sequence = -2 WHERE sequence = 2;
            UPDATE key_audit_journal SET sequence = 2 WHERE sequence = 3;
            UPDATE key_audit_journal SET sequence = 3 WHERE sequence = -2;
            """
        )
        let verification = try store.verifyAuditJournal()
        #expect(verification.firstBadSequence == 2)
        #expect(verification.problem == .alteredEntry)
    }

    @Test func anInsertedEntryIsFound() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try makeJournal(in: temporary)
        let entries = try store.auditEntries()
        // Make room after entry 2 and put in a well-formed entry chained to it; entry 4 (the old 3) no longer chains.
        try store.executeUncheckedForTesting(
            "UPDATE key_audit_journal SET sequence = sequence + 100 WHERE sequence > 2; "
                + "UPDATE key_audit_journal SET sequence = sequence - 99 WHERE sequence > 100"
        )
        let hash = AuditChain.hash(
            sequence: 3,
            time: 1_000_150,
            kind: .renewal,
            assetId: "movie-1",
            leaseId: "lease-1",
            detail: "{}",
            previousHash: entries[1].hash
        )
        try store.executeUncheckedForTesting(
            "INSERT INTO key_audit_journal VALUES (3, 1000150, 'renewal', 'movie-1', 'lease-1', '{}', '\(entries[1].hash)', '\(hash)')"
        )
        let verification = try store.verifyAuditJournal()
        #expect(verification.firstBadSequence == 4)
        #expect(!verification.isIntact)
    }

    @Test func verifyingAListOfEntriesNeedsNoDatabase() throws {
        var entries: [AuditEntry] = []
        var previous = AuditChain.genesisHash
        for sequence in Int64(1)...3 {
            let hash = AuditChain.hash(
                sequence: sequence,
                time: sequence,
                kind: .release,
                assetId: "a",
                leaseId: "l",
                detail: "{}",
                previousHash: previous
            )
            entries.append(
                AuditEntry(
                    sequence: sequence,
                    time: sequence,
                    kind: .release,
                    assetId: "a",
                    leaseId: "l",
                    detail: "{}",
                    previousHash: previous,
                    hash: hash
                )
            )
            previous = hash
        }
        #expect(AuditChain.verify(entries, head: (3, previous)).isIntact)
        #expect(AuditChain.verify([], head: nil).isIntact)
        #expect(AuditChain.verify(entries, head: nil).problem == .headMismatch)
        #expect(AuditChain.verify(Array(entries.dropFirst()), head: (3, previous)).firstBadSequence == 1)
        #expect(AuditChain.verify(entries, head: (4, previous)).firstBadSequence == 4)
        #expect(AuditChain.verify(entries, head: (3, AuditChain.genesisHash)).firstBadSequence == 3)
    }
}
