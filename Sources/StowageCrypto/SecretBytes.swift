import COpenSSL

/// Key material that zeroes its memory with `OPENSSL_cleanse` when released.
///
/// Content keys, key-encryption keys, private keys and shared secrets live in a `SecretBytes`
/// rather than an `[UInt8]`, because an array may be copied on write or reallocated, leaving stale
/// copies of the key in freed memory that nothing ever clears. A `SecretBytes` owns exactly one
/// heap buffer, never grows, and scrubs it in `deinit`.
///
/// It is immutable after `init`, compares in constant time, and its `description` reveals only the
/// length (`SecretBytes(16 bytes)`), so keys do not end up in logs by accident.
///
/// ```swift
/// let contentKey = try SecretBytes.random(count: 16)
/// let sameKey = SecretBytes(Hex.decode("000102030405060708090a0b0c0d0e0f")!)
/// ```
public final class SecretBytes: @unchecked Sendable {
    // @unchecked Sendable: `storage` is written only inside `init`, before `self` can escape, and
    // only read afterwards; it is freed in `deinit`, which runs when no reference remains. Shared
    // read-only memory is safe to use from any number of threads.
    private let storage: UnsafeMutableRawBufferPointer

    /// Copies `bytes` into a new zeroizing buffer.
    ///
    /// The source collection is not cleared; if it held a secret, prefer producing the key directly
    /// into ``init(count:initializer:)``.
    public init(_ bytes: some Collection<UInt8>) {
        storage = Self.allocate(count: bytes.count)
        _ = storage.initializeMemory(as: UInt8.self, fromContentsOf: bytes)
    }

    /// Allocates `count` zeroed bytes and lets `initializer` write the secret in place, so the secret
    /// never exists in a temporary buffer.
    ///
    /// - Parameters:
    ///   - count: The number of bytes; must not be negative.
    ///   - initializer: Writes the secret into the buffer. If it throws, the buffer is cleansed and
    ///     freed and the error is rethrown.
    public init(count: Int, initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        precondition(count >= 0, "SecretBytes count must not be negative")
        let buffer = Self.allocate(count: count)
        do {
            try initializer(buffer)
        } catch {
            Self.release(buffer)
            throw error
        }
        storage = buffer
    }

    /// `count` bytes from OpenSSL's CSPRNG (`RAND_bytes`), written straight into the secret buffer.
    ///
    /// - Throws: ``CryptoError/randomFailure`` if the generator fails or `count` is negative.
    public static func random(count: Int) throws -> SecretBytes {
        guard count >= 0 else { throw CryptoError.randomFailure }
        return try SecretBytes(count: count) { buffer in
            try SecureRandom.fill(buffer)
        }
    }

    deinit {
        Self.release(storage)
    }

    /// The number of bytes held.
    public var count: Int { storage.count }

    /// Calls `body` with read access to the secret bytes.
    ///
    /// Do not let the pointer escape `body`, and do not copy the bytes into storage that outlives the call.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage))
    }

    private static func allocate(count: Int) -> UnsafeMutableRawBufferPointer {
        // Bound to UInt8 so the bytes may be handed to C as `unsigned char *`.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        return buffer
    }

    private static func release(_ buffer: UnsafeMutableRawBufferPointer) {
        // OPENSSL_cleanse is written so the compiler cannot elide it as a dead store.
        if let base = buffer.baseAddress {
            OPENSSL_cleanse(base, buffer.count)
        }
        buffer.deallocate()
    }
}

extension SecretBytes: Equatable {
    /// Compares the bytes in constant time (`CRYPTO_memcmp`) so equality checks leak no timing
    /// information about where two keys differ. Lengths are not secret and are compared first.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        guard lhs.count > 0 else { return true }
        return lhs.withUnsafeBytes { left in
            rhs.withUnsafeBytes { right in
                CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
            }
        }
    }
}

extension SecretBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Only the length, never the bytes: `SecretBytes(16 bytes)`.
    public var description: String { "SecretBytes(\(count) bytes)" }

    /// Same as ``description``: debug output must not reveal key material either.
    public var debugDescription: String { description }

    /// A mirror without children, so `dump` and reflection-based loggers see no bytes or pointers.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .class) }
}
