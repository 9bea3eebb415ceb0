import Foundation
import JWTKit
import KeyDelivery
import StowageCrypto
import Synchronization

/// Checks `Authorization: Bearer TOKEN`: an HS256 JWT from the service that sells the content, with `sub`, `assets`
/// and `exp`; and mints such tokens for `stowage keyserver token`.
struct EntitlementVerifier: Sendable {
    private let keys: JWTKeyCollection
    private let verified = VerifiedTokens()

    /// - Parameter secret: the HS256 key, the exact bytes of the data directory's `token-secret`.
    init(secret: SecretBytes) async {
        let keys = JWTKeyCollection()
        let bytes = secret.withUnsafeBytes { [UInt8]($0) }
        await keys.add(hmac: HMACKey(from: bytes), digestAlgorithm: .sha256)
        self.keys = keys
    }

    /// The verified claims of the request's bearer token.
    ///
    /// - Throws: ``KeyServerError`` `invalid_token` when the header is missing or not a bearer token, the signature or
    ///   algorithm is wrong, a claim is missing, or the token has expired at `now`.
    func claims(authorization: String?, now: Int64) async throws -> EntitlementClaims {
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            throw KeyServerError(.invalidToken, "send the entitlement token as `Authorization: Bearer TOKEN`")
        }
        let token = authorization.dropFirst(7).trimmingCharacters(in: .whitespaces)
        let claims: EntitlementClaims
        if let known = verified.claims(for: token) {
            claims = known
        } else {
            do {
                claims = try await keys.verify(token, as: EntitlementClaims.self)
            } catch {
                throw KeyServerError(.invalidToken, "the entitlement token is not a valid HS256 token from this service (\(error))")
            }
            verified.remember(claims, for: token)
        }
        do {
            try claims.exp.verifyNotExpired(currentDate: Date(timeIntervalSince1970: TimeInterval(now)))
        } catch {
            throw KeyServerError(.invalidToken, "the entitlement token expired at \(Int64(claims.exp.value.timeIntervalSince1970)); get a new one")
        }
        return claims
    }

    /// Signs a token for `subject` and `assets`, expiring `ttl` seconds after `now`.
    func makeToken(subject: String, assets: [String], ttl: Int64, now: Int64) async throws -> String {
        let claims = EntitlementClaims(
            sub: SubjectClaim(value: subject),
            assets: assets,
            exp: ExpirationClaim(value: Date(timeIntervalSince1970: TimeInterval(now + ttl)))
        )
        return try await keys.sign(claims)
    }
}

/// Tokens whose signature already verified, with their claims: a client sends the same token with many requests.
/// Keyed by the whole token, signature included, so only a token that verified can match; expiry is still checked on
/// every use.
private final class VerifiedTokens: Sendable {
    private let tokens = Mutex<[String: EntitlementClaims]>([:])
    /// A bound on memory: past it the table is emptied and refills from verification.
    private let capacity = 10_000

    func claims(for token: String) -> EntitlementClaims? {
        tokens.withLock { $0[token] }
    }

    func remember(_ claims: EntitlementClaims, for token: String) {
        tokens.withLock { tokens in
            if tokens.count >= capacity { tokens.removeAll() }
            tokens[token] = claims
        }
    }
}
