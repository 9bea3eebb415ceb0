public import StowageCore

/// A key store operation that failed, with a stable snake_case code and a message that names the lease, asset or key
/// URI concerned and says what to do. Messages never contain key material.
public struct KeyStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    private typealias Code = ErrorCode

    private let _code: Code
    /// What happened and what to do.
    public let message: String

    private init(_ code: Code, _ message: String) {
        self._code = code
        self.message = message
    }

    /// The stable code, e.g. `sealing_key_mismatch`.
    public var code: ErrorCode { _code }

    public var description: String { "\(code): \(message)" }

    /// No machine ID could be read.
    public static func machineIDUnavailable(paths: [String]) -> Self {
        .init(
            .machineIDUnavailable,
            "No machine ID in \(paths.joined(separator: " or ")); sealed keys cannot be used. Run `systemd-machine-id-setup` "
                + "or create /etc/machine-id."
        )
    }

    /// The data directory's key-store secret is gone although keys were sealed with it (a copied directory, say).
    public static func sealingSecretMissing(path: String) -> Self {
        .init(
            .sealingSecretMissing,
            "The key store secret \(path) is missing, so the keys sealed in this data directory cannot be opened. A data "
                + "directory does not work when copied without it or to another machine; download the keys again."
        )
    }

    /// The key-encryption key derived here is not the one the keys were sealed with: another machine ID or secret.
    public static var sealingKeyMismatch: Self {
        .init(
            .sealingKeyMismatch,
            "The sealed keys in this data directory were sealed on another machine (or with another key store secret) and "
                + "do not open here. Download the keys again on this machine."
        )
    }

    /// No lease with this ID is stored.
    public static func unknownLease(_ leaseId: String) -> Self {
        .init(.unknownLease, "No lease \(leaseId) is stored on this device.")
    }

    /// A different payload for this lease is already stored; renew it instead.
    public static func leaseAlreadyStored(_ leaseId: String) -> Self {
        .init(.leaseAlreadyStored, "Lease \(leaseId) is already stored; a new payload for it must come through a renewal.")
    }

    /// A streaming lease is kept in memory only and never stored.
    public static func notPersistent(_ leaseId: String) -> Self {
        .init(.leaseNotPersistent, "Lease \(leaseId) is a streaming lease; only persistent leases are stored for offline playback.")
    }

    /// No sealed key is stored for this URI.
    public static func identityKeyNotFound(uri: String) -> Self {
        .init(.identityKeyNotFound, "No key is stored for \(uri); download the asset's keys again while online.")
    }

    /// The sealed key's local lifetime ended.
    public static func identityKeyExpired(uri: String, expiresAt: Int64) -> Self {
        .init(.identityKeyExpired, "The stored key for \(uri) expired at \(HumanTime.date(expiresAt)); download it again while online.")
    }

    /// The sealed key does not open although the key-encryption key is right: its row was altered.
    public static func identityKeyDamaged(uri: String) -> Self {
        .init(.identityKeyDamaged, "The stored key for \(uri) is damaged or was altered; download it again while online.")
    }

    /// A lease of `assetId` from `keyServer` while leases from `held` still hold the asset's keys.
    public static func leaseFromAnotherKeyServer(assetId: String, keyServer: String, held: String) -> Self {
        .init(
            .leaseFromAnotherKeyServer,
            "Asset \(assetId) holds keys from the key server \(held); a lease from \(keyServer) is not stored beside them. Return "
                + "the asset's keys first (`stowage keys return \(assetId)`), or ask \(held)."
        )
    }

    /// A sealed value (``DataSealer``) does not open although the key-encryption key is right.
    public static func sealedDataDamaged(context: String) -> Self {
        .init(
            .sealedDataDamaged,
            "Sealed data (\(context)) does not open: it was altered, damaged, or sealed on another machine. Give it again "
                + "(for a download: its token and headers)."
        )
    }

    /// A content key of another length than 16 or 32 bytes.
    public static func invalidKeyLength(uri: String, count: Int) -> Self {
        .init(.invalidKeyLength, "The key for \(uri) has \(count) bytes; content keys have 16 (or 32) bytes.")
    }

    /// The key server at `url` presents a signing key other than the one pinned for it.
    public static func serverKeyMismatch(url: String, pinned: String, presented: String) -> Self {
        .init(
            .serverKeyMismatch,
            "The key server \(url) presents signing key \(presented), but \(pinned) is pinned for it; its payloads are refused. "
                + "If the operator changed the key on purpose, delete the asset's downloads and run `stowage keys unpin \(url)` "
                + "before downloading again."
        )
    }

    /// The pinned server keys file cannot be read or a pin in it was altered.
    public static func pinnedKeyDamaged(path: String, detail: String) -> Self {
        .init(
            .pinnedKeyDamaged,
            "The pinned key server keys in \(path) cannot be trusted: \(detail). Delete the assets that use these key servers "
                + "and the file, then download them again."
        )
    }

    /// No signing key is pinned for the key server at `url`.
    public static func serverKeyNotPinned(url: String) -> Self {
        .init(
            .serverKeyNotPinned,
            "No signing key is pinned for the key server \(url), so its payloads cannot be checked. Download the asset again "
                + "to pin the server's key."
        )
    }

    /// A lease from the key server at `url` still holds keys, so its pin cannot go.
    public static func pinInUse(url: String, leaseId: String) -> Self {
        .init(
            .pinInUse,
            "Lease \(leaseId) from \(url) still holds keys and is checked with this pin. Delete or return its asset first "
                + "(`stowage delete ASSET` or `stowage keys return ASSET`)."
        )
    }

    /// SQLite failed.
    public static func databaseFailure(_ detail: String) -> Self {
        .init(.databaseFailure, "The key store database failed: \(detail). Check free disk space and the data directory's permissions.")
    }

    /// The key store's SQLite file at `path` is damaged (``StateDatabase/isDamaged(_:)``).
    public static func databaseDamaged(path: String, reason: String) -> Self {
        .init(.databaseDamaged, StateDatabase.damagedMessage(path: path, reason: reason))
    }

    /// `error` from the key store's SQLite file at `path`: damage, a lock another process held past the busy
    /// timeout, or any other failure.
    static func database(_ error: any Error, path: String) -> Self {
        if StateDatabase.isDamaged(error) { return .databaseDamaged(path: path, reason: StateDatabase.reason(error)) }
        if StateDatabase.isLocked(error) {
            return .init(
                .databaseFailure,
                "The key store database \(path) stayed locked by another process for \(StateDatabase.busyTimeoutSeconds) s "
                    + "(SQLite: \(StateDatabase.reason(error))); nothing was changed. Close what holds it (an sqlite3 shell, a "
                    + "stuck stowage process: `fuser \(path)` names it) and run the command again."
            )
        }
        return .databaseFailure("\(StateDatabase.reason(error)) (\(path))")
    }
}

extension KeyStoreError: StowageError {}
