public import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
import StowageCore
public import StowageCrypto

/// Fetches standard key URIs (`KEYFORMAT="identity"`): a GET whose body is the raw key, as every HLS player does, and
/// keeps each key sealed in the ``KeyStore``. A key already stored and not expired is returned without a request.
/// Key bytes are never logged nor put in errors.
public struct IdentityKeyFetcher: Sendable {
    public struct Configuration: Sendable {
        /// Extra request headers, e.g. `Authorization`, `Cookie`, sent only to the hosts they are scoped to.
        public var headers: ScopedHeaders
        /// Local lifetime of a stored key, in seconds; nil: no expiry.
        public var lifetimeSeconds: Int64?
        /// Attempts per URI, the first included.
        public var maxAttempts: Int
        /// Delay before the second attempt; doubled for each later one, up to ``maxBackoffSeconds``.
        public var initialBackoffSeconds: Double
        public var maxBackoffSeconds: Double
        /// Cap on an honoured `Retry-After` (seconds).
        public var maxRetryAfterSeconds: Int64
        /// Seconds allowed for a whole transfer (connection, head and body).
        public var timeoutSeconds: Int64
        /// Whether a 32-byte body (AES-256) is accepted as well as 16 bytes.
        public var allowsAES256: Bool

        public init(
            headers: ScopedHeaders = .none,
            lifetimeSeconds: Int64? = nil,
            maxAttempts: Int = 4,
            initialBackoffSeconds: Double = 0.5,
            maxBackoffSeconds: Double = 8,
            maxRetryAfterSeconds: Int64 = 30,
            timeoutSeconds: Int64 = 30,
            allowsAES256: Bool = false
        ) {
            self.headers = headers
            self.lifetimeSeconds = lifetimeSeconds
            self.maxAttempts = max(1, maxAttempts)
            self.initialBackoffSeconds = initialBackoffSeconds
            self.maxBackoffSeconds = maxBackoffSeconds
            self.maxRetryAfterSeconds = maxRetryAfterSeconds
            self.timeoutSeconds = timeoutSeconds
            self.allowsAES256 = allowsAES256
        }
    }

    /// The clients key URIs are fetched with, by host (a proxy, or direct).
    public let routes: HTTPRoutes
    public let store: KeyStore
    public let clock: any Clock
    public let configuration: Configuration

    /// Fetches every key through `http`.
    public init(http: HTTPClient, store: KeyStore, clock: any Clock, configuration: Configuration = Configuration()) {
        self.init(routes: HTTPRoutes(http), store: store, clock: clock, configuration: configuration)
    }

    /// Fetches each key through the client `routes` choose for its URL.
    public init(routes: HTTPRoutes, store: KeyStore, clock: any Clock, configuration: Configuration = Configuration()) {
        self.routes = routes
        self.store = store
        self.clock = clock
        self.configuration = configuration
    }

    /// The key of `url` for `assetId`: from the store when it holds an unexpired key for the URI, else fetched and
    /// stored sealed.
    ///
    /// - Parameter lengths: the key lengths the playlist's METHOD takes (`[16]` for AES-128 and SAMPLE-AES, `[32]` for
    ///   AES-256); nil: 16, or 16 and 32 with ``Configuration/allowsAES256``.
    ///
    /// - Throws: ``KeySessionError`` `identity_key_fetch_failed` (HTTP error), `identity_key_unreachable`,
    ///   `invalid_identity_key` (wrong body length); ``KeyStoreError`` / ``LeaseError`` from the store.
    public func key(for url: URL, assetId: String, lengths: [Int]? = nil) async throws -> (key: SecretBytes, fromCache: Bool) {
        let uri = url.absoluteString
        let allowed = lengths ?? defaultLengths
        do {
            let stored = try store.identityKey(uri: uri, at: clock.now)
            // A key stored for another method of the same URI is fetched again rather than used at the wrong length.
            if allowed.contains(stored.count) { return (stored, true) }
        } catch let error as KeyStoreError
            where [
                KeyStoreError.identityKeyNotFound(uri: uri).code, KeyStoreError.identityKeyExpired(uri: uri, expiresAt: 0).code,
                KeyStoreError.identityKeyDamaged(uri: uri).code,
            ].contains(error.code)
        {
            // Not stored, expired or damaged: fetch it again.
        }
        let key = try await fetch(uri, allowed: allowed)
        let now = clock.now
        try store.storeIdentityKey(key, uri: uri, assetId: assetId, expiresAt: configuration.lifetimeSeconds.map { now + $0 }, at: now)
        return (key, false)
    }

