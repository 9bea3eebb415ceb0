import Foundation
import StowageCore
public import StowageCrypto

/// Keys written into the playlist itself as `data:` URIs (RFC 2397), as some packagers inline AES keys:
/// `#EXT-X-KEY:METHOD=AES-128,URI="data:text/plain;base64,AAECAwQFBgcICQoLDA0ODw=="`.
///
/// Such a URI *is* the key, so it never leaves memory as text: a package names the key by ``reference(for:)`` (a
/// digest that reveals nothing of it), keeps the bytes sealed in the key store like any identity key, and logs, errors
/// and manifests show the reference, never the URI.
///
/// ```swift
/// let key = try InlineKeyURI.decode(uri)          // 16 or 32 bytes
/// let name = InlineKeyURI.reference(for: key, assetId: "movie-1")   // "stowage-inline-key:3f9c..."
/// ```
public enum InlineKeyURI {
    /// The scheme of the references that stand for inline keys in manifests and key stores.
    public static let referenceScheme = "stowage-inline-key"

    /// Whether `uri` is a `data:` URI (any case).
    public static func isInline(_ uri: String) -> Bool {
        uri.utf8.count >= 5 && uri.prefix(5).lowercased() == "data:"
    }

    /// Whether `uri` is a reference made by ``reference(for:)``.
    public static func isReference(_ uri: String) -> Bool {
        uri.hasPrefix(referenceScheme + ":")
    }

    /// The name a package gives an inline key: `stowage-inline-key:` and 32 hex digits of SHA-256 over a label, the
    /// asset ID and the key. The name cannot be turned back into the key, and two assets that carry the same key get
    /// two names, so deleting one (which erases its keys) never takes a key the other cannot fetch again.
    public static func reference(for key: SecretBytes, assetId: String) -> String {
        var hasher = SHA256Hasher()
        hasher.update(Array("stowage inline key\0\(assetId)\0".utf8))
        key.withUnsafeBytes { hasher.update($0) }
        return referenceScheme + ":" + Hex.encode(hasher.finalize().prefix(16))
    }

    /// The key bytes of a `data:` URI: base64 (`;base64,`) or percent-encoded data, of any media type.
    ///
    /// - Parameter allowedLengths: the key lengths the method takes (16 for AES-128, 32 for AES-256).
    /// - Throws: ``KeySessionError`` `invalid_inline_key` naming what is wrong (never the bytes).
    public static func decode(_ uri: String, allowedLengths: [Int] = [16, 32]) throws(KeySessionError) -> SecretBytes {
        guard isInline(uri) else { throw invalid("it is not a data: URI") }
        let body = uri.dropFirst(5)
        guard let comma = body.firstIndex(of: ",") else { throw invalid("it has no comma before its data (RFC 2397)") }
        let header = body[..<comma].split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let payload = String(body[body.index(after: comma)...])
        var bytes: [UInt8]
        if header.last == "base64" {
            // Percent-escapes and whitespace inside base64 data are tolerated, as browsers do.
            let text = (payload.removingPercentEncoding ?? payload).filter { !$0.isWhitespace }
            let padded = text + String(repeating: "=", count: (4 - text.count % 4) % 4)
            guard let data = Data(base64Encoded: padded) else { throw invalid("its base64 data does not decode") }
            bytes = Array(data)
        } else {
            guard let decoded = percentDecoded(payload) else { throw invalid("its percent-encoded data does not decode") }
            bytes = decoded
        }
        defer { bytes.withUnsafeMutableBytes { _ = memset($0.baseAddress!, 0, $0.count) } }
        guard allowedLengths.contains(bytes.count) else {
            throw invalid(
                "it holds \(bytes.count) bytes; this key's method takes \(allowedLengths.map(String.init).joined(separator: " or ")) bytes"
            )
        }
        return SecretBytes(bytes)
    }

    /// RFC 3986 percent-decoding to bytes (the data need not be UTF-8).
    private static func percentDecoded(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        let utf8 = Array(text.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "%") {
                guard index + 2 < utf8.count, let byte = UInt8(String(decoding: utf8[index + 1...index + 2], as: UTF8.self), radix: 16)
                else { return nil }
                out.append(byte)
                index += 3
            } else {
                out.append(utf8[index])
                index += 1
            }
        }
        return out
    }

    private static func invalid(_ reason: String) -> KeySessionError {
        KeySessionError(
            code: .invalidInlineKey,
            message: "the playlist's inline key (a data: URI in EXT-X-KEY) cannot be used: \(reason); ask the content's provider for a fixed playlist"
        )
    }
}
