import Foundation
import StowageCore
import StowageCrypto

/// The second copy of the state the client adds to its leases, and the ledger of every lease this store holds, kept
/// outside the database in `key-store.anchor`, sealed with AES-256-GCM under the key store's key-encryption key
/// (docs/SECURITY.md).
///
/// The database row of the time high-water mark can be deleted, and an old row copied back from a backup still carries
/// a valid authentication code. The anchor holds the same facts a second time: the mark, and for every lease the first
/// play and the end. Readers merge the two copies the restrictive way (the larger mark, the earliest first play, ended
/// if either says so), so restoring one old copy gains nothing, and a copy that is missing while the other exists is
/// tampering (``ClientState`` latches it on every lease until each is renewed).
///
/// It is also the **ledger**: a lease row the anchor has no entry for was not stored by this store since the anchor
/// was made (rows put back from a copy after the anchor was deleted and made anew), and is refused until renewed
/// online. Each entry names its asset, so the anchor alone says which assets have had leases here.
///
/// **Latches.** A clock set back (a local time more than 300 s below the mark) or tampering with the time record adds
/// one to ``rollbackCount`` or ``tamperCount``; every lease stored or renewed before that keeps the count it was
/// stored with, so it is held until a renewal of that very lease, from the key server that issued it, brings its
/// count up to date. Nothing else clears it, and nothing lowers the mark.
///
/// **Change time.** Putting a file in the anchor's place by any means (copy, rename, link, restore from a backup) sets
/// the file's change time to the moment it happened, and no unprivileged call sets it back. Each write gives the anchor
/// a new ``generation``, and the database's time record keeps that generation and the exact change time (in
/// nanoseconds) the kernel gave the file: an anchor whose change time is not the recorded one was put there by
/// something other than Stowage (even with the record restored beside it), and is tampering. The one exception is an
/// anchor one generation ahead of the record, written by a transaction whose commit then failed, whose change time is
/// within ``restoreTolerance`` of when it says it was written.
///
/// It is written inside the database's write transaction, before the commit, so two processes never interleave their
/// writes and the anchor is never behind a committed row (a failed commit can leave it ahead, which is the safe side).
struct KeyStoreAnchor: Codable, Hashable, Sendable {
    /// What the anchor remembers of one lease.
    struct Lease: Codable, Hashable, Sendable {
        var firstPlayedAt: Int64?
        var endedAt: Int64?
        /// The lease's asset (nil in entries written before the ledger named it).
        var assetId: String?
        /// The anchor's ``KeyStoreAnchor/rollbackCount`` when the lease was last stored or renewed.
        var rollbackCount: Int?
        /// The anchor's ``KeyStoreAnchor/tamperCount`` when the lease was last stored or renewed.
        var tamperCount: Int?
        /// The key server the lease was stored from, which alone may renew it (nil in entries written before the ledger
        /// named it).
        var keyServer: String?
    }

    static let fileName = "key-store.anchor"
    static let maximumFileSize = 4 << 20
    /// How much later than ``writtenAt`` the file's change time may be: the write itself (a temporary file, a flush, a
    /// rename) and a clock stepped forward in the meantime.
    static let restoreTolerance: Int64 = 120
    private static let aad = Array("stowage-key-store-v1 anchor".utf8)

    var version = 2
    /// The device's time high-water mark: the largest local time observed. Only rises.
    var highWaterMark: Int64?
    /// When a clock set back was last found (local time).
    var rollbackDetectedAt: Int64?
    /// When tampering with the time record was last found (local time).
    var tamperDetectedAt: Int64?
    /// How many times a clock set back was found (once per episode).
    var rollbackCount = 0
    /// How many times tampering was found.
    var tamperCount = 0
    /// Set while the local clock reads below the mark, so one episode counts once.
    var rolledBackSince: Int64?
    /// When this anchor (and its ledger) was made, local time.
    var createdAt: Int64?
    /// When Stowage last wrote the file, from the kernel's clock (not the caller's, which tests move).
    var writtenAt: Int64?
    /// How many times the file was written.
    var generation = 0
    var leases: [String: Lease] = [:]

    init(createdAt: Int64? = nil) {
        self.createdAt = createdAt
    }

    private enum CodingKeys: String, CodingKey {
        case version, highWaterMark, rollbackDetectedAt, tamperDetectedAt, rollbackCount, tamperCount, rolledBackSince, createdAt
        case writtenAt, generation, leases
    }

