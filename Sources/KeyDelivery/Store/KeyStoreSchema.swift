import GRDB

/// The key store's tables in the shared `stowage.sqlite`, all prefixed `key_`, with their own migrations (docs/design.md,
/// "State on disk": each module owns its tables and their migrations). GRDB's migrator records applied identifiers in the shared
/// `grdb_migrations` table and ignores other modules' identifiers, so each module can run its own migrator.
enum KeyStoreSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("key_v1") { db in
            // One row per lease ever stored; kept after the key material is erased, for the audit.
            try db.execute(
                sql: """
                    CREATE TABLE key_leases (
                        lease_id TEXT PRIMARY KEY NOT NULL,
                        asset_id TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        key_ids TEXT NOT NULL,
                        type TEXT NOT NULL,
                        issued_at INTEGER NOT NULL,
                        storage_expires_at INTEGER NOT NULL,
                        playback_duration INTEGER,
                        renewable_until INTEGER,
                        first_played_at INTEGER,
                        state TEXT NOT NULL,
                        persisted_at INTEGER NOT NULL,
                        renewed_at INTEGER,
                        renewal_count INTEGER NOT NULL DEFAULT 0,
                        ended_at INTEGER,
                        released_at INTEGER
                    );
                    CREATE INDEX key_leases_asset_id ON key_leases(asset_id);

                    -- The key material: the signed payload pair exactly as received (keys wrapped to the device).
                    -- Erasing deletes the row.
                    CREATE TABLE key_lease_payloads (
                        lease_id TEXT PRIMARY KEY NOT NULL REFERENCES key_leases(lease_id),
                        payload TEXT NOT NULL,
                        signature TEXT NOT NULL,
                        server_time INTEGER NOT NULL,
                        stored_at INTEGER NOT NULL
                    );

                    -- Keys of standard (identity) key URIs, sealed with AES-256-GCM under the local key-encryption key.
                    CREATE TABLE key_identity_keys (
                        uri TEXT PRIMARY KEY NOT NULL,
                        asset_id TEXT NOT NULL,
                        nonce BLOB NOT NULL,
                        ciphertext BLOB NOT NULL,
                        tag BLOB NOT NULL,
                        stored_at INTEGER NOT NULL,
                        expires_at INTEGER
                    );
                    CREATE INDEX key_identity_keys_asset_id ON key_identity_keys(asset_id);

                    -- Releases to send once online: one row per lease, until the server confirms.
                    CREATE TABLE key_release_queue (
                        lease_id TEXT PRIMARY KEY NOT NULL REFERENCES key_leases(lease_id),
                        deleted_at INTEGER NOT NULL,
                        queued_at INTEGER NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        last_error TEXT,
                        last_attempt_at INTEGER
                    );

                    CREATE TABLE key_time_anchor (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        high_water_mark INTEGER,
                        rollback_detected_at INTEGER
                    );

                    CREATE TABLE key_store_meta (
                        name TEXT PRIMARY KEY NOT NULL,
                        value BLOB NOT NULL
                    );

                    CREATE TABLE key_audit_journal (
                        sequence INTEGER PRIMARY KEY NOT NULL,
                        time INTEGER NOT NULL,
                        kind TEXT NOT NULL,
                        asset_id TEXT,
                        lease_id TEXT,
                        detail TEXT NOT NULL,
                        previous_hash TEXT NOT NULL,
                        hash TEXT NOT NULL
                    );
                    CREATE INDEX key_audit_journal_asset_id ON key_audit_journal(asset_id);

                    CREATE TABLE key_audit_head (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        sequence INTEGER NOT NULL,
                        hash TEXT NOT NULL
                    );
                    """
            )
        }
        migrator.registerMigration("key_v2") { db in
            // Lease integrity (docs/SECURITY.md): decisions come from the signed payload, verified with the pin of the
            // key server the lease came from; the state this device adds carries an HMAC under the state key.
            try db.execute(
                sql: """
                    ALTER TABLE key_leases ADD COLUMN key_server TEXT NOT NULL DEFAULT '';
                    ALTER TABLE key_leases ADD COLUMN state_mac BLOB;
                    ALTER TABLE key_leases ADD COLUMN first_play_reported_at INTEGER;
                    ALTER TABLE key_release_queue ADD COLUMN mac BLOB;
                    ALTER TABLE key_time_anchor ADD COLUMN tamper_detected_at INTEGER;
                    ALTER TABLE key_time_anchor ADD COLUMN mac BLOB;
                    """
            )
        }
        migrator.registerMigration("key_v3") { db in
            // Latches held by identity keys (docs/SECURITY.md, "Time"): the anchor's rollback and tamper counts when the
            // key was stored, bound into its sealing, so a rollback found after it holds the key until it is fetched anew.
            try db.execute(sql: "ALTER TABLE key_identity_keys ADD COLUMN latch_counts TEXT")
            // The anchor file as the store last wrote it (docs/SECURITY.md, "Restoring"): its generation and the exact
            // change time the kernel gave it, so a copy put back in its place is told from it.
            try db.execute(
                sql: """
                    ALTER TABLE key_time_anchor ADD COLUMN anchor_generation INTEGER;
                    ALTER TABLE key_time_anchor ADD COLUMN anchor_changed_at INTEGER;
                    """
            )
        }
        return migrator
    }
}
