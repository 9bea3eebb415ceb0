import Foundation
import GRDB
import StowageCore
public import StowageCrypto

extension KeyStore {
    /// Seals and stores the content key of a standard key URI (`KEYFORMAT="identity"`, fetched with a GET), replacing
    /// any key stored for that URI.
    ///
    /// The key is sealed with AES-256-GCM under the local key-encryption key; the URI, the asset ID and the local
    /// expiry are bound to it as associated data, so a row moved to another URI or given a later expiry no longer
    /// opens.
    ///
    /// - Parameters:
    ///   - key: the 16-byte (or 32-byte) content key.
    ///   - uri: the key URI as the playlist names it, resolved to absolute.
    ///   - assetId: the asset the key belongs to.
    ///   - expiresAt: end of the key's local lifetime; nil (the default): no expiry.
    /// - Throws: ``KeyStoreError`` (`sealing_key_mismatch`, `sealing_secret_missing`, `machine_id_unavailable`,
    ///   `invalid_key_length`), ``PrivateFileError`` for an unsafe secret file.
    public func storeIdentityKey(_ key: SecretBytes, uri: String, assetId: String, expiresAt: Int64? = nil, at now: Int64) throws {
        guard key.count == 16 || key.count == 32 else { throw KeyStoreError.invalidKeyLength(uri: uri, count: key.count) }
        let sealer = try sealer()
        try writeState(at: now) { db, state in
            // The latch counts of now, after this transaction's own look at the clock, and the anchor they count in: a
            // rollback or tampering found later, or an anchor made anew, holds the key (``identityKey(uri:at:)``) until
            // it is fetched again.
            let counts = Latches(state.anchor).text
            let sealed = try sealer.seal(key, authenticating: Self.identityKeyAAD(uri: uri, assetId: assetId, expiresAt: expiresAt, counts: counts))
            try db.execute(
                sql: """
                    INSERT INTO key_identity_keys (uri, asset_id, nonce, ciphertext, tag, stored_at, expires_at, latch_counts)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(uri) DO UPDATE SET asset_id = excluded.asset_id, nonce = excluded.nonce,
                        ciphertext = excluded.ciphertext, tag = excluded.tag, stored_at = excluded.stored_at,
                        expires_at = excluded.expires_at, latch_counts = excluded.latch_counts
                    """,
                arguments: [uri, assetId, Data(sealed.nonce), Data(sealed.ciphertext), Data(sealed.tag), now, expiresAt, counts]
            )
            var detail: AuditDetail = ["uriSHA256": .string(Self.uriDigest(uri))]
            if let expiresAt { detail.members["expiresAt"] = .integer(expiresAt) }
            try AuditJournal.append(db, kind: .identityKeyStored, assetId: assetId, leaseId: nil, detail: detail, at: now)
        }
    }

    /// Opens the sealed key stored for `uri`.
    ///
    /// - Throws: ``KeyStoreError`` `identity_key_not_found`, `identity_key_expired` (local lifetime over),
    ///   `identity_key_damaged` (the row was altered), or the sealing errors of ``storeIdentityKey(_:uri:assetId:expiresAt:at:)``;
    ///   ``LeaseError`` `clock_rollback_detected` (or `lease_tampered`) for a key with a local lifetime while the clock
    ///   is set back, or when a rollback (or tampering with the time record) was found since the key was stored: it is
    ///   then held until fetched again.
    public func identityKey(uri: String, at now: Int64) throws -> SecretBytes {
        let sealer = try sealer()
        guard let stored = try sealedIdentityKey(uri: uri) else { throw KeyStoreError.identityKeyNotFound(uri: uri) }
        if let expiresAt = stored.expiresAt {
            // A key with a local lifetime is judged against the device's mark, which only rises, and held by a rollback
            // or tampering found since it was stored (or now), or by an anchor other than the one it was stored under.
            let secrets = try secrets()
            let path = anchorPath
            let state = try read { db in try ClientState.load(db, secrets: secrets, anchorPath: path, now: nil) }
            let recorded = Latches(text: stored.latchCounts)
            if recorded.tamperCount < state.anchor.tamperCount {
                throw LeaseError.identityKeyHeld(
                    .leaseTampered,
                    assetId: stored.assetId,
                    detail: "this device's record of time was deleted, altered or restored since the key was stored"
                )
            }
            if let anchor = recorded.anchorCreatedAt, anchor != Latches(state.anchor).anchorCreatedAt {
                throw LeaseError.identityKeyHeld(
                    .leaseTampered,
                    assetId: stored.assetId,
                    detail: "this device's record of time was made anew since the key was stored (\(KeyStoreAnchor.fileName) was deleted)"
                )
            }
            if let mark = state.mark.mark, now < mark.addingClamped(-KeyProtocol.clockLeeway) || recorded.rollbackCount < state.anchor.rollbackCount {
                throw LeaseError.identityKeyHeld(
                    .clockRollbackDetected,
                    assetId: stored.assetId,
                    detail: "the system clock was set back (this device has seen \(HumanTime.date(mark)))"
                )
            }
            guard now < expiresAt else { throw KeyStoreError.identityKeyExpired(uri: uri, expiresAt: expiresAt) }
        }
        do {
            return try sealer.open(
                stored.sealed,
                authenticating: Self.identityKeyAAD(uri: uri, assetId: stored.assetId, expiresAt: stored.expiresAt, counts: stored.latchCounts)
            )
        } catch {
            // The key-encryption key matched the store's check value, so the row itself is at fault.
            throw KeyStoreError.identityKeyDamaged(uri: uri)
        }
    }

