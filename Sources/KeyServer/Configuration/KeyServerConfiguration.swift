/// The key server's settings, read from `config.json` in the data directory (documented in docs/key-server.md).
///
/// ```json
/// {
///   "defaultPolicy": "default",
///   "policies": {"default": {"storageDuration": 2592000, "playbackDuration": 172800, "renewable": true, "maxDevices": 3}},
///   "rateLimit": {"requestsPerSecond": 5, "burst": 20},
///   "sourceRateLimit": {"requestsPerSecond": 50, "burst": 200},
///   "maxRequestBytes": 65536,
///   "tokenAudience": "stowage:3f9a0c...",
///   "maxTokenLifetime": 2592000,
///   "allowWildcardAssets": false
/// }
/// ```
public struct KeyServerConfiguration: Sendable, Codable, Hashable {
    /// The policy of assets added without one.
    public var defaultPolicy: String
    /// Policies by name.
    public var policies: [String: AssetPolicy]
    /// The request rate per account and per device, applied once the entitlement token verified.
    public var rateLimit: RateLimit
    /// The coarse request rate per source address, applied before anything is verified (so rotating device IDs does
    /// not get around ``rateLimit``, and someone else's device ID cannot be locked out by spamming it).
    public var sourceRateLimit: RateLimit
    /// The largest request body accepted; larger bodies get `400 malformed_request`.
    public var maxRequestBytes: Int
    /// The `aud` every entitlement token must carry: this key server's identity (`keyserver init` writes
    /// `stowage:` and the first 16 hex digits of the SHA-256 of its signing key).
    public var tokenAudience: String
    /// The longest lifetime (`exp - iat`, seconds) a token may have.
    public var maxTokenLifetime: Int64
    /// Whether a token may list `["*"]` (every asset) instead of the assets it sells.
    public var allowWildcardAssets: Bool
    /// The addresses of load balancers whose `X-Forwarded-For` names the client for `sourceRateLimit` (the address
    /// nearest the server that is not one of them); empty: the connection's address counts, the header is ignored.
    public var trustedProxies: [String] = []
    /// With a PostgreSQL store: the longest one database operation may take, waiting for a connection included, in
    /// seconds, before the request fails with `503 database_unavailable` (default 10). A fleet whose database is far
    /// or busy may need more.
    public var databaseTimeout: Double = 10
    /// How far a request's `clientTime` may be from the server's clock, in seconds (default 300): a request outside it is
    /// refused with `clock_skew`, so one captured and sent again after its nonce is forgotten is still refused. Nonces
    /// are remembered for 24 hours, or twice this when that is longer.
    public var maxClockSkew: Int64 = 300

    /// A token bucket: `burst` requests at once, refilled at `requestsPerSecond`.
    public struct RateLimit: Sendable, Codable, Hashable {
        public var requestsPerSecond: Double
        public var burst: Int

        public init(requestsPerSecond: Double, burst: Int) {
            self.requestsPerSecond = requestsPerSecond
            self.burst = burst
        }
    }

    public init(
        defaultPolicy: String = "default",
        policies: [String: AssetPolicy] = ["default": .standard],
        rateLimit: RateLimit = RateLimit(requestsPerSecond: 5, burst: 20),
        sourceRateLimit: RateLimit = RateLimit(requestsPerSecond: 50, burst: 200),
        maxRequestBytes: Int = 65_536,
        tokenAudience: String = "stowage-key-server",
        maxTokenLifetime: Int64 = 30 * 86_400,
        allowWildcardAssets: Bool = false
    ) {
        self.defaultPolicy = defaultPolicy
        self.policies = policies
        self.rateLimit = rateLimit
        self.sourceRateLimit = sourceRateLimit
        self.maxRequestBytes = maxRequestBytes
        self.tokenAudience = tokenAudience
        self.maxTokenLifetime = maxTokenLifetime
        self.allowWildcardAssets = allowWildcardAssets
    }

