import Foundation
import KeyDelivery
import StowageCore
import StowageCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What ``KeyServerDataDirectory/rotateMasterKey(batchSize:)`` did.
public struct MasterKeyRotationReport: Sendable, Hashable {
    /// Content keys in the store when the last pass ran.
    public var keys: Int
    /// Keys re-sealed under the new master key before it replaced the old one.
    public var resealed: Int
    /// Keys found still sealed under the old key by the final pass (added while the first passes ran), re-sealed then.
    public var resealedInFinalPass: Int
    /// The run only finished a rotation an earlier run had left after replacing `master-key` (no new key was made).
    public var finishedEarlierRotation: Bool
}

extension KeyServerDataDirectory {
    /// Creates `master-key.next`, the key a rotation will re-seal under, unless it exists; returns whether it created it.
    ///
    /// For a fleet, copy the file to the data directory of every instance before running ``rotateMasterKey(batchSize:)``:
    /// a running instance reads it when it first meets a content key that only it opens, so none needs a restart.
    ///
    /// - Throws: ``KeyServerSetupError`` when the directory is not a key server's or a file cannot be written.
    @discardableResult
    public func prepareMasterKeyRotation() throws -> Bool {
        _ = try loadMasterKey()
        let file = path(of: Self.nextMasterKeyFile)
        let key = try SecretBytes.random(count: 32)
        do {
            return try PrivateFile.createExclusively(file, contents: key)
        } catch {
            throw KeyServerSetupError.invalidKeyFile(file, error.message)
        }
    }

    /// Re-seals every content key under a new master key while servers keep serving, then makes it `master-key`.
    ///
    /// 1. `master-key.next` is created unless a `--prepare` step made it. With a PostgreSQL database it must exist
    ///    already (`rotation_not_prepared`): every instance needs it before any row is sealed under it.
    /// 2. Every row not sealed under the new key is opened with any key of the directory and sealed under the new one,
    ///    `batchSize` rows per transaction, each written only if the row is unchanged since it was read; passes repeat
    ///    until one changes every row it meant to (at most 5).
    /// 3. Under the sealing lock (``addAsset(id:keyID:key:policy:clock:)`` waits): `master-key` is kept as
    ///    `master-key.old`, `master-key.next` renamed over `master-key`, a final pass re-seals what was added meanwhile,
    ///    and `master-key.old` is deleted.
    ///
    /// Killed at any point, the directory holds every key a row may be sealed under, and running it again carries on.
    ///
    /// - Throws: ``KeyServerSetupError``: `rotation_not_prepared`, `rotation_in_progress` (another rotation on this
    ///   directory), `sealed_key_unreadable` (a row no key of the directory opens; nothing is renamed),
    ///   `rotation_incomplete`, and the store's errors.
    public func rotateMasterKey(batchSize: Int = 1_000) async throws -> MasterKeyRotationReport {
        precondition(batchSize > 0)
        return try await withDirectoryLock(
            path(of: "master-key.rotation.lock"),
            exclusive: true,
            waitingUpTo: .zero,
            busy: KeyServerSetupError(.rotationInProgress, "another master key rotation is running on \(path); wait for it to finish")
        ) {
            try await rotate(batchSize: batchSize)
        }
    }

    private func rotate(batchSize: Int) async throws -> MasterKeyRotationReport {
        let fileManager = FileManager.default
        if !fileManager.fileExists(atPath: path(of: Self.nextMasterKeyFile)) {
            if fileManager.fileExists(atPath: path(of: Self.oldMasterKeyFile)) {
                // An earlier run replaced master-key and stopped before its final pass.
                let keys = try MasterKeyRing(directory: self)
                let final = try await withSealingLock(exclusive: true) {
                    let final = try await withStore { store in try await Self.reseal(store, opening: keys, under: keys.current, batchSize: batchSize)
                    }
                    try removeOldMasterKey()
                    return final
                }
                return MasterKeyRotationReport(keys: final.keys, resealed: 0, resealedInFinalPass: final.resealed, finishedEarlierRotation: true)
            }
            if let database {
                throw KeyServerSetupError.rotationNotPrepared(path, database: PostgresKeyServerStore.redacted(database))
            }
            try prepareMasterKeyRotation()
        }
        let keys = try MasterKeyRing(directory: self)
        let target = try ContentKeySealer(masterKey: SecretFile.read(path(of: Self.nextMasterKeyFile), byteCount: 32, directory: path))
        let first = try await withStore { store in try await Self.reseal(store, opening: keys, under: target, batchSize: batchSize) }
        let final = try await withSealingLock(exclusive: true) {
            try replaceMasterKey()
            let final = try await withStore { store in try await Self.reseal(store, opening: keys, under: target, batchSize: batchSize) }
            try removeOldMasterKey()
            return final
        }
        return MasterKeyRotationReport(
            keys: final.keys,
            resealed: first.resealed,
            resealedInFinalPass: final.resealed,
            finishedEarlierRotation: false
        )
    }