    /// The anchor's rollback and tamper counts a key was stored with, and the anchor's creation time, which tells one
    /// anchor from one made anew: `"R,T,C"` in `latch_counts`, bound to the sealed key. Keys stored before the anchor
    /// was recorded have `"R,T"`, and those from before the counts were kept nothing (0 and 0).
    struct Latches {
        var rollbackCount = 0
        var tamperCount = 0
        /// nil: not recorded (an older key).
        var anchorCreatedAt: String?

        init(_ anchor: KeyStoreAnchor) {
            rollbackCount = anchor.rollbackCount
            tamperCount = anchor.tamperCount
            anchorCreatedAt = anchor.createdAt.map { String($0) } ?? "none"
        }

        init(text: String?) {
            let parts = (text ?? "").split(separator: ",").map(String.init)
            guard parts.count >= 2, let rollbacks = Int(parts[0]), let tamperings = Int(parts[1]) else { return }
            rollbackCount = rollbacks
            tamperCount = tamperings
            anchorCreatedAt = parts.count > 2 ? parts[2] : nil
        }

        var text: String { "\(rollbackCount),\(tamperCount),\(anchorCreatedAt ?? "none")" }
    }

    /// The sealed row of `uri` as stored.
    func sealedIdentityKey(uri: String) throws -> (sealed: LocalKeySealer.Sealed, assetId: String, expiresAt: Int64?, latchCounts: String?)? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM key_identity_keys WHERE uri = ?", arguments: [uri]).map { row in
                (
                    sealed: LocalKeySealer.Sealed(
                        nonce: [UInt8](try row.decode(forColumn: "nonce") as Data),
                        ciphertext: [UInt8](try row.decode(forColumn: "ciphertext") as Data),
                        tag: [UInt8](try row.decode(forColumn: "tag") as Data)
                    ),
                    assetId: try row.decode(forColumn: "asset_id"),
                    expiresAt: try row.decode(forColumn: "expires_at"),
                    latchCounts: try row.decode(forColumn: "latch_counts")
                )
            }
        }
    }

    /// The key URIs with a sealed key for `assetId`.
    public func identityKeyURIs(assetId: String) throws -> [String] {
        try read { db in
            try String.fetchAll(db, sql: "SELECT uri FROM key_identity_keys WHERE asset_id = ? ORDER BY uri", arguments: [assetId])
        }
    }

    /// Erases the sealed keys of `assetId`.
    ///
    /// - Returns: how many were erased.
    @discardableResult
    public func eraseIdentityKeys(assetId: String, at now: Int64) throws -> Int {
        let count = try write { db in try Self.eraseIdentityKeys(assetId: assetId, reason: "erased", db, at: now) }
        if count > 0 { checkpoint() }
        return count
    }

    @discardableResult
    static func eraseIdentityKeys(assetId: String, reason: String, _ db: Database, at now: Int64) throws -> Int {
        let uris = try String.fetchAll(db, sql: "SELECT uri FROM key_identity_keys WHERE asset_id = ? ORDER BY uri", arguments: [assetId])
        for uri in uris {
            try eraseIdentityKey(uri: uri, reason: reason, db, at: now)
        }
        return uris.count
    }

    static func eraseIdentityKey(uri: String, reason: String, _ db: Database, at now: Int64) throws {
        let assetId = try String.fetchOne(db, sql: "SELECT asset_id FROM key_identity_keys WHERE uri = ?", arguments: [uri])
        try db.execute(sql: "DELETE FROM key_identity_keys WHERE uri = ?", arguments: [uri])
        try AuditJournal.append(
            db,
            kind: .identityKeyErased,
            assetId: assetId,
            leaseId: nil,
            detail: ["uriSHA256": .string(uriDigest(uri)), "reason": .string(reason)],
            at: now
        )
    }

    /// Associated data of a sealed identity key: version, URI, asset, local expiry and (from version 2) the latch
    /// counts it was stored with, length-prefixed.
    static func identityKeyAAD(uri: String, assetId: String, expiresAt: Int64?, counts: String?) -> [UInt8] {
        var aad = Array((counts == nil ? "stowage-identity-key-v1" : "stowage-identity-key-v2").utf8)
        for field in [uri, assetId, expiresAt.map { String($0) } ?? "none"] + [counts].compactMap({ $0 }) {
            let bytes = Array(field.utf8)
            aad += Array("\n\(bytes.count):".utf8) + bytes
        }
        return aad
    }

    /// Key URIs may carry access tokens, so the journal names them by digest.
    static func uriDigest(_ uri: String) -> String {
        Hex.encode(SHA256Hasher.hash(Array(uri.utf8)))
    }
}
