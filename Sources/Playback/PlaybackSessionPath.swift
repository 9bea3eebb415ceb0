import StowageCrypto

/// The unguessable path prefix under which one `stowage play` session serves its package on loopback.
///
/// 128 random bits from OpenSSL's generator, as 26 lowercase base32 characters: another local user or a web page
/// probing 127.0.0.1 cannot guess it, so the decrypted stream is reachable only through the URL Stowage prints.
public struct PlaybackSessionPath: Sendable, Hashable, CustomStringConvertible {
    /// The random component, e.g. `k3q9...`.
    public let token: String

    /// A new random session path.
    public init() throws {
        token = Self.base32(try SecureRandom.bytes(count: 16))
    }

    /// `/TOKEN/`
    public var description: String { "/\(token)/" }

    /// Whether a request path lies under this session.
    public func contains(requestPath path: String) -> Bool {
        path.hasPrefix("/\(token)/")
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
