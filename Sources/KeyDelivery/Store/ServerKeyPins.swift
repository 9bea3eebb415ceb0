public import Foundation
import StowageCrypto

/// The key servers' Ed25519 signing keys this device trusts, one per key-server URL, in `key-server-pins.json` (mode
/// 0600, replaced atomically). Each pin carries an HMAC under the key store's state key, so a pin written by hand (to
/// make a forged payload verify) is refused like any other edit.
///
/// Pins are read and written only inside a key store write transaction, which serializes processes.
struct ServerKeyPins: Sendable, Hashable, Codable {
    struct Pin: Sendable, Hashable, Codable {
        var url: String
        /// Base64 of the 32-byte Ed25519 public key.
        var signingKey: String
        var pinnedAt: Int64
        /// Base64 of the HMAC-SHA256 over the pin's canonical fields.
        var mac: String

        var fields: CanonicalFields {
            var fields = CanonicalFields(domain: "stowage-server-pin-v1")
            fields.append(url)
            fields.append(signingKey)
            fields.append(pinnedAt)
            return fields
        }
    }

    static let fileName = "key-server-pins.json"
    static let maximumFileSize = 1 << 20

    var version = 1
    var pins: [Pin] = []

    static func read(at path: String, secrets: KeyStoreSecrets) throws -> ServerKeyPins {
        let bytes: [UInt8]?
        do {
            bytes = try PrivateFile.readSmall(path, limit: maximumFileSize)
        } catch {
            throw KeyStoreError.pinnedKeyDamaged(path: path, detail: error.message)
        }
        guard let bytes else { return ServerKeyPins() }
        guard let pins = try? JSONDecoder().decode(ServerKeyPins.self, from: Data(bytes)) else {
            throw KeyStoreError.pinnedKeyDamaged(path: path, detail: "it is not a pins file")
        }
        for pin in pins.pins where !secrets.isAuthentic(StrictBase64.decode(pin.mac), for: pin.fields) {
            throw KeyStoreError.pinnedKeyDamaged(path: path, detail: "the pin for \(pin.url) was written outside Stowage")
        }
        return pins
    }

    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try PrivateFile.replaceAtomically(path, contents: Array(try encoder.encode(self)) + [0x0a])
    }

    func key(for url: String) -> Ed25519.PublicKey? {
        guard let pin = pins.first(where: { $0.url == url }), let raw = StrictBase64.decode(pin.signingKey, byteCount: 32) else { return nil }
        return try? Ed25519.PublicKey(rawRepresentation: raw)
    }

    mutating func pin(_ key: Ed25519.PublicKey, for url: String, at now: Int64, secrets: KeyStoreSecrets) throws {
        var pin = Pin(url: url, signingKey: StrictBase64.encode(key.rawRepresentation), pinnedAt: now, mac: "")
        pin.mac = StrictBase64.encode(try secrets.authenticationCode(for: pin.fields))
        pins.removeAll { $0.url == url }
        pins.append(pin)
        pins.sort { $0.url < $1.url }
    }

    mutating func remove(_ url: String) -> Bool {
        let count = pins.count
        pins.removeAll { $0.url == url }
        return pins.count != count
    }
}

/// The form of a key-server URL that pins and leases are recorded under: scheme and host in lowercase, the port only
/// when it is not the scheme's default, the path without trailing slashes, no query, fragment or credentials.
public enum KeyServerURL {
    /// The normalized form of `url`, or nil when it is not an absolute http(s) URL with a host.
    public static func normalized(_ url: URL) -> String? {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host?.lowercased(), !host.isEmpty
        else { return nil }
        var text = "\(scheme)://\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host)"
        if let port = components.port, port != (scheme == "https" ? 443 : 80) { text += ":\(port)" }
        var path = components.percentEncodedPath
        while path.hasSuffix("/") { path.removeLast() }
        return text + path
    }

    /// Whether `host` names this machine's loopback interface, where plain HTTP cannot be observed by a network
    /// attacker: `localhost` itself, an address of `127.0.0.0/8` written as four decimal parts, or `::1`.
    ///
    /// Names under `.localhost` are not taken on trust: RFC 6761 reserves them for loopback, but a resolver without
    /// systemd's `myhostname` (Debian's default `hosts: files dns`) sends them to DNS, which may answer any address.
    /// Neither are other spellings of an address (`127.1`, `2130706433`, `::ffff:127.0.0.1`): they are refused rather
    /// than guessed at.
    public static func isLoopback(host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name == "localhost" || name == "::1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            (1...3).contains(part.count) && part.allSatisfy { $0.isASCII && $0.isNumber } && Int(part).map { $0 <= 255 } == true
        }
    }
}
