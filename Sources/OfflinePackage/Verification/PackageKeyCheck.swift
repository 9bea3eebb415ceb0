import Foundation
import KeyDelivery
import StowageCore
import StowageCrypto

/// Which of a package's keys this device holds now, key by key, and what the lease says: the offline half of
/// "will this play?", shared by ``PackageVerifier`` and ``PackageInfo``.
///
/// Unlike ``PackageKeyring/keys(for:at:)``, which stops at the first missing key, every key is judged and every
/// refusal becomes a ``VerificationProblem``.
struct PackageKeyCheck {
    /// What was found.
    struct Outcome {
        /// The keys held, by key ID.
        var keys: [String: SecretBytes] = [:]
        /// Why keys or the lease fail, in manifest order; lease problems last.
        var problems: [VerificationProblem] = []
        /// The lease evaluation, when the package has skd keys (nil for identity-key and clear packages).
        var lease: LeaseEvaluation?

        /// Whether the lease (if any) allows playback.
        var leaseIsValid: Bool { lease?.isValid ?? true }
    }

    var store: KeyStore
    var device: DeviceIdentity

    /// Judges every key of `manifest` and the lease at `now`.
    ///
    /// - Parameter duration: with `verify --for`, the seconds the package must stay playable, counting the playback
    ///   window as starting now; nil or 0: playable now.
    /// - Throws: storage failures of the key store (``KeyStoreError`` `database_failure`).
    func check(_ manifest: PackageManifest, at now: Int64, duration: Int64?) throws -> Outcome {
        var outcome = Outcome()
        // Every look at keys records the local time, as lease operations do, so a clock set back is latched even for
        // a package without a lease.
        try store.observe(localTime: now)
        let skd = manifest.keys.filter { $0.kind == .skd }
        var leaseFailures: [String] = []
        if !skd.isEmpty {
            let leases = try store.leases(assetId: manifest.assetId).filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial }
            // Newest first, so a renewed or re-acquired lease wins.
            for lease in leases.sorted(by: { $0.record.terms.issuedAt > $1.record.terms.issuedAt }) {
                do {
                    for (id, key) in try store.contentKeys(leaseId: lease.leaseId, device: device)
                    where outcome.keys[id] == nil {
                        outcome.keys[id] = key
                    }
                } catch {
                    leaseFailures.append("lease \(lease.leaseId): \(error)")
                }
            }
            for key in skd where outcome.keys[key.keyId] == nil {
                let reason =
                    leases.isEmpty
                    ? "no lease of asset \(manifest.assetId) holds keys on this device"
                    : leaseFailures.isEmpty
                        ? "no stored lease of asset \(manifest.assetId) holds it"
                        : "the stored leases cannot be opened (\(leaseFailures.joined(separator: "; ")))"
                outcome.problems.append(
                    VerificationProblem(
                        leaseFailures.isEmpty ? .keyMissing : .keyUnusable,
                        message: "key \(key.keyId) is not held: \(reason); get the keys again while online (`stowage keys "
                            + "fetch \(manifest.assetId)`)",
                        keyId: key.keyId
                    )
                )
            }
            let evaluation = try store.coverage(assetId: manifest.assetId, keyIds: skd.map(\.keyId), duration: max(0, duration ?? 0), at: now)
            outcome.lease = evaluation
            if let error = evaluation.error {
                outcome.problems.append(VerificationProblem(leaseError: error))
            }
        }
        for key in manifest.keys where key.kind == .identity {
            do {
                outcome.keys[key.keyId] = try store.identityKey(uri: key.uri, at: now)
            } catch {
                outcome.problems.append(try Self.identityKeyProblem(error, key: key))
                continue
            }
            // `--for`: a key with a local lifetime must outlive the duration too.
            guard let duration, duration > 0 else { continue }
            do {
                _ = try store.identityKey(uri: key.uri, at: now.addingReportingOverflow(duration - 1).partialValue)
            } catch let error as KeyStoreError where error.code == .identityKeyExpired {
                outcome.problems.append(
                    VerificationProblem(
                        .leaseNotLongEnough,
                        message: "key \(key.keyId) expires within the next \(duration) s (\(error.description)); "
                            + "download the asset again while online",
                        keyId: key.keyId,
                        cause: error.code
                    )
                )
            } catch {
                // Only expiry depends on the time asked about; anything else was judged above.
            }
        }
        return outcome
    }

    /// The problem an identity key's refusal means, or the error again when it is a storage failure.
    private static func identityKeyProblem(_ error: any Error, key: PackageKey) throws -> VerificationProblem {
        if let lease = error as? LeaseError {
            var problem = VerificationProblem(leaseError: lease)
            problem.keyId = key.keyId
            return problem
        }
        guard let stored = error as? KeyStoreError else {
            return VerificationProblem(
                .keyUnusable,
                message: "key \(key.keyId) cannot be opened: \(error); download the asset again while online",
                keyId: key.keyId
            )
        }
        let code: VerificationProblem.Code
        let advice: String
        switch stored.code {
        case .identityKeyNotFound:
            code = .keyMissing
            advice = "key \(key.keyId) is not stored on this device"
        case .identityKeyExpired:
            code = .keyExpired
            advice = "key \(key.keyId) has expired"
        case .databaseFailure:
            throw error
        default:
            code = .keyUnusable
            advice = "key \(key.keyId) cannot be opened (\(stored.description))"
        }
        return VerificationProblem(
            code,
            message: "\(advice); download the asset again while online",
            keyId: key.keyId,
            cause: stored.code
        )
    }
}
