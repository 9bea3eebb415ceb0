import COpenSSL

/// SHA-256 (FIPS 180-4 section 6.2), streaming, for segment checksums and content hashes.
///
/// A value type: copying a hasher copies its state (copy on write over one `EVP_MD_CTX`), so a
/// copy can be finalized for an intermediate digest while the original keeps hashing.
///
/// ```swift
/// var hasher = SHA256Hasher()
/// for chunk in body { hasher.update(chunk) }
/// let digest = hasher.finalize()
/// ```
public struct SHA256Hasher {
    /// Owns the OpenSSL digest context so that the struct can be a value.
    private final class Context {
        let pointer: OpaquePointer

        init() {
            // Allocation and SHA-256 initialization fail only when memory is exhausted.
            guard let pointer = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed: out of memory") }
            self.pointer = pointer
            restart()
        }

        init(copying other: Context) {
            guard let pointer = EVP_MD_CTX_new(), EVP_MD_CTX_copy_ex(pointer, other.pointer) == 1 else {
                fatalError("EVP_MD_CTX_copy_ex failed: out of memory")
            }
            self.pointer = pointer
        }

        deinit {
            EVP_MD_CTX_free(pointer)
        }

        func restart() {
            guard EVP_DigestInit_ex(pointer, EVP_sha256(), nil) == 1 else { fatalError("EVP_DigestInit_ex(SHA-256) failed") }
        }
    }

    /// SHA-256's digest length in bytes.
    public static let byteCount = 32

    private var context: Context

    /// Creates a hasher with nothing hashed yet.
    public init() {
        context = Context()
    }

    /// Hashes `bytes` after everything hashed so far.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        makeUnique()
        // EVP_DigestUpdate on an initialized SHA-256 context cannot fail.
        guard EVP_DigestUpdate(context.pointer, base, bytes.count) == 1 else { fatalError("EVP_DigestUpdate failed") }
    }

    /// Hashes `bytes` after everything hashed so far.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Returns the 32-byte digest of everything hashed, and starts the hasher over so it can be reused.
    public mutating func finalize() -> [UInt8] {
        makeUnique()
        var digest = [UInt8](repeating: 0, count: Self.byteCount)
        var length: UInt32 = 0
        let result = digest.withUnsafeMutableBytes { bytes in
            EVP_DigestFinal_ex(context.pointer, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), &length)
        }
        guard result == 1, length == Self.byteCount else { fatalError("EVP_DigestFinal_ex failed") }
        context.restart()
        return digest
    }

    /// The SHA-256 digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        return hasher.finalize()
    }

    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&context) {
            context = Context(copying: context)
        }
    }
}
