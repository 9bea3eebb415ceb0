import Foundation
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

    /// The rate limiter's name for the source: its IP address (ports vary per connection), or the client's address in
    /// `X-Forwarded-For` when the connection comes from one of `trustedProxies`.
    func sourceKey(_ request: Request, trustedProxies: Set<String>) -> String {
        guard let remoteAddress else { return "source:unknown" }
        let peer = remoteAddress.ipAddress ?? remoteAddress.description
        return "source:" + ForwardedSource.client(peer: peer, forwardedFor: request.headers[values: ForwardedSource.header], trusted: trustedProxies)
    }
}

/// Who a request came from behind load balancers: the address nearest the server in `X-Forwarded-For` that is not a
/// balancer the configuration trusts. Addresses a client wrote itself are further left and never chosen while a trusted
/// balancer appends or sets the header, so a client cannot pick its own rate limit bucket.
enum ForwardedSource {
    static let header = HTTPFields.Element.Name("X-Forwarded-For")!

    static func client(peer: String, forwardedFor values: [String], trusted: Set<String>) -> String {
        guard trusted.contains(peer) else { return peer }
        let hops = values.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        for hop in hops.reversed() where !trusted.contains(hop) {
            return isIPAddress(hop) ? hop : peer
        }
        return peer
    }

    static func isIPAddress(_ text: String) -> Bool {
        (try? SocketAddress(ipAddress: text, port: 0)) != nil
    }
}
