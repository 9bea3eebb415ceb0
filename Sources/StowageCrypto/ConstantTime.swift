import COpenSSL

/// Comparisons whose running time does not depend on where two byte strings differ (`CRYPTO_memcmp`), for secrets
/// compared with untrusted input: session tokens in URLs, authentication codes.
public enum ConstantTime {
    /// Whether `lhs` and `rhs` are the same bytes. The lengths are not secret: strings of different lengths compare
    /// unequal at once.
    public static func isEqual(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
        let left = Array(lhs)
        let right = Array(rhs)
        guard left.count == right.count else { return false }
        guard !left.isEmpty else { return true }
        return left.withUnsafeBytes { l in
            right.withUnsafeBytes { r in CRYPTO_memcmp(l.baseAddress, r.baseAddress, l.count) == 0 }
        }
    }
}
