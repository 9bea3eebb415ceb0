import Foundation
import StowageCore
import StowageCrypto
import Testing

@testable import KeyDelivery

struct IdentityKeySealingTests {
    let key = SecretBytes(Hex.decode("00112233445566778899aabbccddeeff")!)

    @Test func aSealedKeyOpensWithTheRightMachineID() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.storeIdentityKey(key, uri: "https://keys.example/k1", assetId: "movie-1", at: 1_000)
        #expect(try store.identityKey(uri: "https://keys.example/k1", at: 1_000) == key)
        // Default local lifetime: no expiry.
        #expect(try store.identityKey(uri: "https://keys.example/k1", at: .max) == key)
        let reopened = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 2_000))
        #expect(try reopened.identityKey(uri: "https://keys.example/k1", at: 2_000) == key)
        #expect(try reopened.identityKeyURIs(assetId: "movie-1") == ["https://keys.example/k1"])
        let secret = temporary.dataDirectory.appendingPathComponent(KeyStore.secretFileName)
        #expect(try mode(of: secret) == 0o600)
        #expect(try Data(contentsOf: secret).count == 32)
    }

    @Test func anotherMachineIDDoesNotOpenIt() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
            .storeIdentityKey(key, uri: "https://keys.example/k1", assetId: "movie-1", at: 1_000)
        let elsewhere = try KeyStore(
            dataDirectory: temporary.dataDirectory,
            machineID: MachineID("ffffffffffffffffffffffffffffffff"),
            clock: TestClock(now: 0)
        )
        let error = #expect(throws: KeyStoreError.self) { try elsewhere.identityKey(uri: "https://keys.example/k1", at: 1_000) }
        #expect(error?.code == "sealing_key_mismatch")
        #expect(throws: KeyStoreError.self) { try elsewhere.storeIdentityKey(key, uri: "https://keys.example/k2", assetId: "m", at: 1_000) }
        // Nor do leases: their state is authenticated with a key derived from the same secret and machine ID.
        let leases = #expect(throws: KeyStoreError.self) { try elsewhere.leases() }
        #expect(leases?.code == "sealing_key_mismatch")
    }

    @Test func aDirectoryCopiedWithoutItsSecretDoesNotOpen() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
            .storeIdentityKey(key, uri: "https://keys.example/k1", assetId: "movie-1", at: 1_000)
        let copy = temporary.url.appendingPathComponent("copy", isDirectory: true)
        try FileManager.default.copyItem(at: temporary.dataDirectory, to: copy)
        try FileManager.default.removeItem(at: copy.appendingPathComponent(KeyStore.secretFileName))
        let copied = try KeyStore(dataDirectory: copy, machineID: testMachineID, clock: TestClock(now: 0))
        let error = #expect(throws: KeyStoreError.self) { try copied.identityKey(uri: "https://keys.example/k1", at: 1_000) }
        #expect(error?.code == "sealing_secret_missing")
        // No new secret is made behind the user's back.
        #expect(!FileManager.default.fileExists(atPath: copy.appendingPathComponent(KeyStore.secretFileName).path))
        // With the secret but on another machine: still no.
        let fullCopy = temporary.url.appendingPathComponent("full-copy", isDirectory: true)
        try FileManager.default.copyItem(at: temporary.dataDirectory, to: fullCopy)
        let otherMachine = try KeyStore(dataDirectory: fullCopy, machineID: MachineID("another-machine"), clock: TestClock(now: 0))
        #expect(throws: KeyStoreError.self) { try otherMachine.identityKey(uri: "https://keys.example/k1", at: 1_000) }
    }

    @Test func aSecretFileOpenToOthersIsRefused() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        _ = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let secret = temporary.dataDirectory.appendingPathComponent(KeyStore.secretFileName)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: secret.path)
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let error = #expect(throws: PrivateFileError.self) { try store.storeIdentityKey(key, uri: "u", assetId: "a", at: 1) }
        #expect(error?.code == "insecure_permissions")
    }

    @Test func localLifetimeIsEnforced() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.storeIdentityKey(key, uri: "https://keys.example/k1", assetId: "movie-1", expiresAt: 5_000, at: 1_000)
        #expect(try store.identityKey(uri: "https://keys.example/k1", at: 4_999) == key)
        let error = #expect(throws: KeyStoreError.self) { try store.identityKey(uri: "https://keys.example/k1", at: 5_000) }
        #expect(error?.code == "identity_key_expired")
        // A clock set back cannot stretch a local lifetime.
        try store.observe(localTime: 6_000)
        try store.observe(localTime: 4_000)
        #expect(throws: LeaseError.self) { try store.identityKey(uri: "https://keys.example/k1", at: 4_000) }
        #expect(throws: KeyStoreError.self) { try store.identityKey(uri: "https://keys.example/none", at: 4_000) }
    }

    /// A key with a local lifetime counts the latches of the anchor it was stored under: deleting the anchor so that a
    /// new one starts its counts again does not free a key stored after earlier tampering.
    @Test func aKeyIsHeldWhenTheAnchorItWasStoredUnderIsMadeAnew() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 1_000))
        let anchor = temporary.dataDirectory.appendingPathComponent(KeyStore.anchorFileName)
        try store.storeIdentityKey(key, uri: "https://keys.example/k1", assetId: "movie-1", expiresAt: 5_000, at: 1_000)
        try FileManager.default.removeItem(at: anchor)
        // Stored after the tampering was found: not held by it.
        try store.storeIdentityKey(key, uri: "https://keys.example/k2", assetId: "movie-1", expiresAt: 5_000, at: 1_100)
        #expect(try store.identityKey(uri: "https://keys.example/k2", at: 1_200) == key)
        let first = #expect(throws: LeaseError.self) { try store.identityKey(uri: "https://keys.example/k1", at: 1_200) }
        #expect(first?.code == "lease_tampered")

        try FileManager.default.removeItem(at: anchor)
        for step in ["read", "after a write"] {
            if step != "read" { try store.observe(localTime: 1_300) }
            let held = #expect(throws: LeaseError.self, "\(step)") { try store.identityKey(uri: "https://keys.example/k2", at: 1_300) }
            #expect(held?.code == "lease_tampered")
            #expect(held?.message.contains("stowage keys fetch movie-1") == true)
        }
    }

    /// With identity keys but no lease, deleting both copies of the time record is still tampering.
    @Test func bothTimeRecordsDeletedUnderAnIdentityKeyIsTampering() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 1_000))
        try store.storeIdentityKey(key, uri: "https://keys.example/k1", assetId: "movie-1", expiresAt: 5_000, at: 1_000)
        try store.executeUncheckedForTesting("DELETE FROM key_time_anchor")
        try FileManager.default.removeItem(at: temporary.dataDirectory.appendingPathComponent(KeyStore.anchorFileName))
        let held = #expect(throws: LeaseError.self) { try store.identityKey(uri: "https://keys.example/k1", at: 1_100) }
        #expect(held?.code == "lease_tampered")
    }

    @Test func anAlteredRowDoesNotOpen() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        try store.storeIdentityKey(key, uri: "https://keys.example/k1", assetId: "movie-1", expiresAt: 5_000, at: 1_000)
        // Stretching the local lifetime in the database breaks the seal (the expiry is associated data).
        try store.executeUncheckedForTesting("UPDATE key_identity_keys SET expires_at = 9000")
        let error = #expect(throws: KeyStoreError.self) { try store.identityKey(uri: "https://keys.example/k1", at: 6_000) }
        #expect(error?.code == "identity_key_damaged")
    }

    @Test func onlyContentKeyLengthsAreAccepted() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let error = #expect(throws: KeyStoreError.self) { try store.storeIdentityKey(SecretBytes([1, 2, 3]), uri: "u", assetId: "a", at: 1) }
        #expect(error?.code == "invalid_key_length")
    }

    /// Every machine Stowage runs on has a machine ID (systemd and D-Bus write one); a machine without one fails here
    /// rather than passing unseen, since sealed keys cannot be used there.
    @Test func theSystemMachineIDIsRead() throws {
        try #require(
            MachineID.systemPaths.contains(where: { FileManager.default.fileExists(atPath: $0) }),
            "no machine ID in \(MachineID.systemPaths): run systemd-machine-id-setup"
        )
        let id = try MachineID.system()
        #expect(!id.value.isEmpty && !id.value.contains("\n"))
    }

    @Test func theFirstFileHoldingAnIDGivesItAndNoneIsAnError() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let empty = temporary.url.appendingPathComponent("empty")
        let file = temporary.url.appendingPathComponent("machine-id")
        try Data().write(to: empty)
        try Data("  0123456789abcdef0123456789abcdef\n".utf8).write(to: file)
        #expect(try MachineID.system(paths: ["/nonexistent/machine-id", empty.path, file.path]).value == "0123456789abcdef0123456789abcdef")
        let error = #expect(throws: KeyStoreError.self) { try MachineID.system(paths: ["/nonexistent/machine-id", empty.path]) }
        #expect(error?.code == "machine_id_unavailable")
        #expect(error?.message.contains("/nonexistent/machine-id") == true)
    }

    @Test func aKeyNeverStoredIsNotFound() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let store = try KeyStore(dataDirectory: temporary.dataDirectory, machineID: testMachineID, clock: TestClock(now: 0))
        let error = #expect(throws: KeyStoreError.self) { try store.identityKey(uri: "https://keys.example/none", at: 1_000) }
        #expect(error?.code == "identity_key_not_found")
    }
}
