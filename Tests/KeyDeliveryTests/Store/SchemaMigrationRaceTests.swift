import Foundation
import KeyDelivery
import Synchronization
import Testing

/// Several processes opening a new data directory at once (a `stowage play` started beside the first `stowage
/// download`, as the playback benchmark does) all get a usable key store: none fails with "table key_leases already
/// exists" because another got to the schema first. Each store here has its own database connections, as a process
/// has, and they start together on one fresh directory, round after round.
struct SchemaMigrationRaceTests {
    @Test func storesOpenedTogetherOnANewDirectoryAllOpen() throws {
        for round in 0..<12 {
            let temporary = try TemporaryDirectory()
            defer { temporary.remove() }
            let failures = Mutex<[String]>([])
            let directory = temporary.dataDirectory
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do {
                    let store = try KeyStore(dataDirectory: directory, machineID: testMachineID, clock: TestClock(now: 1_000_000))
                    _ = try store.leases()
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "round \(round): \(failures.withLock { $0 })")
        }
    }
}