    /// Runs `body` holding the directory's sealing lock: shared while a key is sealed and stored under `master-key`,
    /// exclusive while a rotation replaces that file and makes its final pass.
    func withSealingLock<T: Sendable>(exclusive: Bool, _ body: () async throws -> T) async throws -> T {
        try await withDirectoryLock(
            path(of: "master-key.lock"),
            exclusive: exclusive,
            waitingUpTo: .seconds(600),
            busy: KeyServerSetupError(
                .rotationInProgress,
                "a master key rotation on \(path) held its lock for 10 minutes; try again when `stowage keyserver rotate-master-key` has finished"
            ),
            body
        )
    }

    /// `master-key` kept as `master-key.old`, then `master-key.next` renamed over `master-key`: at every moment each key
    /// is in some file.
    private func replaceMasterKey() throws {
        let current = try loadMasterKey()
        let old = path(of: Self.oldMasterKeyFile)
        do {
            if !(try PrivateFile.createExclusively(old, contents: current)) {
                // Left by a run killed here; only the same key may stay.
                if try SecretFile.read(old, byteCount: 32, directory: path) != current {
                    unlink(old)
                    try PrivateFile.createExclusively(old, contents: current)
                }
            }
        } catch let error as PrivateFileError {
            throw KeyServerSetupError.invalidKeyFile(old, error.message)
        }
        guard rename(path(of: Self.nextMasterKeyFile), path(of: Self.masterKeyFile)) == 0 else {
            throw KeyServerSetupError.invalidKeyFile(
                path(of: Self.masterKeyFile),
                "renaming master-key.next over it failed: \(String(cString: strerror(errno)))"
            )
        }
        syncDirectory()
    }

    private func removeOldMasterKey() throws {
        let old = path(of: Self.oldMasterKeyFile)
        guard unlink(old) == 0 || errno == ENOENT else {
            throw KeyServerSetupError.invalidKeyFile(old, "could not delete it: \(String(cString: strerror(errno)))")
        }
        syncDirectory()
    }

    private func syncDirectory() {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }

    /// Passes over every row, re-sealing under `target` what it does not open, until a pass changes every row it meant
    /// to (a row changed between its read and its write is left to the next pass).
    private static func reseal(
        _ store: any KeyServerStore,
        opening keys: MasterKeyRing,
        under target: ContentKeySealer,
        batchSize: Int
    ) async throws -> (keys: Int, resealed: Int) {
        let passes = 5
        var resealed = 0
        for _ in 0..<passes {
            var position: ContentKeyPosition?
            var seen = 0
            var missed = 0
            while true {
                let batch = try await store.contentKeys(after: position, limit: batchSize)
                var changes: [SealedKeyChange] = []
                for record in batch where !target.opens(record) {
                    let key: SecretBytes
                    do {
                        key = try keys.open(record)
                    } catch {
                        throw KeyServerSetupError(
                            .sealedKeyUnreadable,
                            "the content key \(record.keyID) of asset \(record.assetID) opens under none of the master keys of the data directory (master-key, master-key.next, master-key.old): it was altered, or sealed under a master key the directory no longer has. Nothing was renamed; restore that key from a backup as master-key.old and run the rotation again"
                        )
                    }
                    changes.append(SealedKeyChange(old: record, new: try target.seal(key, assetID: record.assetID, keyID: record.keyID)))
                }
                let changed = try await store.replaceSealedKeys(changes)
                resealed += changed
                missed += changes.count - changed
                seen += batch.count
                guard batch.count == batchSize, let last = batch.last else { break }
                position = ContentKeyPosition(after: last)
            }
            if missed == 0 { return (seen, resealed) }
        }
        throw KeyServerSetupError(
            .rotationIncomplete,
            "content keys kept changing under the rotation through \(passes) passes; nothing was renamed and every key still opens. Run the rotation again when fewer keys are being added"
        )
    }
}

/// An `flock(2)` on a file of the data directory, held while `body` runs; the kernel drops it when the process exits,
/// killed or not.
///
/// - Parameters:
///   - limit: How long to keep trying (every 50 ms) while the lock is busy; `.zero` tries once.
///   - busy: Thrown when the lock stayed busy.
func withDirectoryLock<T: Sendable>(
    _ path: String,
    exclusive: Bool,
    waitingUpTo limit: Duration,
    busy: @autoclosure () -> KeyServerSetupError,
    _ body: () async throws -> T
) async throws -> T {
    let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else {
        throw KeyServerSetupError.invalidKeyFile(path, "could not open the lock file: \(String(cString: strerror(errno)))")
    }
    defer { close(descriptor) }  // drops the lock
    let deadline = ContinuousClock.now + limit
    while flock(descriptor, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 {
        guard ContinuousClock.now < deadline else { throw busy() }
        try await Task.sleep(for: .milliseconds(50))
    }
    return try await body()
}
