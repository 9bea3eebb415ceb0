/// The fault the origin injected into one response, as ``OriginRequestLog`` records it.
public enum NetworkFault: String, Sendable, Hashable, Codable, CaseIterable {
    /// Served as asked (possibly slowed by bandwidth and latency, which are not faults).
    case none
    /// Answered 503 Service Unavailable or 429 Too Many Requests instead of the file.
    case error
    /// The connection was reset (TCP RST) part way through the body.
    case reset
    /// The connection was closed part way through the body, short of its declared `Content-Length`.
    case truncate
    /// The body paused once for the configured stall duration, then continued.
    case stall
}
