public import StowageCrypto

/// Seals small secrets other modules keep in the data directory (the token and headers of a download, say) under the
/// key store's key-encryption key (``KeyStore``, `key-store.secret` and the machine ID), bound to a context so that a
/// sealed value moved to another row or purpose does not open.
///
/// ```swift
/// let sealer = try keyStore.dataSealer()
/// let sealed = try sealer.seal(SecretBytes(Array(token.utf8)), context: "download-secrets movie-1")
/// ```
public struct DataSealer: Sendable {
    let sealer: LocalKeySealer

    /// `secret` sealed for `context`: a 12-byte nonce, the ciphertext and the 16-byte tag.
    public func seal(_ secret: SecretBytes, context: String) throws -> [UInt8] {
        try sealer.seal(secret, authenticating: Self.aad(context)).combined
    }

    /// Opens what ``seal(_:context:)`` made for the same `context`.
    ///
    /// - Throws: ``KeyStoreError`` `sealed_data_damaged` when it does not open (altered, moved, or sealed on another
    ///   machine or data directory).
    public func open(_ sealed: [UInt8], context: String) throws -> SecretBytes {
        guard let parts = LocalKeySealer.Sealed(combined: sealed) else { throw KeyStoreError.sealedDataDamaged(context: context) }
        do {
            return try sealer.open(parts, authenticating: Self.aad(context))
        } catch {
            throw KeyStoreError.sealedDataDamaged(context: context)
        }
    }

    private static func aad(_ context: String) -> [UInt8] {
        Array("stowage-sealed-data-v1\n\(context)".utf8)
    }
}

extension KeyStore {
    /// The sealer for secrets other modules keep (``DataSealer``).
    ///
    /// - Throws: the errors of the store's secret (`sealing_secret_missing`, `sealing_key_mismatch`,
    ///   `machine_id_unavailable`).
    public func dataSealer() throws -> DataSealer {
        DataSealer(sealer: try sealer())
    }
}
