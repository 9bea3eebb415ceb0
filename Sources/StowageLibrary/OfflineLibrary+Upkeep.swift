import Foundation
public import KeyDelivery
public import StowageCore

/// When lease upkeep renews a lease.
public struct LeaseUpkeepPolicy: Sendable, Hashable {
    /// Renew a persistent, renewable lease once less than this share of its storage window is left (0.25: when 75%
    /// of the window from issue to storage expiry has passed).
    public var renewWhenLeft: Double

    public init(renewWhenLeft: Double = 0.25) {
        self.renewWhenLeft = renewWhenLeft
    }

    /// Whether `lease` is due for renewal at `now`: it holds keys, is persistent, the server allows renewing it still,
    /// and less than ``renewWhenLeft`` of its storage window is left.
    public func isDue(_ lease: StoredLease, at now: Int64) -> Bool {
        let terms = lease.record.terms
        guard lease.record.state.holdsKeyMaterial, lease.hasKeyMaterial, terms.type == .persistent else { return false }
        guard let renewableUntil = terms.renewableUntil, now <= renewableUntil, now < terms.storageExpiresAt else { return false }
        let window = terms.storageExpiresAt - terms.issuedAt
        guard window > 0 else { return false }
        return Double(terms.storageExpiresAt - now) < renewWhenLeft * Double(window)
    }
}

/// What one round of lease upkeep did.
public struct LeaseUpkeepReport: Sendable, Hashable, Codable {
    /// When it ran (seconds since the Unix epoch).
    public var at: Int64
    /// Leases renewed.
    public var renewed: [String] = []
    /// Leases due for renewal that could not be renewed, with the error's code and message.
    public var renewalFailures: [String: ErrorDocument.Body] = [:]
    /// Leases whose key material was erased because a window closed (releases queued).
    public var purged: [String] = []
    /// Releases the key servers confirmed.
    public var released: [String] = []
    /// First plays the key servers acknowledged.
    public var firstPlaysReported: [String] = []
    /// Releases and reports still queued (a key server could not be reached), with why.
    public var stillQueued: [String: String] = [:]
    /// Why the key store could not be read or written, when it could not: the steps that needed it were skipped, so
    /// nothing was purged, sent or renewed by them (a locked or damaged `stowage.sqlite`, an unreadable secret).
    public var storeFailure: ErrorDocument.Body?

    /// Whether it changed or sent anything, or failed.
    public var didSomething: Bool {
        !(renewed.isEmpty && renewalFailures.isEmpty && purged.isEmpty && released.isEmpty && firstPlaysReported.isEmpty
            && storeFailure == nil)
    }
}

extension OfflineLibrary {
    /// One round of what keeps offline leases healthy while the device is online (the download service runs it on a
    /// timer; a program may call it itself):
    ///
    /// 1. expired key material is erased and its releases queued;
    /// 2. queued releases and first-play reports are sent to their key servers (kept queued when one cannot be reached);
    /// 3. each lease ``LeaseUpkeepPolicy/isDue(_:at:)`` is renewed with its own key server, with the token `token`
    ///    gives for it (nil: skipped, reported as `no_token`; an error from `token`, such as a download record that
    ///    cannot be read, is reported with its own code, not as a missing token). The renewal is journaled as initiated
    ///    by `initiatedBy`.
    ///
    /// - Parameter skip: lease IDs not to try this round (a caller's back-off after failures).
    /// - Returns: what was done; failures are reported, not thrown, so one bad lease does not stop the others.
    public func upkeepLeases(
        policy: LeaseUpkeepPolicy = LeaseUpkeepPolicy(),
        initiatedBy: String = "service",
        skip: Set<String> = [],
        token: (StoredLease) async throws -> String?
    ) async -> LeaseUpkeepReport {
        var report = LeaseUpkeepReport(at: clock.now)
        // A store that fails is reported, never taken for "nothing to do": leases would lapse unseen.
        func storeFailed(_ error: any Error, step: String) {
            guard report.storeFailure == nil else { return }
            let text = (error as? any StowageError)?.message ?? "\(error)"
            report.storeFailure =
                ErrorDocument(
                    ReportedError(
                        code: (error as? any StowageError)?.code ?? .keyStoreUnavailable,
                        message: "lease upkeep could not \(step): \(text); leases are not renewed until the key store in "
                            + "\(dataDirectory.url.path) can be read and written (run `stowage keys list` to see the error)"
                    )
                ).error
        }
        do {
            report.purged = try keyStore.purgeExpired(at: clock.now).expiredLeaseIds
        } catch {
            storeFailed(error, step: "erase expired keys")
        }
        do {
            let sync = try await syncLeases()
            report.released = sync.released
            report.firstPlaysReported = sync.reported
            report.stillQueued = sync.failed
        } catch {
            storeFailed(error, step: "send queued releases and first plays")
        }
        let leases: [StoredLease]
        do {
            leases = try keyStore.leases()
        } catch {
            storeFailed(error, step: "read the leases")
            return report
        }
        let due = leases.filter { policy.isDue($0, at: clock.now) && !skip.contains($0.leaseId) }
        for lease in due {
            let failure: any StowageError
            do {
                if let given = try await token(lease) {
                    do {
                        _ = try await session(keyServer: lease.keyServer, token: given).renew(leaseId: lease.leaseId, initiatedBy: initiatedBy)
                        report.renewed.append(lease.leaseId)
                        continue
                    } catch {
                        failure =
                            (error as? any StowageError)
                            ?? ReportedError(code: .renewalFailed, message: "the renewal of \(lease.leaseId) failed")
                    }
                } else {
                    failure = ReportedError(
                        code: .noToken,
                        message: "lease \(lease.leaseId) of asset \(lease.assetId) is due for renewal but no entitlement token is "
                            + "available; give the service a --token-command, or run `stowage keys renew \(lease.assetId) --token-file FILE`"
                    )
                }
            } catch {
                // Not "no token": the token exists somewhere that could not be read (the download records, say).
                failure = ReportedError(
                    code: (error as? any StowageError)?.code ?? .tokenUnavailable,
                    message: "lease \(lease.leaseId) of asset \(lease.assetId) is due for renewal but its entitlement token could "
                        + "not be read: \((error as? any StowageError)?.message ?? "\(error)"); it is tried again at the next "
                        + "upkeep, or run `stowage keys renew \(lease.assetId) --token-file FILE`"
                )
            }
            var body = ErrorDocument(failure).error
            body.assetId = lease.assetId
            body.leaseId = lease.leaseId
            report.renewalFailures[lease.leaseId] = body
            _ = try? keyStore.appendAuditEntry(
                .renewalFailed,
                assetId: lease.assetId,
                leaseId: lease.leaseId,
                detail: AuditDetail(["code": .string(body.code), "by": .string(initiatedBy)]),
                at: clock.now
            )
        }
        return report
    }
}
