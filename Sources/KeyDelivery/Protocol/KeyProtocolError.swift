/// The error codes of the key protocol with their HTTP statuses (docs/key-protocol.md, "Errors").
public enum KeyProtocolErrorCode: String, Sendable, Codable, CaseIterable {
    case malformedRequest = "malformed_request"
    case invalidToken = "invalid_token"
    case badDeviceSignature = "bad_device_signature"
    case notEntitled = "not_entitled"
    case deviceLimitReached = "device_limit_reached"
    case renewalNotAllowed = "renewal_not_allowed"
    case unknownAsset = "unknown_asset"
    case unknownKey = "unknown_key"
    case unknownLease = "unknown_lease"
    case replayedRequest = "replayed_request"
    case deviceKeyMismatch = "device_key_mismatch"
    case leaseExpired = "lease_expired"
    case rateLimited = "rate_limited"
    case `internal` = "internal"
    /// Extension (docs/key-protocol-extensions.md): the account already streams on as many devices or tokens as its
    /// policy's `maxStreams` allows.
    case streamLimitReached = "stream_limit_reached"
    /// Extension (docs/key-protocol-extensions.md): the request's `clientTime` is further from the server's clock than
    /// the server allows (5 minutes by default), so it is refused as stale or replayed.
    case clockSkew = "clock_skew"

    /// The HTTP status the protocol pairs with the code.
    public var httpStatus: Int {
        switch self {
        case .malformedRequest, .clockSkew: 400
        case .invalidToken, .badDeviceSignature: 401
        case .notEntitled, .deviceLimitReached, .renewalNotAllowed, .streamLimitReached: 403
        case .unknownAsset, .unknownKey, .unknownLease: 404
        case .replayedRequest, .deviceKeyMismatch: 409
        case .leaseExpired: 410
        case .rateLimited: 429
        case .internal: 500
        }
    }
}

/// The body of every protocol error: `{"error": {"code": "...", "message": "..."}}`.
public struct KeyProtocolErrorBody: Sendable, Codable, Hashable {
    public struct Detail: Sendable, Codable, Hashable {
        public var code: String
        public var message: String
    }

    public var error: Detail

    public init(code: KeyProtocolErrorCode, message: String) {
        self.error = Detail(code: code.rawValue, message: message)
    }
}
