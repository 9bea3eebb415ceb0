import StowageCrypto

/// The hash chain that makes the audit journal tamper-evident.
///
/// Each entry stores the SHA-256 of the entry before it (``AuditEntry/previousHash``, 64 zeros for entry 1) and its
/// own (``AuditEntry/hash``). An entry's hash is SHA-256 over this canonical encoding, all text UTF-8:
///
/// ```
/// "stowage-audit-v1\n"
/// then for each field, in this order: sequence, time, kind, assetId, leaseId, detail, previousHash
///     <decimal byte count of the field's text> ":" <the field's text> "\n"
/// ```
///
/// `sequence` and `time` are written in decimal (with `-` if negative), a missing `assetId` or `leaseId` as the empty
/// text (no valid asset or lease ID is empty), `detail` as stored (``AuditDetail``'s canonical JSON), `previousHash`
/// as 64 lowercase hex digits. The length prefixes make the encoding unambiguous whatever the fields contain.
///
/// The journal also keeps a head (the last sequence number and hash) so that deleting or editing the last entries
/// is seen too. The chain is not keyed: someone who rewrites every entry from the edit on, and the head, is not
/// detected; it catches edits, insertions, deletions and reordering by anyone who does not.
public enum AuditChain {
    /// The `previousHash` of entry 1.
    public static let genesisHash = String(repeating: "0", count: 64)

    /// The hash of an entry with these fields.
    public static func hash(
        sequence: Int64,
        time: Int64,
        kind: AuditEventKind,
        assetId: String?,
        leaseId: String?,
        detail: String,
        previousHash: String
    ) -> String {
        var hasher = SHA256Hasher()
        hasher.update(Array("stowage-audit-v1\n".utf8))
        for field in [String(sequence), String(time), kind.rawValue, assetId ?? "", leaseId ?? "", detail, previousHash] {
            let bytes = Array(field.utf8)
            hasher.update(Array("\(bytes.count):".utf8))
            hasher.update(bytes)
            hasher.update([0x0A])
        }
        return Hex.encode(hasher.finalize())
    }

    /// The hash `entry` should have, recomputed from its fields.
    public static func recomputedHash(of entry: AuditEntry) -> String {
        hash(
            sequence: entry.sequence,
            time: entry.time,
            kind: entry.kind,
            assetId: entry.assetId,
            leaseId: entry.leaseId,
            detail: entry.detail,
            previousHash: entry.previousHash
        )
    }

    /// Checks `entries` (in sequence order, as stored) against each other and against the journal's head.
    ///
    /// - Parameters:
    ///   - entries: every entry of the journal, ordered by sequence number.
    ///   - head: the last sequence number and hash the journal recorded, nil if it recorded none.
    public static func verify(_ entries: [AuditEntry], head: (sequence: Int64, hash: String)?) -> AuditVerification {
        var expected: Int64 = 1
        var previousHash = genesisHash
        for entry in entries {
            if entry.sequence != expected {
                if entry.sequence > expected {
                    return .broken(.missingEntry, at: expected, count: entries.count)
                }
                return .broken(.unexpectedEntry, at: entry.sequence, count: entries.count)
            }
            if recomputedHash(of: entry) != entry.hash {
                return .broken(.alteredEntry, at: entry.sequence, count: entries.count)
            }
            if entry.previousHash != previousHash {
                // The entry itself is intact, so the one before it was rewritten (hash and all) or this one was put in.
                return .broken(.brokenLink, at: max(1, entry.sequence - 1), count: entries.count)
            }
            previousHash = entry.hash
            expected += 1
        }
        let last = expected - 1
        switch head {
        case nil where last > 0:
            return .broken(.headMismatch, at: 1, count: entries.count)
        case let head? where head.sequence > last:
            return .broken(.missingEntry, at: last + 1, count: entries.count)
        case let head? where head.sequence < last:
            return .broken(.unexpectedEntry, at: head.sequence + 1, count: entries.count)
        case let head? where head.hash != previousHash && last > 0:
            return .broken(.alteredEntry, at: last, count: entries.count)
        default:
            return AuditVerification(entryCount: entries.count, firstBadSequence: nil, problem: nil)
        }
    }
}

/// The result of checking the audit journal.
public struct AuditVerification: Codable, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong at ``firstBadSequence``.
    public enum Problem: String, Codable, Sendable, Hashable {
        /// The entry's fields no longer give its hash: it was edited (or entries were swapped).
        case alteredEntry = "altered_entry"
        /// The entry does not chain to the entry before it: that one was rewritten, or this one inserted.
        case brokenLink = "broken_link"
        /// An entry with this sequence number is missing (deleted).
        case missingEntry = "missing_entry"
        /// An entry that the journal never wrote (a duplicate, a number out of order, past the head).
        case unexpectedEntry = "unexpected_entry"
        /// The journal's head record is missing although entries exist.
        case headMismatch = "head_mismatch"
    }

    /// How many entries were read.
    public let entryCount: Int
    /// The first sequence number found bad; nil when the journal is intact.
    public let firstBadSequence: Int64?
    /// What is wrong there; nil when intact.
    public let problem: Problem?

    /// Whether the whole journal checks out.
    public var isIntact: Bool { problem == nil }

    public var description: String {
        guard let problem, let firstBadSequence else { return "audit journal intact (\(entryCount) entries)" }
        return "audit journal damaged: \(problem.rawValue) at entry \(firstBadSequence) (of \(entryCount) read)"
    }

    static func broken(_ problem: Problem, at sequence: Int64, count: Int) -> AuditVerification {
        AuditVerification(entryCount: count, firstBadSequence: sequence, problem: problem)
    }
}
