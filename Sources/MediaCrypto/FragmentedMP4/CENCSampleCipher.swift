import StowageCrypto

/// What the fragment decryptor asks of a scheme's sample cipher: transform, in place, the protected bytes of one
/// movie fragment's samples as windows of its `mdat` pass by.
protocol FragmentSampleCipher: AnyObject {
    /// Starts on a new fragment's samples.
    func load(_ fragment: MovieFragment)
    /// Whether every protected sample of the fragment has been transformed.
    var isComplete: Bool { get }
    /// Transforms what it can of `window`, whose first byte is at position `start`; returns the position up to which
    /// the window is final (bytes from there on are presented again at the start of the next window).
    func transform(_ window: UnsafeMutableRawBufferPointer, at start: Int) throws(SegmentCryptoError) -> Int
}

extension CBCSSampleCipher: FragmentSampleCipher {}

/// Applies `cenc` (ISO/IEC 23001-7 10.1), the scheme HLS calls SAMPLE-AES-CTR: in each protected sample, the
/// protected bytes of its subsamples (the whole sample without subsamples), joined, are one AES-128-CTR stream from
/// the sample's IV (an 8-byte IV is the counter block's high half, its low half starting at 0). Every protected byte
/// is encrypted, a partial last block included, so a window is always final to its end: nothing is carried.
final class CENCSampleCipher: FragmentSampleCipher {
    private let cipher: AESCTRCipher
    private let segment: String
    /// The protected sample, its subsample and the bytes of its protected range done; `chainStarted`: the keystream
    /// is at the sample's IV.
    private var cursor = ProtectedSampleCursor()

    init(key: SecretBytes, segment: String) throws(SegmentCryptoError) {
        guard key.count == 16 else { throw .invalidKey(segment: segment) }
        do {
            cipher = try AESCTRCipher(key: key, iv: [UInt8](repeating: 0, count: 16))
        } catch {
            throw .cryptoFailure(segment: segment)
        }
        self.segment = segment
    }

    func load(_ fragment: MovieFragment) { cursor.load(fragment) }

    var isComplete: Bool { cursor.isComplete }

    func transform(_ window: UnsafeMutableRawBufferPointer, at start: Int) throws(SegmentCryptoError) -> Int {
        let end = start + window.count
        while let sample = cursor.sample, cursor.subsampleStart < end {
            do {
                if !cursor.chainStarted {
                    try cursor.resetIV(of: sample) { try cipher.reset(iv: $0) }
                    cursor.chainStarted = true
                }
            } catch {
                throw .cryptoFailure(segment: segment)
            }
            while cursor.subsampleIndex < cursor.rangeCount(of: sample) {
                let range = cursor.range(of: sample)
                let protectedStart = cursor.subsampleStart + range.clearBytes
                let protectedEnd = protectedStart + range.protectedBytes
                let from = protectedStart + cursor.progress
                guard from >= start else {
                    throw .malformedContainer(segment: segment, detail: "the samples of the moof at byte \(cursor.fragment?.start ?? 0) overlap")
                }
                let upTo = min(protectedEnd, end)
                if upTo > from {
                    let bytes = UnsafeMutableRawBufferPointer(rebasing: window[(from - start)..<(upTo - start)])
                    do {
                        _ = try cipher.update(UnsafeRawBufferPointer(bytes), into: bytes)
                    } catch {
                        throw .cryptoFailure(segment: segment)
                    }
                    cursor.progress += upTo - from
                }
                // The window ends before this subsample's protected range does: the next window goes on from here.
                if protectedStart + cursor.progress < protectedEnd || protectedEnd > end { return end }
                cursor.nextSubsample(at: protectedEnd)
            }
            cursor.nextSample()
        }
        return end
    }
}
