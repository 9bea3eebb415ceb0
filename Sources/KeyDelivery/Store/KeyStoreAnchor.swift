import Foundation
import StowageCrypto

/// The second copy of the state the client adds to its leases, kept outside the database in `key-store.anchor`,
/// sealed with AES-256-GCM under the key store's key-encryption key (docs/SECURITY.md).
///
/// The database row of the time high-water mark can be deleted, and an old row copied back from a backup still carries
/// a valid authentication code. The anchor holds the same facts a second time: the mark and its latches, and for every
/// lease the first play and the end. Readers merge the two copies the restrictive way (the larger mark, the earliest
/// first play, ended if either says so), so restoring one old copy gains nothing, and a copy that is missing while the
/// other exists is tampering (``KeyStore`` latches it until a renewal re-anchors time).
///
/// It is written inside the database's write transaction, before the commit, so two processes never interleave their
/// writes and the anchor is never behind a committed row (a failed commit can leave it ahead, which is the safe side).
struct KeyStoreAnchor: Codable, Hashable, Sendable {
    /// What the anchor remembers of one lease.
    struct Lease: Codable, Hashable, Sendable {
        var firstPlayedAt: Int64?
        var endedAt: Int64?
    }

    static let fileName = "key-store.anchor"
    static let maximumFileSize = 4 << 20
    private static let aad = Array("stowage-key-store-v1 anchor".utf8)

    var version = 1
    var highWaterMark: Int64?
    var rollbackDetectedAt: Int64?
    var tamperDetectedAt: Int64?
    var leases: [String: Lease] = [:]

    /// The mark and latches as a ``TimeHighWaterMark``.
    var mark: TimeHighWaterMark {
        TimeHighWaterMark(mark: highWaterMark, rollbackDetectedAt: rollbackDetectedAt, tamperDetectedAt: tamperDetectedAt)
    }

    mutating func setMark(_ mark: TimeHighWaterMark) {
        highWaterMark = mark.mark
        rollbackDetectedAt = mark.rollbackDetectedAt
        tamperDetectedAt = mark.tamperDetectedAt
    }

    /// What reading the file found.
    enum Reading: Sendable {
        case missing
        /// The file is there but does not open with this store's key (replaced, edited, or from another store).
        case unreadable
        case anchor(KeyStoreAnchor)
    }

    static func read(at path: String, sealer: LocalKeySealer) throws -> Reading {
        guard let bytes = try PrivateFile.readSmall(path, limit: maximumFileSize) else { return .missing }
        guard bytes.count >= 28 else { return .unreadable }
        let sealed = LocalKeySealer.Sealed(
            nonce: Array(bytes.prefix(12)),
            ciphertext: Array(bytes.dropFirst(12).dropLast(16)),
            tag: Array(bytes.suffix(16))
        )
        guard let plaintext = try? sealer.open(sealed, authenticating: aad),
            let anchor = try? JSONDecoder().decode(KeyStoreAnchor.self, from: plaintext.withUnsafeBytes { Data($0) })
        else { return .unreadable }
        return .anchor(anchor)
    }

    func write(to path: String, sealer: LocalKeySealer) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let sealed = try sealer.seal(SecretBytes(try encoder.encode(self)), authenticating: Self.aad)
        try PrivateFile.replaceAtomically(path, contents: sealed.nonce + sealed.ciphertext + sealed.tag)
    }
}
