import Foundation
import KeyDelivery
import StowageCore
import StowageTestSupport
import Testing

@testable import AssetDownload

/// A download's token and headers are sealed in `download_tasks.secrets` (docs/SECURITY.md, "Whoever reads the data
/// directory's database"): rows from before are sealed once, and secrets that no longer open are said, not dropped.
struct DownloadSecretsTests {
    static let token = "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl"

    /// A store in a fresh data directory whose secrets are sealed under that directory's key store.
    static func store(_ root: URL) throws -> DownloadStore {
        let keyStore = try KeyStore(dataDirectory: root, machineID: MachineID("0123456789abcdef0123456789abcdef"), clock: TestClock(now: 1_000))
        let sealer = try keyStore.dataSealer()
        return try DownloadStore(databaseURL: root.appendingPathComponent("stowage.sqlite"), sealer: { sealer })
    }

    static func sqlite(_ root: URL, _ statement: String) async throws -> String {
        let output = try await ProcessRunner.run(program: "sqlite3", [root.appendingPathComponent("stowage.sqlite").path, statement])
        #expect(output.status == 0, "\(String(decoding: output.standardError, as: UTF8.self))")
        return String(decoding: output.standardOutput, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func aClearRowIsSealedOnceAndReadsBackWhole() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("download-secrets-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try Self.store(root)
        var request = DownloadRequest(url: "http://127.0.0.1:1/master.m3u8", assetId: "movie-1")
        request.token = Self.token
        request.headers = [["X-Client", "stowage"]]
        try store.insert(request, session: "test", at: 1_000)
        // As a Stowage from before sealing wrote it: the whole request, token included, in the clear.
        let clear = String(decoding: try JSONEncoder().encode(request), as: UTF8.self).replacingOccurrences(of: "'", with: "''")
        _ = try await Self.sqlite(root, "UPDATE download_tasks SET request = '\(clear)', secrets = NULL")

        #expect(try store.sealClearSecrets() == 1)
        #expect(try store.sealClearSecrets() == 0)  // sealed rows are left alone
        #expect(try await Self.sqlite(root, "SELECT count(*) FROM download_tasks WHERE secrets IS NULL OR request LIKE '%\(Self.token)%'") == "0")
        let record = try #require(try store.task("movie-1"))
        #expect(record.request.token == Self.token && record.request.headers == [["X-Client", "stowage"]])
        #expect(record.secretsDamage == nil)
    }

    @Test func secretsThatDoNotOpenAreSaidNotDropped() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("download-secrets-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try Self.store(root)
        var request = DownloadRequest(url: "http://127.0.0.1:1/master.m3u8", assetId: "movie-1")
        request.token = Self.token
        try store.insert(request, session: "test", at: 1_000)
        // One byte of the sealed secrets flipped, as an edit by hand or a copy from elsewhere would leave them.
        _ = try await Self.sqlite(
            root,
            """
            UPDATE download_tasks SET secrets = substr(secrets, 1, 20)
              || CASE WHEN substr(secrets, 21, 1) = X'00' THEN X'01' ELSE X'00' END || substr(secrets, 22)
            """
        )

        let record = try #require(try store.task("movie-1"))
        #expect(record.request.token == nil)
        #expect(record.secretsDamage?.code == "sealed_data_damaged")
        #expect(record.requestDamage == nil)  // the rest of the request still lists
    }
}
