import AssetDownload
import Foundation
import Synchronization
import Testing

/// Processes opening a new data directory's `stowage.sqlite` together (the download beside a `stowage play`, or the
/// service and a command) all open its download store: none fails because another was turning the file to WAL.
struct DownloadStoreOpeningTests {
    @Test func storesOpenedTogetherOnANewFileAllOpen() throws {
        for round in 0..<12 {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("download-tests-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: root) }
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do {
                    _ = try DownloadStore(databaseURL: root.appendingPathComponent("stowage.sqlite"))
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "round \(round): \(failures.withLock { $0 })")
        }
    }
}
