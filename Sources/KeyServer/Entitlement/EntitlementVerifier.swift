import Foundation
import JWTKit
import KeyDelivery
import StowageCore
import StowageCrypto
import Synchronization

/// Checks `Authorization: Bearer TOKEN`: an HS256 JWT from the service that sells the content, with `sub`, `assets`,
/// `exp`, `iat` and `aud`; and mints such tokens for `stowage keyserver token`.
///
/// Beyond the signature and the expiry: `aud` must name this key server (config.json's `tokenAudience`), `iat` must not
/// be in the future (beyond the protocol's 300 s leeway), the lifetime `exp - iat` must not exceed `maxTokenLifetime`,
/// and `["*"]` is accepted only with `allowWildcardAssets`.
struct EntitlementVerifier: Sendable {
    private let keys: JWTKeyCollection
    private let verified = VerifiedTokens()
    private let audience: String
    private let maxLifetime: Int64
    private let allowsWildcard: Bool

    /// - Parameters:
    ///   - secret: the HS256 key, the exact bytes of the data directory's `token-secret`.
    ///   - configuration: the audience, maximum lifetime and wildcard rule.
    init(secret: SecretBytes, configuration: KeyServerConfiguration) async {
        let keys = JWTKeyCollection()
        let bytes = secret.withUnsafeBytes { [UInt8]($0) }
        await keys.add(hmac: HMACKey(from: bytes), digestAlgorithm: .sha256)
        self.keys = keys
        self.audience = configuration.tokenAudience
        self.maxLifetime = configuration.maxTokenLifetime
        self.allowsWildcard = configuration.allowWildcardAssets
    }

    /// The token of an `Authorization: Bearer TOKEN` header (the scheme in any case, white space around the token
    /// dropped); nil for no header or another scheme.
    static func bearerToken(_ authorization: String?) -> String? {
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return nil }
        let token = authorization.dropFirst(7).trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    /// The verified claims of the request's bearer token.
    ///
    /// - Throws: ``KeyServerError`` `invalid_token` when the header is missing or not a bearer token, the signature or
    ///   algorithm is wrong, a claim is missing, the token has expired at `now`, names another audience, was issued in
    ///   the future, lives longer than allowed, or lists `*` where that is not allowed.
    func claims(authorization: String?, now: Int64) async throws -> EntitlementClaims {
        guard let token = Self.bearerToken(authorization) else {
            throw KeyServerError(.invalidToken, "the request carried no bearer token; send the entitlement token as `Authorization: Bearer TOKEN`")
        }
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
        let expiry = Int64(claims.exp.value.timeIntervalSince1970)
        guard now < expiry else {
            throw KeyServerError(.invalidToken, "the entitlement token expired at \(HumanTime.date(expiry)); get a new one")
        }
        guard let issued = claims.iat.map({ Int64($0.value.timeIntervalSince1970) }) else {
            throw KeyServerError(
                .invalidToken,
                "the entitlement token has no `iat` (issued-at) claim; the service that sells the content must set it"
            )
        }
        guard let audiences = claims.aud?.value, audiences.contains(audience) else {
            throw KeyServerError(
                .invalidToken,
                "the entitlement token is not meant for this key server: its `aud` must include \"\(audience)\""
            )
        }
        guard issued <= now + KeyProtocol.clockLeeway else {
            throw KeyServerError(
                .invalidToken,
                "the entitlement token was issued in the future (\(HumanTime.date(issued))); check the issuer's clock"
            )
        }
        guard expiry - issued <= maxLifetime else {
            throw KeyServerError(
                .invalidToken,
                "the entitlement token lives \(HumanTime.duration(expiry - issued)), longer than this key server allows "
                    + "(\(HumanTime.duration(maxLifetime))); mint a shorter-lived one"
            )
        }
        if claims.assets.contains("*"), !allowsWildcard {
            throw KeyServerError(
                .invalidToken,
                "the entitlement token lists every asset (\"*\"), which this key server refuses; list the assets it sells"
            )
        }
        return claims
    }

    /// Signs a token for `subject` and `assets`, expiring `ttl` seconds after `now`.
    func makeToken(subject: String, assets: [String], ttl: Int64, now: Int64) async throws -> String {
        let claims = EntitlementClaims(
            sub: SubjectClaim(value: subject),
            assets: assets,
            exp: ExpirationClaim(value: Date(timeIntervalSince1970: TimeInterval(now + ttl))),
            iat: IssuedAtClaim(value: Date(timeIntervalSince1970: TimeInterval(now))),
            aud: AudienceClaim(value: [audience])
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
