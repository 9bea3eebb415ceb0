public import StowageCore

/// The error codes of the key protocol with their HTTP statuses (docs/key-protocol.md, "Errors"): the catalogue's
/// codes (``StowageCore/ErrorCode``) a key server may answer with, and no others.
public struct KeyProtocolErrorCode: RawRepresentable, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// The code in the catalogue.
    public let code: ErrorCode

    private init(_ code: ErrorCode) { self.code = code }

    /// The protocol code spelled `rawValue`, nil when the protocol has no such code.
    public init?(rawValue: String) {
        guard let known = Self.allCases.first(where: { $0.code.rawValue == rawValue }) else { return nil }
        self = known
    }

    /// The protocol code of a catalogue code, nil when the protocol has no such code.
    public init?(code: ErrorCode) { self.init(rawValue: code.rawValue) }

    /// The snake_case code, as on the wire.
    public var rawValue: String { code.rawValue }
    public var description: String { rawValue }

    public static let malformedRequest = Self(.malformedRequest)
    public static let invalidToken = Self(.invalidToken)
    public static let badDeviceSignature = Self(.badDeviceSignature)
    public static let notEntitled = Self(.notEntitled)
    public static let deviceLimitReached = Self(.deviceLimitReached)
    public static let renewalNotAllowed = Self(.renewalNotAllowed)
    public static let unknownAsset = Self(.unknownAsset)
    public static let unknownKey = Self(.unknownKey)
    public static let unknownLease = Self(.unknownLease)
    public static let replayedRequest = Self(.replayedRequest)
    public static let deviceKeyMismatch = Self(.deviceKeyMismatch)
    public static let leaseExpired = Self(.leaseExpired)
    public static let rateLimited = Self(.rateLimited)
    public static let `internal` = Self(.`internal`)
    /// Extension (docs/key-protocol-extensions.md): the account already streams on as many devices or tokens as its
    /// policy's `maxStreams` allows.
    public static let streamLimitReached = Self(.streamLimitReached)
    /// Extension (docs/key-protocol-extensions.md): the request's `clientTime` is further from the server's clock than
    /// the server allows (5 minutes by default), so it is refused as stale or replayed.
    public static let clockSkew = Self(.clockSkew)

    public static let allCases: [KeyProtocolErrorCode] = [
        .malformedRequest, .invalidToken, .badDeviceSignature, .notEntitled, .deviceLimitReached, .renewalNotAllowed, .unknownAsset,
        .unknownKey, .unknownLease, .replayedRequest, .deviceKeyMismatch, .leaseExpired, .rateLimited, .internal, .streamLimitReached,
        .clockSkew,
    ]

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
        default: 500
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
