import Foundation
import StowageCrypto
import Testing

@testable import KeyDelivery

/// No content key is ever written in the clear (docs/design.md, "State on disk"): scan every byte the store wrote.
struct KeyMaterialScanTests {
    /// The forms a key could be written in: raw bytes, hex (both cases) and base64.
    private func needles(_ key: [UInt8]) -> [[UInt8]] {
        [key, Array(Hex.encode(key).utf8), Array(Hex.encode(key).uppercased().utf8), Array(Data(key).base64EncodedString().utf8)]
    }

    private func occurrences(of needles: [[UInt8]], in directory: URL) throws -> [String] {
        try filesContaining(needles, under: directory)
    }

    @Test func noContentKeyBytesInTheDatabaseWALOrDataDirectory() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let server = try TestKeyServer()
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        var keys: [[UInt8]] = []
        for index in 0..<8 {
            let key = try SecureRandom.bytes(count: 16)
            keys.append(key)
            try store.storeIdentityKey(SecretBytes(key), uri: "https://keys.example/\(index)", assetId: "movie-1", at: 1_000_000)
        }
        let leaseKeys = try (0..<4).map { _ in try SecureRandom.bytes(count: 16) }
        keys += leaseKeys
        let payload = try server.payload(
            contentKeys: leaseKeys.enumerated().map { (keyId: String(format: "%032x", $0.offset), key: SecretBytes($0.element)) }
        )
        try store.persist(payload, from: server, at: 1_000_000)
        _ = try store.authorizePlayback(assetId: "movie-1", at: 1_000_001)
        // Still open (nothing checkpointed by hand): the WAL holds the recent pages.
        let files = try filesUnder(temporary.dataDirectory).map(\.lastPathComponent)
        #expect(files.contains(KeyStore.databaseFileName + "-wal"))
        #expect(try occurrences(of: keys.flatMap(needles), in: temporary.dataDirectory).isEmpty)
        // The scan does find bytes that are there: a decoy written in hex into the journal.
        let decoy = try SecureRandom.bytes(count: 16)
        try store.appendAuditEntry(.acquire, assetId: "decoy", leaseId: nil, detail: ["decoy": .string(Hex.encode(decoy))], at: 1_000_001)
        #expect(try !occurrences(of: needles(decoy), in: temporary.dataDirectory).isEmpty)
        // And the keys do open again: the scan did not pass because nothing was stored.
        #expect(try store.identityKey(uri: "https://keys.example/3", at: 1_000_002) == SecretBytes(keys[3]))
        // Nor do they show in what errors and the journal say.
        let texts = try store.auditEntries().map(\.detail) + [String(describing: SecretBytes(keys[0]))]
        for text in texts {
            for key in keys {
                #expect(!text.contains(Hex.encode(key)) && !text.contains(Data(key).base64EncodedString()))
            }
        }
    }

    @Test func erasedKeyMaterialLeavesNoTraceInTheFiles() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let server = try TestKeyServer()
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let payload = try server.payload(contentKeys: [(keyId: "000102030405060708090a0b0c0d0e0f", key: try SecretBytes.random(count: 16))])
        let sealedKey = try SecureRandom.bytes(count: 16)
        try store.persist(payload, from: server, at: 1_000_000)
        try store.storeIdentityKey(SecretBytes(sealedKey), uri: "https://keys.example/k", assetId: "movie-1", at: 1_000_000)
        let sealedCiphertext = try #require(try store.sealedIdentityKey(uri: "https://keys.example/k")).sealed.ciphertext
        // The wrapped key as stored inside the payload's base64 (itself base64 of JSON): look for the payload text.
        let payloadNeedle = Array(payload.signed.payload.utf8.prefix(200).suffix(64))
        #expect(try !occurrences(of: [payloadNeedle], in: temporary.dataDirectory).isEmpty)
        try store.returnAsset(assetId: "movie-1", at: 1_100_000)
        #expect(try occurrences(of: [payloadNeedle, sealedCiphertext], in: temporary.dataDirectory).isEmpty)
        #expect(try store.lease(id: "lease-1")?.state == .returned)
    }
}
