import Foundation
import JWTKit

/// The claims of an entitlement token (docs/key-protocol.md, "Authentication", with the checks of
/// docs/key-server.md): the account (`sub`), the assets it may play (or `["*"]` where the server allows it), the expiry
/// (`exp`), the issue time (`iat`) and the key server it was minted for (`aud`).
///
/// `iat` and `aud` decode as optional so that a token without them gets a message naming the missing claim rather than
/// a decoding error; ``EntitlementVerifier`` refuses such tokens.
struct EntitlementClaims: JWTPayload, Equatable {
    var sub: SubjectClaim
    var assets: [String]
    var exp: ExpirationClaim
    var iat: IssuedAtClaim?
    var aud: AudienceClaim?

    /// Checked against the server's injected clock in ``EntitlementVerifier``, not against the wall clock here.
    func verify(using algorithm: some JWTAlgorithm) async throws {}

    /// The account the token was issued to.
    var account: String { sub.value }

    /// Whether the token lists `assetID` (or `*`).
    func allows(_ assetID: String) -> Bool {
        entitlement.allows(assetID)
    }

    /// What the token grants, as ``LeaseIssuance`` judges it.
    var entitlement: Entitlement { Entitlement(account: account, assets: assets) }
}
