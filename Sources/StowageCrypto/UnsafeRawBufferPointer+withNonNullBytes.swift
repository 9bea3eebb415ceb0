extension UnsafeRawBufferPointer {
    /// The start of the buffer as bytes, never nil: an empty buffer may have no base address, and some
    /// OpenSSL entry points reject a null pointer even with a zero length.
    func withNonNullBytes<R>(_ body: (UnsafePointer<UInt8>) throws -> R) rethrows -> R {
        if let base = baseAddress {
            return try body(base.assumingMemoryBound(to: UInt8.self))
        }
        var placeholder: UInt8 = 0
        return try withUnsafePointer(to: &placeholder) { try body($0) }
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` with a base address that is never nil (see `UnsafeRawBufferPointer.withNonNullBytes`).
    func withNonNullBytes<R>(_ body: (UnsafePointer<UInt8>) throws -> R) rethrows -> R {
        try withUnsafeBytes { try $0.withNonNullBytes(body) }
    }
}
