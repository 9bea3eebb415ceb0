import Foundation
import GRDB
import StowageCore
import StowageCrypto
import Testing

@testable import KeyDelivery

/// The anchor file as Stowage wrote it, told from anything else put in its place (docs/SECURITY.md, "Restoring"): the
/// database records the anchor's generation and the exact change time the kernel gave it.
struct AnchorChangeTimeTests {
    let server: TestKeyServer

    init() throws {
        server = try TestKeyServer()
    }

    private func open(_ temporary: TemporaryDirectory, at now: Int64) throws -> KeyStore {
        try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: now))
    }

    private func anchorURL(_ temporary: TemporaryDirectory) -> URL {
        temporary.dataDirectory.appendingPathComponent(KeyStore.anchorFileName)
    }

    /// A store holding lease-1 for movie-1, stored at 1_000_000.
    private func store(_ temporary: TemporaryDirectory) throws -> KeyStore {
        let store = try open(temporary, at: 1_000_000)
        try store.persist(try server.payload(), from: server, at: 1_000_000)
        #expect(try store.evaluate(assetId: "movie-1", at: 1_000_010).isValid)
        return store
    }

    /// Nothing but reading: the anchor keeps its change time, and the lease plays on reopening.
    @Test func theAnchorStowageWroteIsTrusted() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        _ = try store(temporary)
        #expect(try open(temporary, at: 1_000_020).authorizePlayback(assetId: "movie-1", at: 1_000_020).isValid)
        #expect(try open(temporary, at: 1_000_030).evaluate(assetId: "movie-1", at: 1_000_030).isValid)
    }

    /// `touch` (any change of its times or mode) puts the anchor's change time past the recorded one: tampering, held on
    /// the lease until it is renewed.
    @Test(arguments: ["touch", "chmod", "copy"])
    func anAnchorTouchedOrReplacedIsTampering(_ how: String) throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        _ = try store(temporary)
        let anchor = anchorURL(temporary)
        switch how {
        case "touch": try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 0)], ofItemAtPath: anchor.path)
        case "chmod": try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: anchor.path)
        default:
            let copy = temporary.dataDirectory.appendingPathComponent("anchor-copy")
            try FileManager.default.copyItem(at: anchor, to: copy)
            try FileManager.default.removeItem(at: anchor)
            try FileManager.default.moveItem(at: copy, to: anchor)
        }
        let reopened = try open(temporary, at: 1_000_020)
        let refused = try reopened.evaluate(assetId: "movie-1", at: 1_000_020)
        #expect(refused.code == "lease_tampered", "\(refused.code?.rawValue ?? "valid")")
        #expect(try reopened.auditEntries().contains { $0.kind == .stateTampered && $0.detail.contains("put in place") })
        // The latch holds the lease across reopening, until its renewal.
        #expect(try open(temporary, at: 1_000_030).evaluate(assetId: "movie-1", at: 1_000_030).code == "lease_tampered")
        try reopened.renew(try server.payload(storageExpiresAt: 2_600_000, serverTime: 1_000_040), at: 1_000_040)
        #expect(try open(temporary, at: 1_000_050).authorizePlayback(assetId: "movie-1", at: 1_000_050).isValid)
    }

    /// A transaction that wrote the anchor and then failed to commit leaves the anchor one generation ahead of the
    /// record, just written: that is not tampering. An older anchor, or one two generations ahead, is.
    @Test func anAnchorAheadOfAFailedCommitIsNotTampering() throws {
        struct Failed: Error {}
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try store(temporary)
        let secrets = try store.secrets()
        let path = anchorURL(temporary).path
        func writeAnchorThenFail(at now: Int64) {
            _ = try? store.write { db in
                var state = try ClientState.load(db, secrets: secrets, anchorPath: path, now: now)
                state.recordEnd("a-lease-of-nothing", at: now)
                try state.save(db, at: now)
                throw Failed()
            }
        }
        func generations() throws -> (recorded: Int?, file: Int?) {
            let recorded = try store.read { db in try Int.fetchOne(db, sql: "SELECT anchor_generation FROM key_time_anchor WHERE id = 1") }
            guard case .anchor(let anchor, _) = try KeyStoreAnchor.read(at: path, sealer: secrets.sealer) else { return (recorded, nil) }
            return (recorded, anchor.generation)
        }
        let before = try generations()
        writeAnchorThenFail(at: 1_000_020)
        let after = try generations()
        #expect(after.recorded == before.recorded && after.file == (before.file ?? 0) + 1)
        #expect(try open(temporary, at: 1_000_030).evaluate(assetId: "movie-1", at: 1_000_030).isValid)
        // The record caught up with the anchor the failed commit left, so it stays trusted however long it is not written.
        let caughtUp = try generations()
        #expect(caughtUp.recorded == caughtUp.file && caughtUp.file == after.file)

        // Saved before two failed commits in a row, and put back: refused.
        let saved = try Data(contentsOf: anchorURL(temporary))
        writeAnchorThenFail(at: 1_000_040)
        writeAnchorThenFail(at: 1_000_050)
        try saved.write(to: anchorURL(temporary))
        #expect(try open(temporary, at: 1_000_060).evaluate(assetId: "movie-1", at: 1_000_060).code == "lease_tampered")
    }

    /// The kernel's clock and the C library's agree in a process nothing was preloaded into.
    @Test func theClocksAgreeWithoutAShim() {
        #expect(KernelTime.disagreement() == nil)
        #expect(abs(KernelTime.now - Int64(Date().timeIntervalSince1970)) <= 2)
        #expect(KernelTime.procNow.map { abs($0 - KernelTime.now) <= KernelTime.tolerance } == true)
    }
}
