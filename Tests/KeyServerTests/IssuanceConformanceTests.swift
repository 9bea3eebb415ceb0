import Foundation
import KeyDelivery
import KeyServer
import Testing

/// The conformance table of the issuance engine: every lease kind (persistent, streaming, identity, renewal) against
/// every rule (entitlement, persistentAllowed, identityAllowed, renewal, rental window, device limit, stream limit),
/// with the refusal code a client gets, on SQLite and on PostgreSQL. Each cell runs in its own account and asset on
/// one store per database, set up through the store's own `saveLease`, so the rules are judged inside the
/// transaction exactly as a request would be.
@Suite("Issuance: every lease kind against every rule, on both stores")
struct IssuanceConformanceTests {
    typealias Rule = IssuanceRefusal.Rule
    typealias Kind = IssuanceRequest.Kind

    enum Outcome: Hashable, CustomStringConvertible {
        case saved
        case refused(Rule, KeyProtocolErrorCode)

        var description: String {
            switch self {
            case .saved: "saved"
            case .refused(let rule, let code): "refused by \(rule.rawValue) (\(code.rawValue))"
            }
        }
    }

    /// What each cell must give: the scenario of a rule, asked with each kind of request.
    static let table: [(rule: Rule, kind: Kind, expected: Outcome)] = [
        (.entitlement, .persistent, .refused(.entitlement, .notEntitled)),
        (.entitlement, .streaming, .refused(.entitlement, .notEntitled)),
        (.entitlement, .identity, .refused(.entitlement, .notEntitled)),
        (.entitlement, .renewal, .refused(.entitlement, .notEntitled)),
        (.persistentAllowed, .persistent, .refused(.persistentAllowed, .notEntitled)),
        (.persistentAllowed, .streaming, .saved),
        (.persistentAllowed, .identity, .saved),
        (.persistentAllowed, .renewal, .refused(.persistentAllowed, .notEntitled)),
        (.identityAllowed, .persistent, .saved),
        (.identityAllowed, .streaming, .saved),
        (.identityAllowed, .identity, .refused(.identityAllowed, .notEntitled)),
        (.identityAllowed, .renewal, .saved),
        (.renewal, .persistent, .saved),
        (.renewal, .streaming, .saved),
        (.renewal, .identity, .saved),
        (.renewal, .renewal, .refused(.renewal, .leaseExpired)),
        (.rentalWindow, .persistent, .refused(.rentalWindow, .notEntitled)),
        (.rentalWindow, .streaming, .refused(.rentalWindow, .notEntitled)),
        (.rentalWindow, .identity, .refused(.rentalWindow, .notEntitled)),
        (.rentalWindow, .renewal, .refused(.rentalWindow, .notEntitled)),
        (.deviceLimit, .persistent, .refused(.deviceLimit, .deviceLimitReached)),
        (.deviceLimit, .streaming, .refused(.deviceLimit, .deviceLimitReached)),
        (.deviceLimit, .identity, .refused(.deviceLimit, .deviceLimitReached)),
        (.deviceLimit, .renewal, .refused(.deviceLimit, .deviceLimitReached)),
        (.streamLimit, .persistent, .saved),
        (.streamLimit, .streaming, .refused(.streamLimit, .streamLimitReached)),
        (.streamLimit, .identity, .refused(.streamLimit, .streamLimitReached)),
        (.streamLimit, .renewal, .saved),
    ]

    /// A policy that allows everything: the setup's leases are issued under it.
    static let permissive = AssetPolicy(
        storageDuration: 1_000,
        playbackDuration: 100,
        renewable: true,
        renewalExtension: 1_000,
        renewableFor: 5_000,
        maxDevices: nil,
        streamingDuration: 500,
        identityAllowed: true
    )

    /// The policy of a rule's scenario: the permissive one with that rule switched on.
    static func policy(for rule: Rule) -> AssetPolicy {
        var policy = permissive
        switch rule {
        case .entitlement, .renewal: break
        case .persistentAllowed: policy.persistentAllowed = false
        case .identityAllowed: policy.identityAllowed = false
        case .rentalWindow: policy.oncePerAccount = true
        case .deviceLimit: policy.maxDevices = 1
        case .streamLimit: policy.maxStreams = 1
        }
        return policy
    }