    /// Version 1 anchors have no counts, no ledger fields and no write time; their latches become counts (a latch set
    /// there holds every lease, as it did).
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decodeIfPresent(Int.self, forKey: .version) ?? 1
        highWaterMark = try container.decodeIfPresent(Int64.self, forKey: .highWaterMark)
        rollbackDetectedAt = try container.decodeIfPresent(Int64.self, forKey: .rollbackDetectedAt)
        tamperDetectedAt = try container.decodeIfPresent(Int64.self, forKey: .tamperDetectedAt)
        rollbackCount = try container.decodeIfPresent(Int.self, forKey: .rollbackCount) ?? (rollbackDetectedAt == nil ? 0 : 1)
        tamperCount = try container.decodeIfPresent(Int.self, forKey: .tamperCount) ?? (tamperDetectedAt == nil ? 0 : 1)
        rolledBackSince = try container.decodeIfPresent(Int64.self, forKey: .rolledBackSince)
        createdAt = try container.decodeIfPresent(Int64.self, forKey: .createdAt)
        writtenAt = try container.decodeIfPresent(Int64.self, forKey: .writtenAt)
        generation = try container.decodeIfPresent(Int.self, forKey: .generation) ?? 0
        leases = try container.decodeIfPresent([String: Lease].self, forKey: .leases) ?? [:]
    }

    /// The mark and the latest detections as a ``TimeHighWaterMark``.
    var mark: TimeHighWaterMark {
        TimeHighWaterMark(mark: highWaterMark, rollbackDetectedAt: rollbackDetectedAt, tamperDetectedAt: tamperDetectedAt)
    }

    /// Whether the lease's latches are set: a rollback or tampering found since it was last stored or renewed.
    func latches(_ leaseId: String) -> (rollback: Bool, tamper: Bool) {
        let entry = leases[leaseId]
        return ((entry?.rollbackCount ?? 0) < rollbackCount, (entry?.tamperCount ?? 0) < tamperCount)
    }

    /// What reading the file found.
    enum Reading: Sendable {
        case missing
        /// The file is there but does not open with this store's key (replaced, edited, or from another store).
        case unreadable
        /// The anchor, and when the file was put in place (its change time in nanoseconds, from the kernel), when known.
        case anchor(KeyStoreAnchor, changedAt: Int64?)
    }

    static func read(at path: String, sealer: LocalKeySealer) throws -> Reading {
        guard let (bytes, changedAt) = try PrivateFile.readSmall(path, limit: maximumFileSize, inspecting: KernelTime.changeTimeNanoseconds(of:))
        else { return .missing }
        guard let sealed = LocalKeySealer.Sealed(combined: bytes) else { return .unreadable }
        guard let plaintext = try? sealer.open(sealed, authenticating: aad),
            let anchor = try? JSONDecoder().decode(KeyStoreAnchor.self, from: plaintext.withUnsafeBytes { Data($0) })
        else { return .unreadable }
        return .anchor(anchor, changedAt: changedAt)
    }

    /// Why the file at `changedAt` (nanoseconds) is not the anchor Stowage last wrote, given what the database recorded
    /// of that write (`generation`, `changedAt`); nil when it is. Without a record (a store from before it was kept,
    /// or one whose record was deleted, which is tampering of its own), the file's change time must be within
    /// ``restoreTolerance`` of ``writtenAt``.
    func replacement(changedAt: Int64?, recorded: (generation: Int, changedAt: Int64)?) -> String? {
        // A change time that cannot be read (a statx made to fail, under strace or a seccomp filter) proves nothing.
        guard let changedAt else {
            return "the change time of \(Self.fileName) could not be read (the statx system call failed), so a copy put back "
                + "cannot be told from the file Stowage wrote"
        }
        let changedSeconds = changedAt / 1_000_000_000
        let fresh = writtenAt.map { changedSeconds <= $0 + Self.restoreTolerance } ?? true
        let when = "\(Self.fileName) was put in place at \(HumanTime.date(changedSeconds))"
        guard let recorded else {
            return fresh ? nil : "\(when), after Stowage last wrote it (\(HumanTime.date(writtenAt ?? 0))): it was copied back or restored"
        }
        if recorded.changedAt == changedAt && recorded.generation == generation { return nil }
        // Written by a transaction that then failed to commit: one generation ahead, and just written.
        if generation == recorded.generation + 1 && fresh { return nil }
        return "\(when), not when Stowage wrote it: it was replaced, copied back or restored"
    }

    /// Seals and writes the anchor as its next generation, stamping ``writtenAt`` with the kernel's time; returns the
    /// change time (nanoseconds) the kernel gave the file, for the database to record.
    @discardableResult
    mutating func write(to path: String, sealer: LocalKeySealer) throws -> Int64? {
        writtenAt = KernelTime.now
        generation += 1
        version = 2
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let sealed = try sealer.seal(SecretBytes(try encoder.encode(self)), authenticating: Self.aad)
        try PrivateFile.replaceAtomically(path, contents: sealed.combined)
        return KernelTime.changeTimeNanoseconds(atPath: path)
    }
}
