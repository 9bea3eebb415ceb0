public import StowageCore

/// Why a ``KeySession`` operation failed: a protocol error answered by the key server (with its code and message), or a
/// check the client made on the answer (signature, pinned key, echoes).
public struct KeySessionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The stable snake_case code: the server's protocol code (`not_entitled`, `unknown_asset`, ...) for server errors,
    /// else one of the client codes below.
    public let code: ErrorCode
    /// Human text: the server's message for server errors.
    public let message: String
    /// The HTTP status of the answer, when there was one.
    public let httpStatus: Int?
    /// Whether the request may have reached the server and been acted on although no answer came back: the connection
    /// broke or timed out after it was open, or the server said `500 internal`. A connection never opened is not.
    public let answerMayBeLost: Bool

    public init(code: ErrorCode, message: String, httpStatus: Int? = nil, answerMayBeLost: Bool = false) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        self.answerMayBeLost = answerMayBeLost
    }

    public var description: String { "\(code): \(message)" }

    /// The protocol code, when the server answered with one this client knows.
    public var protocolCode: KeyProtocolErrorCode? { KeyProtocolErrorCode(code: code) }

    /// The server answered `{"error": {"code", "message"}}`. A code the protocol does not have (another server's own)
    /// is `unexpected_response`, its code kept in the message.
    public static func server(code: String, message: String, httpStatus: Int) -> Self {
        guard let known = KeyProtocolErrorCode(rawValue: code) else {
            return Self(
                code: .unexpectedResponse,
                message: "the key server answered with the code \(code), which the key protocol does not have: \(message)",
                httpStatus: httpStatus
            )
        }
        return Self(code: known.code, message: message, httpStatus: httpStatus, answerMayBeLost: known == .internal)
    }

    /// The server at `server` answered `request` (`POST /v1/keys`) with something that is neither the expected message
    /// nor a protocol error body: `detail` says what (`no Stowage error in its body`). A 502 or 504 is a proxy that
    /// lost its upstream's answer, which may have acted on the request.
    public static func unexpectedResponse(server: String, request: String, status: Int, detail: String) -> Self {
        Self(
            code: .unexpectedResponse,
            message: "the key server \(server) answered \(request) with HTTP \(status) and \(detail); check that this URL is a "
                + "Stowage key server's (not a proxy's or another service's) and that it runs, then try again",
            httpStatus: status,
            answerMayBeLost: status == 502 || status == 504
        )
    }

    /// The key server could not be reached.
    public static func unreachable(_ detail: String, answerMayBeLost: Bool = false) -> Self {
        Self(
            code: .keyServerUnreachable,
            message:
                "cannot reach the key server: \(detail); check its URL and the network (queued releases stay queued; `stowage keys sync` sends them later)",
            answerMayBeLost: answerMayBeLost
        )
    }

    /// The key server's TLS certificate was refused (``NetworkErrorText/isUntrustedCertificate(_:)``).
    public static func untrustedCertificate(_ serverURL: String, detail: String) -> Self {
        Self(code: .untrustedCertificate, message: "the key server \(serverURL) cannot be trusted: \(detail)")
    }

    /// A key server the user did not configure: advertised by a playlist on another host, or without TLS.
    public static func untrustedKeyServer(_ url: String, reason: String) -> Self {
        Self(
            code: .untrustedKeyServer,
            message: "the playlist names the key server \(url), which \(reason); no request (and no token) was sent to it. If you "
                + "trust it, pass `--trust-key-server \(url)` (or `--key-server \(url)`), or add it with `stowage keys trust \(url)`"
        )
    }

    /// A key server reached over plain HTTP on a network address: the token and the requests could be read or changed.
    public static func insecureKeyServer(_ url: String) -> Self {
        Self(
            code: .insecureKeyServer,
            message: "the key server \(url) uses plain http on a network address; key servers need https (plain http is only "
                + "allowed on loopback, such as the demo's 127.0.0.1); use its https URL"
        )
    }

    /// The signed payload does not verify with the pinned key, or does not decode.
    public static func invalidPayload(_ detail: String) -> Self {
        Self(code: .invalidPayload, message: "the signed payload was refused: \(detail)")
    }

    /// The payload verifies but is not an answer to this request (nonce, asset, device, key IDs, lease).
    public static func payloadMismatch(_ field: String, expected: String, got: String) -> Self {
        Self(code: .payloadMismatch, message: "the payload's \(field) is \(got), expected \(expected)")
    }

    /// The lease is not in the key store, or holds no key material.
    public static func leaseNotStored(_ leaseId: String) -> Self {
        Self(
            code: .leaseNotStored,
            message: "no stored lease \(leaseId) with key material (it was returned, expired or never acquired); acquire the keys again"
        )
    }

    /// A request the client refuses to send.
    public static func invalidRequest(_ detail: String) -> Self {
        Self(code: .invalidRequest, message: detail)
    }
}

// MARK: Playlist keys

extension KeySessionError {
    /// A key line set offers no KEYFORMAT this client supports.
    public static func unsupportedKeyFormat(_ formats: [String]) -> Self {
        Self(
            code: .unsupportedKeyFormat,
            message: "no supported KEYFORMAT among \(formats.joined(separator: ", ")); supported: com.stowage.skd, identity"
        )
    }

    /// A key URI that cannot be used: an skd URI not of the form `skd://ASSET_ID/KEY_ID_HEX`, or an identity URI that
    /// is not http(s).
    public static func malformedKeyURI(_ uri: String, _ detail: String) -> Self {
        Self(code: .malformedKeyURI, message: "key URI \(uri): \(detail)")
    }

    /// An skd URI names an asset other than the one being acquired.
    public static func keyForOtherAsset(_ uri: String, expected: String, got: String) -> Self {
        Self(code: .keyForOtherAsset, message: "key URI \(uri) names asset \(got), expected \(expected)")
    }

    /// The GET of an identity key URI was answered with an HTTP error (after any retries).
    public static func identityKeyFetchFailed(uri: String, status: Int) -> Self {
        Self(
            code: .identityKeyFetchFailed,
            message: "GET \(uri) answered HTTP \(status); check the URL and any headers it needs (token, cookies)",
            httpStatus: status
        )
    }

    /// The identity key URI could not be reached (after any retries).
    public static func identityKeyUnreachable(uri: String, detail: String) -> Self {
        Self(code: .identityKeyUnreachable, message: "cannot fetch \(uri): \(detail); check the network and try again")
    }

    /// The identity key URI answered a body that is not a key (never carries the bytes).
    public static func invalidIdentityKey(uri: String, count: Int, allowed: [Int]) -> Self {
        Self(
            code: .invalidIdentityKey,
            message: "GET \(uri) answered \(count) bytes; a key is \(allowed.map(String.init).joined(separator: " or ")) bytes",
            httpStatus: 200
        )
    }
}

extension KeySessionError: StowageError {}
