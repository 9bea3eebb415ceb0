import Foundation
import JWTKit

/// The claims of an entitlement token (shared/KEY-PROTOCOL.md, "Authentication"): the account, the assets it may
/// play (or `["*"]` for all), and the expiry.
struct EntitlementClaims: JWTPayload, Equatable {
    var sub: SubjectClaim
    var assets: [String]
    var exp: ExpirationClaim

    /// Expiry is checked against the server's injected clock in ``EntitlementVerifier``, not against the wall clock here.
    func verify(using algorithm: some JWTAlgorithm) async throws {}

    /// The account the token was issued to.
    var account: String { sub.value }

    /// Whether the token lists `assetID` (or `*`).
    func allows(_ assetID: String) -> Bool {
        assets.contains("*") || assets.contains(assetID)
    }
}
