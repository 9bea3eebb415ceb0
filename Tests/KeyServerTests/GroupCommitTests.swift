import Foundation
import GRDB
import Testing

@testable import KeyServer

/// The SQLite store's group commit (``GroupCommit``): concurrent writes share a transaction, each caller gets its own
/// result, a write that fails takes only its own changes back, and a transaction that cannot commit fails every caller
/// with nothing on disk.
struct GroupCommitTests {
    static func store() throws -> (SQLiteKeyServerStore, URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("group-commit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return (try SQLiteKeyServerStore(path: folder.appendingPathComponent("keyserver.sqlite").path), folder)
    }

    struct Refused: Error, Equatable { let number: Int }

    /// Inside the first write: holds its transaction open until `count` more writes wait for the next one (at most
    /// 30 s), so the batches are [first] and [the others] however slowly the others' tasks start.
    static func holdUntil(_ count: Int, queuedOn commits: GroupCommit) {
        for _ in 0..<3_000 where commits.queuedWrites < count { usleep(10_000) }
    }

    /// Until the first write's transaction has begun (at most 30 s).
    static func waitUntilWriting(_ commits: GroupCommit) async {
        for _ in 0..<3_000 where commits.batchesWritten == 0 { try? await Task.sleep(for: .milliseconds(10)) }
    }

    @Test func concurrentWritesShareTransactionsAndAFailureUndoesOnlyItsOwn() async throws {
        let (store, folder) = try Self.store()
        defer { try? FileManager.default.removeItem(at: folder) }
        let outcomes = await withTaskGroup(of: (Int, Result<Int, any Error>).self) { group in
            for number in 0..<40 {
                group.addTask {
                    do {
                        let value = try await store.commits.write { db in
                            try db.execute(sql: "INSERT INTO asset (id, policy, created_at) VALUES (?, 'default', 0)", arguments: ["a\(number)"])
                            if number == 0 { Self.holdUntil(39, queuedOn: store.commits) }
                            if number % 5 == 4 { throw Refused(number: number) }
                            return number * 10
                        }
                        return (number, .success(value))
                    } catch {
                        return (number, .failure(error))
                    }
                }
                // The others start once the first is inside its transaction.
                if number == 0 { await Self.waitUntilWriting(store.commits) }
            }
            return await group.reduce(into: [Int: Result<Int, any Error>]()) { $0[$1.0] = $1.1 }
        }
        for number in 0..<40 {
            switch outcomes[number] {
            case .success(let value)?: #expect(number % 5 != 4 && value == number * 10, "write \(number)")
            case .failure(let error)?: #expect(number % 5 == 4 && (error as? Refused) == Refused(number: number), "write \(number): \(error)")
            case nil: Issue.record("write \(number) has no outcome")
            }
        }
        let stored = try await store.pool.read { db in try String.fetchAll(db, sql: "SELECT id FROM asset ORDER BY id") }
        #expect(Set(stored) == Set((0..<40).filter { $0 % 5 != 4 }.map { "a\($0)" }))
        #expect(store.commits.batchesWritten == 2, "\(store.commits.batchesWritten) transactions for 40 writes")
    }

    @Test func aTransactionThatCannotCommitFailsEveryCallerAndKeepsNothing() async throws {
        let (store, folder) = try Self.store()
        defer { try? FileManager.default.removeItem(at: folder) }
        // A key of an asset that does not exist, with foreign keys checked at commit: the statement passes, the
        // commit fails, and with it every write of the batch.
        let results = await withTaskGroup(of: (Int, Bool).self) { group in
            for number in 0..<8 {
                group.addTask {
                    do {
                        _ = try await store.commits.write { db in
                            if number == 0 { Self.holdUntil(7, queuedOn: store.commits) }
                            if number == 3 {
                                try db.execute(sql: "PRAGMA defer_foreign_keys = ON")
                                try db.execute(
                                    sql: "INSERT INTO content_key (asset_id, key_id, nonce, sealed_key) VALUES ('none', 'k', x'00', x'00')"
                                )
                            }
                            try db.execute(sql: "INSERT INTO asset (id, policy, created_at) VALUES (?, 'default', 0)", arguments: ["b\(number)"])
                            return number
                        }
                        return (number, true)
                    } catch {
                        return (number, false)
                    }
                }
                // The others start once the first is inside its transaction.
                if number == 0 { await Self.waitUntilWriting(store.commits) }
            }
            return await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }.sorted { $0.key < $1.key }.map(\.value)
        }
        // The first write committed alone; the seven queued behind it shared a transaction that could not commit.
        #expect(results == [true] + Array(repeating: false, count: 7))
        let stored = try await store.pool.read { db in try String.fetchAll(db, sql: "SELECT id FROM asset ORDER BY id") }
        #expect(stored == ["b0"])
        #expect(store.commits.batchesWritten == 2)
        let keys = try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM content_key") }
        #expect(keys == 0)
    }
}