    private enum CodingKeys: String, CodingKey {
        case defaultPolicy, policies, rateLimit, sourceRateLimit, maxRequestBytes, tokenAudience, maxTokenLifetime, allowWildcardAssets
        case trustedProxies, databaseTimeout, maxClockSkew
    }

    /// Everything but `defaultPolicy`, `policies` and `tokenAudience` may be left out (5 requests per second with
    /// bursts of 20 per account and device, 50 with bursts of 200 per address; 64 KiB; tokens of up to 30 days; no
    /// wildcard).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = KeyServerConfiguration()
        defaultPolicy = try container.decode(String.self, forKey: .defaultPolicy)
        policies = try container.decode([String: AssetPolicy].self, forKey: .policies)
        rateLimit = try container.decodeIfPresent(RateLimit.self, forKey: .rateLimit) ?? defaults.rateLimit
        sourceRateLimit = try container.decodeIfPresent(RateLimit.self, forKey: .sourceRateLimit) ?? defaults.sourceRateLimit
        maxRequestBytes = try container.decodeIfPresent(Int.self, forKey: .maxRequestBytes) ?? defaults.maxRequestBytes
        guard let audience = try container.decodeIfPresent(String.self, forKey: .tokenAudience) else {
            throw KeyServerSetupError.invalidConfiguration(
                "tokenAudience is missing: add the identity entitlement tokens must name in `aud`, e.g. \"tokenAudience\": "
                    + "\"stowage:keys.example.com\""
            )
        }
        tokenAudience = audience
        maxTokenLifetime = try container.decodeIfPresent(Int64.self, forKey: .maxTokenLifetime) ?? defaults.maxTokenLifetime
        allowWildcardAssets = try container.decodeIfPresent(Bool.self, forKey: .allowWildcardAssets) ?? false
        trustedProxies = try container.decodeIfPresent([String].self, forKey: .trustedProxies) ?? []
        databaseTimeout = try container.decodeIfPresent(Double.self, forKey: .databaseTimeout) ?? defaults.databaseTimeout
        maxClockSkew = try container.decodeIfPresent(Int64.self, forKey: .maxClockSkew) ?? defaults.maxClockSkew
    }

    /// The policy called `name`, or the default policy when `name` is nil.
    public func policy(named name: String?) -> AssetPolicy? {
        policies[name ?? defaultPolicy]
    }

    /// Checks that the default policy exists and every policy and limit is usable.
    ///
    /// - Throws: ``KeyServerSetupError`` with code `invalid_configuration`.
    public func validate() throws {
        func invalid(_ reason: String) -> KeyServerSetupError { .invalidConfiguration(reason) }
        guard policies[defaultPolicy] != nil else { throw invalid("defaultPolicy \"\(defaultPolicy)\" is not one of the policies") }
        for (name, policy) in policies.sorted(by: { $0.key < $1.key }) {
            if let problem = policy.problem { throw invalid("policy \"\(name)\": \(problem)") }
        }
        for (name, limit) in [("rateLimit", rateLimit), ("sourceRateLimit", sourceRateLimit)] {
            guard limit.requestsPerSecond > 0, limit.burst >= 1 else { throw invalid("\(name) needs requestsPerSecond > 0 and burst >= 1") }
        }
        guard !tokenAudience.isEmpty else { throw invalid("tokenAudience must not be empty") }
        guard maxTokenLifetime > 0 else { throw invalid("maxTokenLifetime must be positive") }
        guard maxRequestBytes >= 1_024 else { throw invalid("maxRequestBytes must be at least 1024") }
        guard databaseTimeout >= 1, databaseTimeout <= 3_600 else { throw invalid("databaseTimeout must be between 1 and 3600 seconds") }
        // At most half the replay window (24 h), so a nonce is remembered for as long as its request's time passes.
        guard maxClockSkew >= 30, maxClockSkew <= 43_200 else { throw invalid("maxClockSkew must be between 30 and 43200 seconds") }
        for address in trustedProxies where !ForwardedSource.isIPAddress(address) {
            throw invalid("trustedProxies: \"\(address)\" is not an IP address (write each balancer's address, e.g. \"10.0.0.5\")")
        }
    }
}
