public import Hummingbird
public import NIOCore

/// The request context of the key server's routes: Hummingbird's core context plus the peer address, which the
/// per-source rate limit counts requests by before anything in them is verified.
public struct KeyServerRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The client's address; nil when the transport has none (in-process tests).
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// The rate limiter's name for the source: its IP address (ports vary per connection).
    var sourceKey: String {
        guard let remoteAddress else { return "source:unknown" }
        return "source:" + (remoteAddress.ipAddress ?? remoteAddress.description)
    }
}
