import StowageCrypto
import Synchronization

/// The two unguessable path prefixes under which one `stowage play` session serves its package on loopback.
///
/// - The entry token goes on the player's command line (`http://127.0.0.1:PORT/ENTRY/master.m3u8`), where other local
///   processes can read it (`/proc/PID/cmdline`). It serves the multivariant playlist once; a second request for it is
///   refused, so a URL copied from a command line cannot be replayed.
/// - The session token is written only into the playlists the server hands out, so only the player ever sees it: every
///   URI the served multivariant playlist names starts with `/TOKEN/`.
///
/// Each is 128 random bits from OpenSSL's generator, as 26 lowercase base32 characters, and compared in constant time.
public struct PlaybackSessionPath: Sendable, Hashable, CustomStringConvertible {
    /// Where a request path points.
    public enum Target: Sendable, Hashable {
        /// Under the entry token: the rest of the path (the multivariant playlist's name, for a valid request).
        case entry(String)
        /// Under the session token: the rest of the path, still percent-encoded.
        case session(String)
        /// Neither.
        case outside
    }

    /// The session token, written only into served playlists.
    public let token: String
    /// The one-time token of the URL given to the player.
    public let entryToken: String

    /// A new pair of random tokens.
    public init() throws {
        token = Self.base32(try SecureRandom.bytes(count: 16))
        entryToken = Self.base32(try SecureRandom.bytes(count: 16))
    }

    /// `/TOKEN/`
    public var description: String { "/\(token)/" }

    /// `/ENTRY/`
    public var entryPrefix: String { "/\(entryToken)/" }

    /// Which prefix a request path lies under, comparing tokens in constant time.
    public func target(of path: String) -> Target {
        guard path.hasPrefix("/") else { return .outside }
        let rest = path.dropFirst()
        guard let slash = rest.firstIndex(of: "/") else { return .outside }
        let candidate = Array(rest[..<slash].utf8)
        let remainder = String(rest[rest.index(after: slash)...])
        if ConstantTime.isEqual(candidate, Array(token.utf8)) { return .session(remainder) }
        if ConstantTime.isEqual(candidate, Array(entryToken.utf8)) { return .entry(remainder) }
        return .outside
    }

    /// Whether a request path lies under the session token.
    public func contains(requestPath path: String) -> Bool {
        if case .session = target(of: path) { return true }
        return false
    }

    private static func base32(_ bytes: [UInt8]) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        var output = ""
        var buffer = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | Int(byte)
            bits += 8
            while bits >= 5 {
                output.append(alphabet[(buffer >> (bits - 5)) & 31])
                bits -= 5
            }
        }
        if bits > 0 { output.append(alphabet[(buffer << (5 - bits)) & 31]) }
        return output
    }
}

/// Who used the entry URL of a session: it serves the multivariant playlist to the first process that asks, and again
/// to that process only (players such as mpv open the URL twice), never to another.
final class EntryLatch: Sendable {
    private enum State {
        case unused
        case claimed(by: LoopbackPeer?)
    }

    private let state = Mutex(State.unused)
    /// The user whose processes may use the URL: the server's own, unless configured otherwise.
    let owner: UInt32

    init(owner: UInt32) {
        self.owner = owner
    }

    /// What ``admit(_:)`` decided.
    enum Claim: Equatable {
        case granted
        /// The peer's socket belongs to another user than `owner` (or could not be traced): refused, and the latch is
        /// left unused for the real player.
        case otherUser
        /// Used already by another process.
        case reused
    }

    /// ``claim(by:)`` for a peer of ``owner`` only: a process of another user, or one that cannot be traced to a user,
    /// is refused without using the URL up.
    func admit(_ peer: LoopbackPeer?) -> Claim {
        guard let peer, peer.uid == owner else { return .otherUser }
        return claim(by: peer) ? .granted : .reused
    }

    /// True for the first claim, and afterwards for the same process (known by its pid); false for anyone else, and
    /// for any second claim when the process could not be told.
    func claim(by peer: LoopbackPeer?) -> Bool {
        state.withLock { state in
            switch state {
            case .unused:
                state = .claimed(by: peer)
                return true
            case .claimed(let first):
                guard let first, let peer, let pid = first.pid else { return false }
                return peer.pid == pid && peer.uid == first.uid
            }
        }
    }
}
