import KeyDelivery
import Synchronization

/// A ``KeyServerStore`` in front of another that keeps in memory what a request reads on every call: device bindings
/// and sealed content keys, which never change once stored (a device's first-seen keys win; `addAsset` refuses to
/// replace a key), and asset records for a few seconds, so a policy changed by `stowage keyserver add-asset` in another
/// process is seen soon. Writes and lease reads go straight to the store.
final class CachingKeyServerStore: KeyServerStore {
    private struct Cache {
        var devices: [String: DeviceRecord] = [:]
        var assets: [String: (record: AssetRecord, fetchedAt: Double)] = [:]
        /// Keyed by asset ID and key ID.
        var keys: [KeyPath: ContentKeyRecord] = [:]
    }

    private struct KeyPath: Hashable {
        var assetID: String
        var keyID: String
    }

    private let base: any KeyServerStore
    private let clock: KeyServerClock
    private let cache = Mutex(Cache())
    /// Seconds an asset record is trusted.
    private let assetLifetime: Double = 5
    /// Past this many entries a table is emptied rather than grown: a bound on memory, not an eviction policy.
    private let capacity = 100_000

    init(_ base: any KeyServerStore, clock: KeyServerClock) {
        self.base = base
        self.clock = clock
    }

    func saveAsset(_ asset: AssetRecord, keys: [ContentKeyRecord]) async throws {
        try await base.saveAsset(asset, keys: keys)
        cache.withLock { $0.assets[asset.id] = nil }
    }

    func asset(id: String) async throws -> AssetRecord? {
        let now = clock.preciseNow
        if let cached = cache.withLock({ $0.assets[id] }), now - cached.fetchedAt >= 0, now - cached.fetchedAt < assetLifetime {
            return cached.record
        }
        guard let record = try await base.asset(id: id) else { return nil }
        cache.withLock { cache in
            if cache.assets.count >= capacity { cache.assets.removeAll() }
            cache.assets[id] = (record, now)
        }
        return record
    }

    func contentKeys(assetID: String, keyIDs: [String]) async throws -> [ContentKeyRecord] {
        var found: [ContentKeyRecord] = []
        var missing: [String] = []
        cache.withLock { cache in
            for keyID in keyIDs {
                if let record = cache.keys[KeyPath(assetID: assetID, keyID: keyID)] { found.append(record) } else { missing.append(keyID) }
            }
        }
        guard !missing.isEmpty else { return found }
        let fetched = try await base.contentKeys(assetID: assetID, keyIDs: missing)
        cache.withLock { cache in
            if cache.keys.count >= capacity { cache.keys.removeAll() }
            for record in fetched { cache.keys[KeyPath(assetID: record.assetID, keyID: record.keyID)] = record }
        }
        return found + fetched
    }

    func contentKeys(after position: ContentKeyPosition?, limit: Int) async throws -> [ContentKeyRecord] {
        try await base.contentKeys(after: position, limit: limit)
    }

    func replaceSealedKeys(_ changes: [SealedKeyChange]) async throws -> Int {
        let changed = try await base.replaceSealedKeys(changes)
        cache.withLock { cache in
            for change in changes { cache.keys[KeyPath(assetID: change.old.assetID, keyID: change.old.keyID)] = nil }
        }
        return changed
    }

    func registerDevice(_ device: DeviceRecord) async throws -> DeviceRecord {
        let registered = try await base.registerDevice(device)
        remember(registered)
        return registered
    }

    func device(id: String) async throws -> DeviceRecord? {
        if let cached = cache.withLock({ $0.devices[id] }) { return cached }
        guard let device = try await base.device(id: id) else { return nil }
        remember(device)
        return device
    }

    private func remember(_ device: DeviceRecord) {
        cache.withLock { cache in
            if cache.devices.count >= capacity { cache.devices.removeAll() }
            cache.devices[device.id] = device
        }
    }

    func saveLease(
        _ request: IssuanceRequest,
        audit: AuditRecord,
        sign: @escaping @Sendable (IssuedLease) throws -> SignedPayload?
    ) async throws -> LeaseSaveResult {
        try await base.saveLease(request, audit: audit, sign: sign)
    }

    func recordFirstPlay(
        leaseID: String,
        deviceID: String,
        at time: Int64,
        nonce: RequestNonce?,
        now: Int64,
        audit: AuditRecord
    ) async throws
        -> FirstPlayResult
    {
        try await base.recordFirstPlay(leaseID: leaseID, deviceID: deviceID, at: time, nonce: nonce, now: now, audit: audit)
    }

    func lease(id: String) async throws -> IssuedLease? {
        try await base.lease(id: id)
    }

    func releaseLease(id: String, at time: Int64, deletedAt: Int64?, nonce: RequestNonce, audit: AuditRecord) async throws -> Bool {
        try await base.releaseLease(id: id, at: time, deletedAt: deletedAt, nonce: nonce, audit: audit)
    }

    func appendAudit(_ record: AuditRecord) async throws {
        try await base.appendAudit(record)
    }

    func forgetNonces(seenAtOrBefore horizon: Int64, limit: Int) async throws -> Int {
        try await base.forgetNonces(seenAtOrBefore: horizon, limit: limit)
    }

    func activeLeaseCounts(now: Int64) async throws -> [LeaseType: Int] {
        try await base.activeLeaseCounts(now: now)
    }

    func checkReady() async throws {
        try await base.checkReady()
    }

    var connectionUse: (operations: Int, maximumConnections: Int)? { base.connectionUse }

    func close() async {
        await base.close()
    }

    func auditRecords(limit: Int) async throws -> [AuditRecord] {
        try await base.auditRecords(limit: limit)
    }
}
