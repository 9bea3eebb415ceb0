import Foundation
import KeyServer
import Synchronization
import Testing

/// Key server instances started together on one new SQLite file all open it: none fails because another created
/// the schema first (`DatabaseMigrator.openMigrated(path:configuration:tries:)`).
struct SQLiteStoreOpeningTests {
    @Test func instancesStartedTogetherOnANewFileAllOpen() async throws {
        for round in 0..<12 {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("keyserver-store-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let opened = Mutex<[SQLiteKeyServerStore]>([])
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do {
                    let store = try SQLiteKeyServerStore(path: path + "/keyserver.sqlite")
                    opened.withLock { $0.append(store) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "round \(round): \(failures.withLock { $0 })")
            for store in opened.withLock({ $0 }) {
                try await store.checkReady()
                await store.close()
            }
        }
    }
}
