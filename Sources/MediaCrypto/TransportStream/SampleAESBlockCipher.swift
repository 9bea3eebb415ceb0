import StowageCrypto

/// The AES side of SAMPLE-AES: AES-128-CBC without padding over the 16-byte blocks of one protected block (a NAL
/// unit or an audio frame), with the chain restarted from the segment's IV for every protected block (Apple,
/// "MPEG-2 Stream Encryption Format for HTTP Live Streaming", 2.1 Encryption Overview).
///
/// Every protected block costs one `reset(iv:)` and one OpenSSL call, whatever its number of blocks.
final class SampleAESBlockCipher {
    private let cipher: AESCBCCipher
    private let iv: [UInt8]
    private let segment: String
    /// Where the scattered blocks of a NAL unit are gathered into one contiguous CBC chain.
    private let scratch = TransportStreamBuffer(capacity: 64 * 1024)

    init(key: SecretBytes, iv: [UInt8], direction: AESCBCCipher.Direction, segment: String) throws(SegmentCryptoError) {
        guard key.count == 16 else { throw .invalidKey(segment: segment) }
        guard iv.count == 16 else { throw .invalidIV(segment: segment) }
        do {
            cipher = try AESCBCCipher(key: key, iv: iv, direction: direction, padding: false)
        } catch {
            throw .cryptoFailure(segment: segment)
        }
        self.iv = iv
        self.segment = segment
    }

    /// Encrypts or decrypts `byteCount` contiguous bytes (a multiple of 16) as one chain from the IV.
    func transform(_ bytes: UnsafeMutablePointer<UInt8>, byteCount: Int) throws(SegmentCryptoError) {
        guard byteCount > 0 else { return }
        do {
            try cipher.reset(iv: iv)
            try cipher.transformBlocksInPlace(UnsafeMutableRawBufferPointer(start: bytes, count: byteCount))
        } catch {
            throw .cryptoFailure(segment: segment)
        }
    }

    /// Encrypts or decrypts `blockCount` 16-byte blocks found every `stride` bytes from `first` as one chain from
    /// the IV: gathers them into a scratch buffer, transforms that in one call, scatters them back.
    func transform(blocksAt first: UnsafeMutablePointer<UInt8>, stride: Int, blockCount: Int) throws(SegmentCryptoError) {
        guard blockCount > 0 else { return }
        let byteCount = blockCount * 16
        scratch.reserveCapacity(byteCount)
        let gathered = scratch.base
        for index in 0..<blockCount {
            let block = UnsafeRawPointer(first + index * stride).loadUnaligned(as: SIMD16<UInt8>.self)
            UnsafeMutableRawPointer(gathered + index * 16).storeBytes(of: block, as: SIMD16<UInt8>.self)
        }
        try transform(gathered, byteCount: byteCount)
        for index in 0..<blockCount {
            let block = UnsafeRawPointer(gathered + index * 16).loadUnaligned(as: SIMD16<UInt8>.self)
            UnsafeMutableRawPointer(first + index * stride).storeBytes(of: block, as: SIMD16<UInt8>.self)
        }
    }
}
