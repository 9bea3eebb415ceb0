public import AssetDownload
public import Foundation
public import KeyDelivery
import OfflinePackage

/// One lease as `stowage keys list` shows it: its terms as the server signed them, its state on this device, and
/// anything found altered. Times are seconds since the Unix epoch (the JSON form); the terminal shows dates.
public struct LeaseSummary: Sendable, Hashable, Codable {
    public var leaseId: String
    public var assetId: String
    public var keyIds: [String]
    /// `persistent` or `streaming`.
    public var type: String
    /// ``KeyDelivery/LeaseState`` raw value.
    public var state: String
    public var storageExpiresAt: Int64
    /// What is left of the playback window (the whole window before the first play); 0 once the lease ended; nil when
    /// the lease has no playback window.
    public var playbackTimeLeft: Int64?
    public var renewableUntil: Int64?
    /// Whether its release waits to be sent.
    public var pendingRelease: Bool
    /// The key server it came from.
    public var keyServer: String
    /// What was found altered, for a lease refused with `lease_tampered`.
    public var tampering: String?
    /// When it was last renewed, and by whom (`service` for the download service's upkeep; nil for the user).
    public var lastRenewedAt: Int64?
    public var lastRenewedBy: String?

    init(_ lease: StoredLease, pendingRelease: Bool, lastRenewal: AuditEntry?, at now: Int64) {
        let record = lease.record
        leaseId = lease.leaseId
        assetId = lease.assetId
        keyIds = record.terms.keyIds
        type = record.terms.type.rawValue
        state = record.state.rawValue
        storageExpiresAt = record.terms.storageExpiresAt
        playbackTimeLeft =
            if !record.state.holdsKeyMaterial { 0 } else if let end = record.playbackEndsAt { max(0, end - now) } else {
                record.terms.playbackDuration
            }
        renewableUntil = record.terms.renewableUntil
        self.pendingRelease = pendingRelease
        keyServer = lease.keyServer
        tampering = record.tampering
        lastRenewedAt = lastRenewal?.time
        lastRenewedBy = lastRenewal.flatMap { entry in
            (try? JSONSerialization.jsonObject(with: Data(entry.detail.utf8)) as? [String: Any])?["by"] as? String
        }
    }
}

extension OfflineLibrary {
    /// Every lease of the device, oldest first.
    public func leases() throws -> [LeaseSummary] {
        let pending = Set(try keyStore.pendingReleases().map(\.leaseId))
        let now = clock.now
        var renewals: [String: AuditEntry] = [:]
        for entry in try keyStore.auditEntries() where entry.kind == .renewal {
            if let lease = entry.leaseId { renewals[lease] = entry }  // in journal order: the last one stays
        }
        return try keyStore.leases().map {
            LeaseSummary($0, pendingRelease: pending.contains($0.leaseId), lastRenewal: renewals[$0.leaseId], at: now)
        }
    }

    /// The key audit journal, oldest first.
    public func auditEntries() throws -> [AuditEntry] {
        try keyStore.auditEntries()
    }

    /// Checks the journal's hash chain.
    public func verifyAuditJournal() throws -> AuditVerification {
        try keyStore.verifyAuditJournal()
    }

    /// Renews the leases of `assetId` (every lease holding keys when nil), each with the key server it came from. A
    /// renewal also clears that lease's latches and repairs a lease refused with `lease_tampered`.
    ///
    /// - Returns: the renewed leases.
    /// - Throws: ``KeyDelivery/KeySessionError`` `lease_not_stored` when there is none; the key server's refusals.
    public func renewLeases(assetId: String?, token: String) async throws -> [LeaseRecord] {
        let leases = try keyStore.leases(assetId: assetId).filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial }
        if leases.isEmpty { throw KeySessionError.leaseNotStored(assetId ?? "any asset") }
        var renewed: [LeaseRecord] = []
        for lease in leases {
            renewed.append(try await session(keyServer: lease.keyServer, token: token).renew(leaseId: lease.leaseId))
        }
        return renewed
    }

    /// Obtains again the keys of a downloaded asset this device no longer holds (a returned lease, an expired storage
    /// window, a state database set aside by ``recoverDatabase(in:clock:)``), without fetching media.
    /// See ``AssetDownload/DownloadSession/fetchKeys(assetId:keyServerURL:token:)``.
    public func fetchKeys(assetId: String, keyServerURL: String? = nil, token: String? = nil) async throws -> KeyFetchResult {
        try await downloads.fetchKeys(assetId: assetId, keyServerURL: keyServerURL, token: token)
    }

    /// Returns an asset's leases: erases their keys now, then tells the key servers (queued while they cannot be
    /// reached).
    public func returnLeases(assetId: String) async throws -> (returned: [LeaseRecord], sync: KeySession.SyncReport) {
        let returned = try keyStore.returnAsset(assetId: assetId, at: clock.now)
        return (returned, try await syncLeases())
    }

    /// Tells every key server what it must know: first plays, then queued releases, each to the server its lease came
    /// from.
    public func syncLeases() async throws -> KeySession.SyncReport {
        let servers = Set(try keyStore.pendingReleases().map(\.keyServer) + keyStore.pendingFirstPlayReports().map(\.keyServer))
        var total = KeySession.SyncReport()
        for server in servers.sorted() where !server.isEmpty {
            let report = try await session(keyServer: server, token: nil).sync()
            total.reported += report.reported
            total.released += report.released
            total.failed.merge(report.failed) { first, _ in first }
        }
        return total
    }

    /// The key servers trusted beyond the playlists' own hosts (`key-servers.json`).
    public func trustedKeyServers() throws -> [String] {
        try TrustedKeyServers.load(from: dataDirectory.url)
    }

    /// Trusts (or, with `remove`, stops trusting) a key server that playlists advertise.
    ///
    /// - Returns: the trusted key servers as saved.
    @discardableResult
    public func trustKeyServer(_ url: URL, remove: Bool = false) throws -> [String] {
        try TrustedKeyServers.update(url, remove: remove, in: dataDirectory.url)
    }

    /// Forgets the signing key pinned for a key server (refused while a lease from it holds keys).
    ///
    /// - Returns: false when nothing was pinned.
    @discardableResult
    public func unpinKeyServer(_ url: URL) throws -> Bool {
        guard let key = KeyServerURL.normalized(url) else {
            throw KeySessionError.invalidRequest("\(url.absoluteString) is not an http(s) key server URL")
        }
        return try keyStore.unpin(key, at: clock.now)
    }

    /// A key session with the key server at `keyServer` (a normalized URL, as leases record it).
    func session(keyServer: String, token: String?) throws -> KeySession {
        guard let url = URL(string: keyServer) else { throw KeySessionError.invalidRequest("\(keyServer) is not a key server URL") }
        return KeySession(clock: clock, http: keyHTTP.client(for: url), store: keyStore, device: try device(), serverURL: url, token: token)
    }
}
