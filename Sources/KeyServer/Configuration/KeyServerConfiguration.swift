/// The key server's settings, read from `config.json` in the data directory (documented in docs/key-server.md).
///
/// ```json
/// {
///   "defaultPolicy": "default",
///   "policies": {"default": {"storageDuration": 2592000, "playbackDuration": 172800, "renewable": true, "maxDevices": 3}},
///   "rateLimit": {"requestsPerSecond": 5, "burst": 20},
///   "maxRequestBytes": 65536
/// }
/// ```
public struct KeyServerConfiguration: Sendable, Codable, Hashable {
    /// The policy of assets added without one.
    public var defaultPolicy: String
    /// Policies by name.
    public var policies: [String: AssetPolicy]
    /// The per-device (and, for identity keys, per-account) request rate.
    public var rateLimit: RateLimit
    /// The largest request body accepted; larger bodies get `400 malformed_request`.
    public var maxRequestBytes: Int

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
        maxRequestBytes: Int = 65_536
    ) {
        self.defaultPolicy = defaultPolicy
        self.policies = policies
        self.rateLimit = rateLimit
        self.maxRequestBytes = maxRequestBytes
    }

    private enum CodingKeys: String, CodingKey {
        case defaultPolicy, policies, rateLimit, maxRequestBytes
    }

    /// `rateLimit` and `maxRequestBytes` may be left out (5 requests per second with bursts of 20; 64 KiB).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = KeyServerConfiguration()
        defaultPolicy = try container.decode(String.self, forKey: .defaultPolicy)
        policies = try container.decode([String: AssetPolicy].self, forKey: .policies)
        rateLimit = try container.decodeIfPresent(RateLimit.self, forKey: .rateLimit) ?? defaults.rateLimit
        maxRequestBytes = try container.decodeIfPresent(Int.self, forKey: .maxRequestBytes) ?? defaults.maxRequestBytes
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
        guard rateLimit.requestsPerSecond > 0, rateLimit.burst >= 1 else {
            throw invalid("rateLimit needs requestsPerSecond > 0 and burst >= 1")
        }
        guard maxRequestBytes >= 1_024 else { throw invalid("maxRequestBytes must be at least 1024") }
    }
}
