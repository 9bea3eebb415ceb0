import COpenSSL

/// Small helpers around libcrypto calls, shared by every type in this module.
enum LibCrypto {
    /// The largest byte count handed to one `EVP_*Update` call, whose length is a C `int`.
    /// A multiple of 16 so that chunking never splits an AES block.
    static let maximumUpdateLength = 1 << 30

    /// Clears this thread's OpenSSL error queue and returns `error`, so a failed call leaves no
    /// stale entries that a later, unrelated call could misreport.
    static func failure(_ error: CryptoError) -> CryptoError {
        ERR_clear_error()
        return error
    }

    /// Throws `error` (after clearing the OpenSSL error queue) unless `result` is OpenSSL's success value, 1.
    static func check(_ result: Int32, else error: CryptoError = .openSSLFailure) throws {
        guard result == 1 else { throw failure(error) }
    }

    /// Feeds `count` bytes through `EVP_CipherUpdate` in `int`-sized chunks and returns the bytes written.
    ///
    /// `output` must have room for `count + 16` bytes; exact overlap (`input == output`) is allowed,
    /// as OpenSSL allows it.
    static func cipherUpdate(
        _ context: OpaquePointer,
        input: UnsafeRawPointer,
        count: Int,
        output: UnsafeMutableRawPointer
    ) throws -> Int {
        var consumed = 0
        var written = 0
        while consumed < count {
            let chunk = min(count - consumed, maximumUpdateLength)
            var chunkWritten: Int32 = 0
            try check(
                EVP_CipherUpdate(
                    context,
                    (output + written).assumingMemoryBound(to: UInt8.self),
                    &chunkWritten,
                    (input + consumed).assumingMemoryBound(to: UInt8.self),
                    Int32(chunk)
                )
            )
            consumed += chunk
            written += Int(chunkWritten)
        }
        return written
    }
}

extension LibCrypto {
    /// Calls `body` with NUL-terminated copies of `strings` that stay valid for the whole call.
    ///
    /// `OSSL_PARAM` keeps the key-name pointer it is given, so the implicit String-to-`char *`
    /// bridging (valid only during one C call) must not be used to build a parameter array.
    static func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>]) throws -> R) rethrows -> R {
        var storage: [CChar] = []
        var offsets: [Int] = []
        for string in strings {
            offsets.append(storage.count)
            storage.append(contentsOf: string.utf8CString)
        }
        return try storage.withUnsafeBufferPointer { buffer in
            try body(offsets.map { buffer.baseAddress! + $0 })
        }
    }
}
