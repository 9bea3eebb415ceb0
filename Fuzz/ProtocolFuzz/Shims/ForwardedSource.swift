// Compiled into the fuzz build's KeyServer module only (scripts/fuzz-protocol.sh): the real ForwardedSource lives
// beside Hummingbird's request context and checks addresses with NIO's SocketAddress, which this build leaves out.
// inet_pton accepts the same dotted-quad and IPv6 texts, which is all KeyServerConfiguration.validate asks of it.
import Glibc

enum ForwardedSource {
    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