    /// The key of `url` fetched now and kept nowhere (an online rendition played while streaming): nothing is read
    /// from or written to the store.
    ///
    /// - Throws: ``KeySessionError`` `identity_key_fetch_failed`, `identity_key_unreachable`, `invalid_identity_key`.
    public func fetchUnstored(_ url: URL, lengths: [Int]? = nil) async throws -> SecretBytes {
        try await fetch(url.absoluteString, allowed: lengths ?? defaultLengths)
    }

    private var defaultLengths: [Int] { configuration.allowsAES256 ? [16, 32] : [16] }

    /// GETs `uri` with retries; returns the key, checked to be one of the `allowed` lengths.
    func fetch(_ uri: String, allowed: [Int]) async throws -> SecretBytes {
        let backoff = Backoff(initial: .seconds(configuration.initialBackoffSeconds), maximum: .seconds(configuration.maxBackoffSeconds))
        var attempt = 1
        while true {
            let outcome = await attemptFetch(uri)
            var delay = backoff.delay(afterFailures: attempt)
            switch outcome {
            case .body(let bytes):
                guard allowed.contains(bytes.count) else {
                    throw KeySessionError.invalidIdentityKey(uri: uri, count: bytes.count, allowed: allowed)
                }
                return SecretBytes(bytes)
            case .tooLarge:
                throw KeySessionError.invalidIdentityKey(uri: uri, count: Self.maxBodyBytes + 1, allowed: allowed)
            case .status(let status, let retryAfter):
                guard status >= 500 || status == 429, attempt < configuration.maxAttempts else {
                    throw KeySessionError.identityKeyFetchFailed(uri: uri, status: status)
                }
                delay = backoff.delay(
                    afterFailures: attempt,
                    retryAfter: retryAfter.map { .seconds($0) },
                    cap: .seconds(configuration.maxRetryAfterSeconds)
                )
            case .transport(let detail):
                guard attempt < configuration.maxAttempts else { throw KeySessionError.identityKeyUnreachable(uri: uri, detail: detail) }
            }
            try await Task.sleep(for: delay)
            attempt += 1
        }
    }

    static let maxBodyBytes = 64

    /// The URL of an identity key URI this fetcher will GET: an http(s) URL with a host; nil for anything else (a
    /// `file:` URI a hostile playlist names, a relative or malformed one).
    public static func fetchableURL(_ uri: String) -> URL? {
        guard let url = URL(string: uri), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else { return nil }
        return url
    }

    enum Outcome: Sendable {
        case body([UInt8])
        case tooLarge
        case status(Int, retryAfter: Int64?)
        case transport(String)
    }

    struct TransferTimeout: Error, CustomStringConvertible {
        let seconds: Int64
        var description: String { "no complete answer within \(seconds) s" }
    }

    /// One GET, bounded by the whole-transfer timeout.
    private func attemptFetch(_ uri: String) async -> Outcome {
        var request = HTTPClientRequest(url: uri)
        request.method = .GET
        if let url = URL(string: uri) {
            for (name, value) in configuration.headers.for(url) { request.headers.add(name: name, value: value) }
        }
        let timeout = configuration.timeoutSeconds
        let http = routes.client(for: uri)
        do {
            return try await withThrowingTaskGroup(of: Outcome.self) { group in
                group.addTask { [request] in
                    let response = try await http.execute(request, timeout: .seconds(timeout))
                    let status = Int(response.status.code)
                    guard status == 200 else {
                        let retryAfter = response.headers.first(name: "Retry-After").flatMap {
                            Int64($0.trimmingCharacters(in: .whitespaces))
                        }
                        // Drain a little of the body so the connection can be reused; its content is not used.
                        _ = try? await response.body.collect(upTo: 1 << 16)
                        return .status(status, retryAfter: retryAfter)
                    }
                    do {
                        return .body(Array(try await response.body.collect(upTo: Self.maxBodyBytes).readableBytesView))
                    } catch is NIOTooManyBytesError {
                        return .tooLarge
                    }
                }
                group.addTask {
                    try await Task.sleep(nanoseconds: UInt64(timeout) * 1_000_000_000)
                    throw TransferTimeout(seconds: timeout)
                }
                defer { group.cancelAll() }
                guard let first = try await group.next() else { return .transport("no answer") }
                return first
            }
        } catch {
            return .transport(NetworkErrorText.describe(error))
        }
    }
}
