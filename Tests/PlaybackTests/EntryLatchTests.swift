import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import Playback

/// The entry URL serves its first user again (mpv opens it twice), and no one else.
struct EntryLatchTests {
    @Test func theFirstProcessMayComeBackOthersMayNot() {
        let latch = EntryLatch(owner: 1000)
        let player = LoopbackPeer(uid: 1000, pid: 4242)
        #expect(latch.claim(by: player))
        #expect(latch.claim(by: player))
        #expect(!latch.claim(by: LoopbackPeer(uid: 1000, pid: 4243)))
        #expect(!latch.claim(by: LoopbackPeer(uid: 1001, pid: 4242)))
        #expect(!latch.claim(by: nil))
        // A first claim whose process could not be told allows no second one.
        let unknown = EntryLatch(owner: 1000)
        #expect(unknown.claim(by: LoopbackPeer(uid: 1000, pid: nil)))
        #expect(!unknown.claim(by: LoopbackPeer(uid: 1000, pid: nil)))
        #expect(!unknown.claim(by: nil))
    }

    /// Another user's process never claims the URL, whether it comes first or after: the real player, of the server's
    /// own user, still gets it. A peer that cannot be traced to a user is another user.
    @Test func onlyTheServersOwnUserClaimsIt() {
        let latch = EntryLatch(owner: 1000)
        #expect(latch.admit(LoopbackPeer(uid: 1001, pid: 7)) == .otherUser)
        #expect(latch.admit(nil) == .otherUser)
        #expect(latch.admit(LoopbackPeer(uid: 1000, pid: 4242)) == .granted)
        #expect(latch.admit(LoopbackPeer(uid: 1000, pid: 4242)) == .granted)
        #expect(latch.admit(LoopbackPeer(uid: 1001, pid: 4242)) == .otherUser)
        #expect(latch.admit(LoopbackPeer(uid: 1000, pid: 4243)) == .reused)
    }

    /// Runs `body` with the ports of a real loopback connection from this process (the server's, the client's), open.
    static func withConnection<T>(_ body: (_ server: Int, _ client: Int) throws -> T) async throws -> T {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        let client = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port).get()
        let result = Result { try body(port, try #require(client.localAddress?.port)) }
        try await client.close()
        try await server.close()
        return try result.get()
    }

    @Test func aLoopbackConnectionIsTracedToThisProcess() async throws {
        // A real connection from this process to a listening socket: /proc tells its uid and pid.
        let (peer, none) = try await Self.withConnection { port, local in
            (
                LoopbackPeer.find(client: ("127.0.0.1", local), server: ("127.0.0.1", port)),
                LoopbackPeer.find(client: ("127.0.0.1", 1), server: ("127.0.0.1", port))
            )
        }
        #expect(peer == LoopbackPeer(uid: getuid(), pid: getpid()))
        #expect(none == nil)
    }

    @Test func theKernelsAnswerAgreesWithItsTables() async throws {
        // NETLINK_SOCK_DIAG's exact lookup and /proc/net/tcp find the same socket, and both find none for a port
        // that holds no connection.
        let (asked, read, none, local, port) = try await Self.withConnection { port, local in
            (
                SocketDiagnosis.lookUp(client: ("127.0.0.1", local), server: ("127.0.0.1", port)),
                LoopbackPeer.findInTables(client: ("127.0.0.1", local), server: ("127.0.0.1", port)),
                SocketDiagnosis.lookUp(client: ("127.0.0.1", 1), server: ("127.0.0.1", port)),
                local, port
            )
        }
        guard case .found(let uid, let inode) = asked else {
            Issue.record("the kernel did not answer NETLINK_SOCK_DIAG here: \(asked)")
            return
        }
        #expect(inode > 0)
        #expect(uid == getuid() && read?.uid == uid && read?.pid == getpid())
        #expect(none == .absent)
        #expect(SocketDiagnosis.lookUp(client: ("::1", local), server: ("::1", port)) == .unavailable)
    }
}
