import GRDB
import Synchronization

/// Commits the writes of concurrent requests in one SQLite transaction (group commit).
///
/// Each write waits in a queue; whichever arrives while no batch is being written starts one on the database's
/// writer, which takes every write queued by then, runs each in a savepoint of one `BEGIN IMMEDIATE` transaction, and
/// commits once. A write that throws rolls back to its savepoint, so its own changes are gone and the others' stay;
/// each caller gets its own result only once the transaction has committed, and the commit's error if it did not, so
/// no caller is ever told of a write that is not on disk. Writes queued while a batch runs make the next batch.
///
/// Unlike GRDB's async `write`, a queued write is not cancelled with its caller's task: it commits, and the caller's
/// answer is lost, as when the connection drops after the commit (the protocol's retry covers that).
final class GroupCommit: Sendable {
    private struct Pending: Sendable {
        let work: @Sendable (Database) throws -> any Sendable
        let done: @Sendable (Result<any Sendable, any Error>) -> Void
    }

    private let pool: DatabasePool
    private let state = Mutex<(queue: [Pending], writing: Bool)>(([], false))
    private let batches = Atomic<Int>(0)

    /// How many transactions have been written (for tests).
    var batchesWritten: Int { batches.load(ordering: .relaxed) }

    /// How many writes wait for the next transaction (for tests).
    var queuedWrites: Int { state.withLock { $0.queue.count } }

    init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Runs `work` in the next batch's transaction and returns its result once that transaction has committed.
    func write<T: Sendable>(_ work: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let pending = Pending(
                work: { try work($0) },
                done: { result in
                    // `work` returned a T, so the cast holds.
                    continuation.resume(with: result.map { $0 as! T })
                }
            )
            let starts = state.withLock { state in
                state.queue.append(pending)
                guard !state.writing else { return false }
                state.writing = true
                return true
            }
            if starts { drain() }
        }
    }

    /// Writes one batch on the database's writer, then, if more writes queued meanwhile, asks the writer again for the
    /// next. One batch per turn: a loop of batches would hold the writer for as long as requests keep coming, and the
    /// store's other writes (a new device, an asset, the nonce cleanup) queue on the same writer behind it.
    private func drain() {
        pool.asyncWriteWithoutTransaction { [self] db in
            let batch = state.withLock { state in
                let batch = state.queue
                state.queue = []
                if batch.isEmpty { state.writing = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            batches.add(1, ordering: .relaxed)
            var results: [Result<any Sendable, any Error>] = []
            results.reserveCapacity(batch.count)
            do {
                try db.inTransaction(.immediate) {
                    for pending in batch {
                        var value: (any Sendable)?
                        do {
                            try db.inSavepoint {
                                value = try pending.work(db)
                                return .commit
                            }
                            results.append(.success(value!))
                        } catch {
                            results.append(.failure(error))
                        }
                    }
                    return .commit
                }
            } catch {
                // Nothing of the batch is on disk: each caller gets the transaction's error.
                results = Array(repeating: .failure(error), count: batch.count)
            }
            for (pending, result) in zip(batch, results) { pending.done(result) }
            // Still `writing`: the next turn takes what queued meanwhile, or ends the run when nothing did.
            drain()
        }
    }
}
