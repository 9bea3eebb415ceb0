import Synchronization

/// Counts the requests for each path, so each gets its attempt number for ``FaultPlan``.
final class AttemptCounter: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    /// Returns how many requests for `path` came before this one, and counts this one.
    func next(for path: String) -> Int {
        counts.withLock { counts in
            defer { counts[path, default: 0] += 1 }
            return counts[path, default: 0]
        }
    }
}
