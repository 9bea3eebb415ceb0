import Foundation
import GRDB
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
        let sealed = try sealer().seal(key, authenticating: Self.identityKeyAAD(uri: uri, assetId: assetId, expiresAt: expiresAt))
        try writeState(at: now) { db, _ in
            try db.execute(
                sql: """
                    INSERT INTO key_identity_keys (uri, asset_id, nonce, ciphertext, tag, stored_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(uri) DO UPDATE SET asset_id = excluded.asset_id, nonce = excluded.nonce,
                        ciphertext = excluded.ciphertext, tag = excluded.tag, stored_at = excluded.stored_at,
                        expires_at = excluded.expires_at
                    """,
                arguments: [uri, assetId, Data(sealed.nonce), Data(sealed.ciphertext), Data(sealed.tag), now, expiresAt]
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
    ///   ``LeaseError`` `clock_rollback_detected` for a key with a local lifetime while the clock is set back.
    public func identityKey(uri: String, at now: Int64) throws -> SecretBytes {
        let sealer = try sealer()
        guard let stored = try sealedIdentityKey(uri: uri) else { throw KeyStoreError.identityKeyNotFound(uri: uri) }
        if let expiresAt = stored.expiresAt {
            let mark = try timeHighWaterMark()
            guard !mark.isRolledBack(at: now) else {
                if mark.isTamperLatched {
                    throw LeaseError.leaseTampered(nil, detail: "this device's record of time was deleted or altered")
                }
                throw LeaseError.clockRollbackDetected(nil, now: now, mark: mark.mark ?? now, latched: mark.isRollbackLatched)
            }
            guard now < expiresAt else { throw KeyStoreError.identityKeyExpired(uri: uri, expiresAt: expiresAt) }
        }
        do {
            return try sealer.open(
                stored.sealed,
                authenticating: Self.identityKeyAAD(uri: uri, assetId: stored.assetId, expiresAt: stored.expiresAt)
            )
        } catch {
            // The key-encryption key matched the store's check value, so the row itself is at fault.
            throw KeyStoreError.identityKeyDamaged(uri: uri)
        }
    }

    /// The sealed row of `uri` as stored.
    func sealedIdentityKey(uri: String) throws -> (sealed: LocalKeySealer.Sealed, assetId: String, expiresAt: Int64?)? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM key_identity_keys WHERE uri = ?", arguments: [uri]).map { row in
                (
                    sealed: LocalKeySealer.Sealed(
                        nonce: [UInt8](try row.decode(forColumn: "nonce") as Data),
                        ciphertext: [UInt8](try row.decode(forColumn: "ciphertext") as Data),
                        tag: [UInt8](try row.decode(forColumn: "tag") as Data)
                    ),
                    assetId: try row.decode(forColumn: "asset_id"),
                    expiresAt: try row.decode(forColumn: "expires_at")
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

    /// Associated data of a sealed identity key: version, URI, asset and local expiry, length-prefixed.
    static func identityKeyAAD(uri: String, assetId: String, expiresAt: Int64?) -> [UInt8] {
        var aad = Array("stowage-identity-key-v1".utf8)
        for field in [uri, assetId, expiresAt.map { String($0) } ?? "none"] {
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
