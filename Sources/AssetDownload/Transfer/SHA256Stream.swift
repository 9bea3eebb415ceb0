import Foundation
import StowageCrypto

/// SHA-256 over Data chunks, finishing as lowercase hex.
struct SHA256Stream {
    private var hasher = SHA256Hasher()

    mutating func update(_ data: Data) {
        data.withUnsafeBytes { hasher.update($0) }
    }

    mutating func hex() -> String { Hex.encode(hasher.finalize()) }
}
