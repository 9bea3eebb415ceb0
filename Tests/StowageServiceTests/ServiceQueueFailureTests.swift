import DownloadTestSupport
import Foundation
import Logging
import OfflinePackage
import StowageService
import StowageTestSupport
import Synchronization
import Testing

/// Keeps what a logger is told, for a test to read.
final class CapturedLog: Sendable {
    let lines = Mutex<[String]>([])

    var logger: Logger {
        Logger(label: "test.captured") { _ in Handler(log: self) }
    }

    func contains(_ text: String) -> Bool { lines.withLock { $0.contains { $0.contains(text) } } }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .notice

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            log.lines.withLock { $0.append("\(event.level) \(event.message)") }
        }
    }
}

/// The service's queue when the download records cannot be read: said in its log, once when it starts and once when it
/// ends, instead of the queue simply starting nothing (a `try?` issue 15 named).
struct ServiceQueueFailureTests {
    @Test("a download record damaged under the running service: the log says the queue cannot be read, then that it can again")
    func unreadableQueueIsLogged() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = CapturedLog()
        let service = try DownloadService.open(
            dataDirectory: fixture.clientDirectory,
            configuration: ServiceTests.configuration(),
            logger: log.logger
        )
        let database = fixture.clientDirectory.url.appendingPathComponent("stowage.sqlite").path
        try await withService(service) { _ in
            // A queued task whose creation time is text: every read of the queue fails on it.
            let insert = """
                INSERT INTO download_tasks (asset_id, session, request, state, created_at, updated_at)
                VALUES ('broken', 'default', '{}', 'queued', 'yesterday', 0)
                """
            let inserted = try await ProcessRunner.run(program: "sqlite3", [database, insert])
            #expect(inserted.status == 0, "\(String(decoding: inserted.standardError, as: UTF8.self))")
            var said = false
            for _ in 0..<100 where !said {
                try await Task.sleep(for: .milliseconds(100))
                said = log.contains("the download queue cannot be read, so no download starts")
            }
            #expect(said, "\(log.lines.withLock { $0 })")
            #expect(log.contains("created_at") && log.contains("[database_damaged]"), "\(log.lines.withLock { $0 })")
            let deleted = try await ProcessRunner.run(program: "sqlite3", [database, "DELETE FROM download_tasks WHERE asset_id = 'broken'"])
            #expect(deleted.status == 0)
            var again = false
            for _ in 0..<100 where !again {
                try await Task.sleep(for: .milliseconds(100))
                again = log.contains("the download queue can be read again")
            }
            #expect(again, "\(log.lines.withLock { $0 })")
            // Said once, not at every tick (100 ms).
            #expect(log.lines.withLock { $0.filter { $0.contains("cannot be read, so no download starts") }.count } == 1)
        }
    }
}
