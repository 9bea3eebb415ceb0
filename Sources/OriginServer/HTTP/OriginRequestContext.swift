import Hummingbird
import NIOCore

/// The request context of the origin: Hummingbird's basics plus the connection, which a reset fault needs.
struct OriginRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The connection the request arrived on.
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