    /// One cell: its own account and asset, so cells share a store without meeting.
    struct Cell {
        let store: any KeyServerStore
        let rule: Rule
        let kind: Kind
        var account: String { "acct-\(rule.rawValue)-\(kind.rawValue)" }
        var asset: String { "asset-\(rule.rawValue)-\(kind.rawValue)" }

        func lease(_ id: String, device: String, type: LeaseType = .persistent, at time: Int64, storage: Int64 = 1_000) -> IssuedLease {
            IssuedLease(
                id: "\(account)-\(id)",
                account: account,
                assetID: asset,
                deviceID: device,
                keyIDs: ["k1"],
                type: type,
                createdAt: time,
                issuedAt: time,
                storageExpiresAt: time + storage,
                playbackDuration: 100,
                renewableUntil: type == .persistent ? time + 5_000 : nil
            )
        }

        @discardableResult
        func save(
            _ kind: Kind,
            _ lease: IssuedLease,
            policy: AssetPolicy = IssuanceConformanceTests.permissive,
            assets: [String] = ["*"],
            at now: Int64
        ) async throws -> LeaseSaveResult {
            let request = IssuanceRequest(
                kind: kind,
                lease: lease,
                policy: policy,
                entitlement: Entitlement(account: account, assets: assets),
                nonce: kind == .identity ? nil : RequestNonce((0..<16).map { _ in UInt8.random(in: 0...255) }, window: 86_400),
                now: now
            )
            return try await store.saveLease(request, audit: AuditRecord(time: now, event: .issued, operation: "keys")) { _ in nil }
        }

        /// Sets up the rule's scenario, then asks with this cell's kind at time 200.
        func run() async throws -> Outcome {
            let policy = IssuanceConformanceTests.policy(for: rule)
            // The lease a renewal renews: device "mine", issued at 10 under the permissive policy.
            var renewed = lease("mine", device: "dev-mine", at: 10)
            var assets = ["*"]
            switch rule {
            case .entitlement:
                assets = ["another-asset"]
                try await expectSaved(save(.persistent, renewed, at: 10))
            case .persistentAllowed, .identityAllowed, .streamLimit:
                try await expectSaved(save(.persistent, renewed, at: 10))
                if rule == .streamLimit {
                    // Another device streams the asset now.
                    try await expectSaved(save(.streaming, lease("stream", device: "dev-other", type: .streaming, at: 150), at: 150))
                }
            case .renewal:
                // Released before it is renewed.
                try await expectSaved(save(.persistent, renewed, at: 10))
                _ = try await store.releaseLease(
                    id: renewed.id,
                    at: 20,
                    deletedAt: 20,
                    nonce: RequestNonce((0..<16).map { _ in UInt8.random(in: 0...255) }, window: 86_400),
                    audit: AuditRecord(time: 20, event: .released, operation: "release")
                )
            case .rentalWindow:
                // The account's first download played at 20: its 100 s window ended at 120.
                try await expectSaved(save(.persistent, renewed, policy: policy, at: 10))
                _ = try await store.recordFirstPlay(
                    leaseID: renewed.id,
                    deviceID: renewed.deviceID,
                    at: 20,
                    nonce: nil,
                    now: 30,
                    audit: AuditRecord(time: 30, event: .firstPlayReported, operation: "first-play")
                )
            case .deviceLimit:
                // "mine" held a slot that lapsed at 15; another device took the one slot at 20.
                renewed = lease("mine", device: "dev-mine", at: 10, storage: 5)
                try await expectSaved(save(.persistent, renewed, policy: policy, at: 10))
                try await expectSaved(save(.persistent, lease("held", device: "dev-other", at: 20), policy: policy, at: 20))
            }
            let asked: IssuedLease =
                switch kind {
                case .persistent: lease("new", device: "dev-new", at: 200)
                case .streaming: lease("new", device: "dev-new", type: .streaming, at: 200)
                case .identity: lease("new", device: "token:0123", type: .streaming, at: 200)
                case .renewal: renewed
                }
            switch try await save(kind, asked, policy: policy, assets: assets, at: 200) {
            case .saved(let lease, _):
                // What was saved is in the store.
                #expect(try await store.lease(id: lease.id) != nil)
                return .saved
            case .refused(let refusal):
                // Nothing of a refused lease is written.
                if kind != .renewal { #expect(try await store.lease(id: asked.id) == nil) }
                return .refused(refusal.rule, refusal.code)
            case .replayed:
                Issue.record("a fresh nonce was called a replay")
                return .saved
            }
        }

        private func expectSaved(_ result: LeaseSaveResult) {
            guard case .saved = result else {
                Issue.record("the setup of \(rule.rawValue)/\(kind.rawValue) was refused: \(result)")
                return
            }
        }
    }

