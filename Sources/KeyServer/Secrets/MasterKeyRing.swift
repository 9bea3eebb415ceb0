import Foundation
import StowageCrypto
import Synchronization

/// Every master key a server may find content keys sealed under, so a rotation runs while the server serves.
///
/// A data directory holds `master-key` (the key new content keys are sealed under) and, while a rotation runs,
/// `master-key.next` (the key the rotation re-seals under) or `master-key.old` (the key it replaced, kept until every row
/// is re-sealed). The ring opens a record with whichever key its tag verifies under. When none does, it reads the key
/// files again if they changed since it last read them: an instance of a fleet that got `master-key.next` after it
/// started still opens the rows a rotation re-sealed. Keys once loaded are never dropped, so a sealed key a server
/// cached before a rotation still opens.
final class MasterKeyRing: Sendable {
    /// The files a directory's ring reads, and how to tell they changed.
    struct Source: Sendable {
        var directory: KeyServerDataDirectory

        /// The files' identities (inode, size, modification time), in a fixed order; nil entries for missing files.
        func signature() -> [String?] {
            KeyServerDataDirectory.masterKeyFiles.map { file in
                guard let attributes = try? FileManager.default.attributesOfItem(atPath: directory.path(of: file)) else { return nil }
                let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
                return "\(attributes[.systemFileNumber] ?? 0):\(attributes[.size] ?? 0):\(modified)"
            }
        }
    }

    private struct State {
        /// The current key's sealer first, then the others in the order first loaded.
        var sealers: [ContentKeySealer]
        var signature: [String?]?
    }

    private let state: Mutex<State>
    private let source: Source?

    /// A ring of fixed keys (a server given its master key in code): `keys[0]` is the current one.
    init(keys: [SecretBytes]) throws {
        state = Mutex(State(sealers: try keys.map { try ContentKeySealer(masterKey: $0) }, signature: nil))
        source = nil
    }

    /// The ring of a data directory: `master-key`, and `master-key.next` and `master-key.old` when present.
    ///
    /// - Throws: ``KeyServerSetupError`` when a file is missing (`master-key` only), too open or not 32 bytes.
    init(directory: KeyServerDataDirectory) throws {
        let source = Source(directory: directory)
        let signature = source.signature()
        state = Mutex(State(sealers: try directory.loadMasterKeys().map { try ContentKeySealer(masterKey: $0.key) }, signature: signature))
        self.source = source
    }

    /// The key new content keys are sealed under (`master-key`).
    var current: ContentKeySealer { state.withLock { $0.sealers[0] } }

    /// Opens a sealed content key with the first key it verifies under, reading the key files again once if none does
    /// and they changed.
    ///
    /// - Throws: `CryptoError.authenticationFailed` when no key opens it: the row was altered or moved, or was sealed
    ///   under a master key this server has never had; ``KeyServerSetupError`` when the key files changed but could not
    ///   be read (a key file too open or not 32 bytes, say): that, not the row, is what the operator must mend.
    func open(_ record: ContentKeyRecord) throws -> SecretBytes {
        let sealers = state.withLock { $0.sealers }
        // A tag that does not verify means "not this key", the one answer a sealer gives besides the key.
        for sealer in sealers {
            if let key = try? sealer.open(record) { return key }
        }
        // The files may change while they are read (a rotation renames one over another): read again while they do.
        var unreadable: (any Error)?
        for _ in 0..<3 {
            let added: [ContentKeySealer]
            do {
                guard let reloaded = try reloadIfChanged() else { break }
                added = reloaded
                unreadable = nil
            } catch {
                unreadable = error
                continue
            }
            for sealer in added {
                if let key = try? sealer.open(record) { return key }
            }
        }
        if let unreadable { throw unreadable }
        throw CryptoError.authenticationFailed
    }

    /// Reads the key files again when their identities changed, adding keys not yet held; returns the added keys' sealers.
    ///
    /// - Throws: what reading the files threw; the files are read again at the next call.
    private func reloadIfChanged() throws -> [ContentKeySealer]? {
        guard let source else { return nil }
        let signature = source.signature()
        guard state.withLock({ $0.signature != signature }) else { return nil }
        let sealers = try source.directory.loadMasterKeys().map { try ContentKeySealer(masterKey: $0.key) }
        return state.withLock { state in
            state.signature = signature
            let added = sealers.filter { !state.sealers.contains($0) }
            // The files' order (master-key first: after a rotation the new key seals), then every key held before, so
            // what was cached before still opens.
            state.sealers = sealers + state.sealers.filter { !sealers.contains($0) }
            return added
        }
    }
}
