import Foundation
import KeyDelivery
import KeyServer
import StowageCrypto
import Testing

/// No content key is ever written in the clear (docs/design.md, "State on disk"): after a server has issued, renewed, served
/// and released keys, no file of its data directory (the SQLite database with its WAL, the keys, config.json) holds a
/// content key as raw bytes, hex or base64.
struct ContentKeyAtRestTests {
    @Test func noContentKeyInTheClearOnDisk() async throws {
        let fixture = try await KeyServerFixture.make { $0.policies["default"]?.identityAllowed = true }
        defer { fixture.remove() }
        let token = try await fixture.token()
        let device = try TestDevice()
        try await fixture.withLiveServer { client in
            let reply = try await client.requestKeys(try device.keyRequest(asset: "movie-1", keyIDs: KeyServerFixture.movieKeyIDs), token: token)
            let lease = try PayloadSigning.verify(try reply.decode(SignedPayload.self), serverKey: await client.serverKey()).lease
            #expect(try await client.renew(lease.leaseId, try device.renewRequest(leaseID: lease.leaseId), token: token).status == 200)
            #expect(try await client.get("/v1/identity/movie-1/\(KeyServerFixture.movieKeyIDs[0])", token: token).status == 200)
            let live = try device.keyRequest(asset: "live", keyIDs: [KeyServerFixture.liveKeyID], lease: .streaming)
            #expect(try await client.requestKeys(live, token: token).status == 200)
            #expect(try await client.release(lease.leaseId, try device.releaseRequest(leaseID: lease.leaseId)).status == 200)
            // Scanned while the server still runs (the WAL holds the recent writes), and again after it stopped.
            try Self.assertNoKeyInFiles(under: fixture.directory.path)
        }
        try Self.assertNoKeyInFiles(under: fixture.directory.path)
    }

    static func assertNoKeyInFiles(under path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let files = try FileManager.default.subpathsOfDirectory(atPath: path)
        #expect(files.contains(KeyServerDataDirectory.databaseFile), sourceLocation: sourceLocation)
        var scanned = 0
        for file in files {
            let url = URL(fileURLWithPath: path).appendingPathComponent(file)
            guard let data = FileManager.default.contents(atPath: url.path), !data.isEmpty else { continue }
            scanned += data.count
            for key in KeyServerFixture.allContentKeys {
                let forms: [[UInt8]] = [
                    key, Array(Hex.encode(key).utf8), Array(Hex.encode(key).uppercased().utf8), Array(StrictBase64.encode(key).dropLast(2).utf8),
                ]
                for form in forms {
                    #expect(data.firstRange(of: Data(form)) == nil, "\(file) holds a content key in the clear", sourceLocation: sourceLocation)
                }
            }
        }
        #expect(scanned > 10_000, sourceLocation: sourceLocation)
    }
}
