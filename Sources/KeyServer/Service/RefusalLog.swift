import Synchronization

/// Refusals waiting to be written to the audit log, aggregated per minute: one record per minute, operation, code and
/// account, with a count, so a flood of refused requests costs no database write per request (docs/key-server.md,
/// "Audit"). ``drain(before:)`` hands over what is complete; the server writes it every minute and at shutdown.
final class RefusalLog: Sendable {
    private struct Key: Hashable {
        var minute: Int64
        var operation: String
        var code: String?
        var account: String?
    }

    /// Past this many distinct keys in memory, refusals are counted without their account: a bound on memory under
    /// a flood of made-up accounts.
    private let capacity: Int
    private let entries = Mutex<[Key: AuditRecord]>([:])

    init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    /// Counts one refusal. The first record of each key keeps its details (device, asset, lease, message).
    func record(_ refusal: AuditRecord) {
        entries.withLock { entries in
            var key = Key(minute: refusal.time / 60, operation: refusal.operation, code: refusal.code, account: refusal.account)
            if entries[key] == nil, entries.count >= capacity { key.account = nil }
            if var existing = entries[key] {
                existing.count += refusal.count
                entries[key] = existing
            } else {
                var first = refusal
                first.time = key.minute * 60
                if key.account == nil { first.account = nil }
                entries[key] = first
            }
        }
    }

    /// Removes and returns the aggregated records of minutes that ended before `time` (all of them when nil), oldest
    /// first.
    func drain(before time: Int64? = nil) -> [AuditRecord] {
        entries.withLock { entries in
            let limit = time.map { $0 / 60 } ?? .max
            let done = entries.filter { $0.key.minute < limit }
            for key in done.keys { entries[key] = nil }
            return done.values.sorted { ($0.time, $0.operation, $0.code ?? "") < ($1.time, $1.operation, $1.code ?? "") }
        }
    }
}
