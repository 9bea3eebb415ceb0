import Foundation
import GRDB
import KeyDelivery
import Synchronization
import Testing

/// The truncating checkpoint run after key material is erased holds the database's writer lock while it waits for
/// readers of an older snapshot. With the connection's 30 s busy timeout, a reader that stayed in its transaction (a
/// playback reading the store while a recording superseded its lease) held every other write back, and the recorder's
/// own failed with `database is locked` (a CI run of 2026-12-07). It now waits a quarter of a second at most.
@Suite("WAL checkpoints")
struct CheckpointTests {
    @Test("a truncating checkpoint beside a long reader gives up without waiting for it, and truncates once the reader is gone")
    func checkpointDoesNotWaitForReaders() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("checkpoint-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("stowage.sqlite").path
        var configuration = Configuration()
        configuration.busyMode = .timeout(TimeInterval(StateDatabase.busyTimeoutSeconds))
        let pool = try DatabasePool(path: path, configuration: configuration)
        try await pool.write { db in
            try db.execute(sql: "CREATE TABLE t (v BLOB)")
            try db.execute(sql: "INSERT INTO t VALUES (randomblob(4096))")
        }
        // Another process's reader: a connection of its own that opens a snapshot and keeps it for 4 s.
        let reader = try DatabaseQueue(path: path)
        let reading = Mutex(false)
        let done = Mutex(false)
        Thread.detachNewThread {
            try? reader.read { db in
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
                reading.withLock { $0 = true }
                Thread.sleep(forTimeInterval: 4)
            }
            done.withLock { $0 = true }
        }
        for _ in 0..<200 where !reading.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(reading.withLock { $0 })
        // New frames the reader's snapshot does not see, which the checkpoint would have to wait for it to move.
        try await pool.write { db in try db.execute(sql: "DELETE FROM t") }
        // A checkpoint that waited for the reader would have emptied the WAL: it gives up instead, and the frames stay.
        pool.truncateWAL()
        #expect(try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int ?? 0 > 0)
        #expect(!done.withLock { $0 }, "the reader was still reading when the checkpoint returned")
        for _ in 0..<1_000 where !done.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        // With the reader gone, the frames are moved and the WAL emptied.
        pool.truncateWAL()
        let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        #expect(wal == 0)
    }
}