    @Test("the conformance table", arguments: StoreKind.available)
    func everyKindAgainstEveryRule(_ store: StoreKind) async throws {
        // The table covers every rule and every kind.
        #expect(Set(Self.table.map(\.rule)) == Set(Rule.allCases))
        #expect(Set(Self.table.map(\.kind)) == Set(Kind.allCases))
        try await store.withStore { store in
            for (rule, kind, expected) in Self.table {
                let found = try await Cell(store: store, rule: rule, kind: kind).run()
                #expect(found == expected, "\(rule.rawValue) × \(kind.rawValue): expected \(expected), got \(found)")
            }
        }
    }

    /// Finding 1 of the lease issue, in the store: after a once-per-account rental ended, a new device of the account
    /// asking for a streaming lease gets nothing; and with `maxDevices: 1` and `maxStreams` unset, devices 2 to 5
    /// asking to stream are refused.
    @Test(arguments: StoreKind.available)
    func streamingLeasesObeyTheAssetsPolicy(_ store: StoreKind) async throws {
        try await store.withStore { store in
            var rental = Self.permissive
            rental.oncePerAccount = true
            let cell = Cell(store: store, rule: .rentalWindow, kind: .streaming)
            let first = cell.lease("first", device: "d1", at: 10)
            _ = try await cell.save(.persistent, first, policy: rental, at: 10)
            _ = try await store.recordFirstPlay(
                leaseID: first.id,
                deviceID: "d1",
                at: 20,
                nonce: nil,
                now: 20,
                audit: AuditRecord(time: 20, event: .firstPlayReported, operation: "first-play")
            )
            let late = try await cell.save(.streaming, cell.lease("late", device: "d2", type: .streaming, at: 500), policy: rental, at: 500)
            guard case .refused(let refusal) = late else {
                Issue.record("a streaming lease was issued after the rental ended: \(late)")
                return
            }
            #expect(refusal.rule == .rentalWindow && refusal.message.contains("ended at"))
            // Before it ended, a stream ends with the rental.
            let early = try await cell.save(.streaming, cell.lease("early", device: "d3", type: .streaming, at: 50), policy: rental, at: 50)
            guard case .saved(let stream, _) = early else {
                Issue.record("a stream within the rental was refused: \(early)")
                return
            }
            #expect(stream.storageExpiresAt == 120 && stream.firstPlayedAt == 20)

            var oneDevice = Self.permissive
            oneDevice.maxDevices = 1
            let limited = Cell(store: store, rule: .deviceLimit, kind: .streaming)
            _ = try await limited.save(.persistent, limited.lease("held", device: "device-1", at: 10), policy: oneDevice, at: 10)
            for device in 2...5 {
                let result = try await limited.save(
                    .streaming,
                    limited.lease("s\(device)", device: "device-\(device)", type: .streaming, at: 20),
                    policy: oneDevice,
                    at: 20
                )
                guard case .refused(let refusal) = result, refusal.rule == .deviceLimit, refusal.code == .deviceLimitReached else {
                    Issue.record("device \(device) streamed past maxDevices 1: \(result)")
                    continue
                }
            }
            // The device holding the slot may stream.
            let own = try await limited.save(
                .streaming,
                limited.lease("own", device: "device-1", type: .streaming, at: 20),
                policy: oneDevice,
                at: 20
            )
            guard case .saved = own else {
                Issue.record("the device holding the slot was refused a stream: \(own)")
                return
            }
        }
    }
}
