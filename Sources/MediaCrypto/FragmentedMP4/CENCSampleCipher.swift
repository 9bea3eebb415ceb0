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

    private var fragment: MovieFragment?
    private var order: [Int] = []
    /// Cursor: the protected sample in stream order, its subsample, and the bytes of that subsample's protected range
    /// already transformed.
    private var sampleCursor = 0
    private var subsampleCursor = 0
    private var byteCursor = 0
    /// Position of the current subsample's first byte.
    private var subsampleStart = 0
    /// Whether the keystream has been set to the current sample's IV.
    private var streamStarted = false

    init(key: SecretBytes, segment: String) throws(SegmentCryptoError) {
        guard key.count == 16 else { throw .invalidKey(segment: segment) }
        do {
            cipher = try AESCTRCipher(key: key, iv: [UInt8](repeating: 0, count: 16))
        } catch {
            throw .cryptoFailure(segment: segment)
        }
        self.segment = segment
    }

    func load(_ fragment: MovieFragment) {
        order = fragment.samplesInStreamOrder.filter { fragment.samples[$0].isProtected }
        self.fragment = fragment
        sampleCursor = 0
        subsampleCursor = 0
        byteCursor = 0
        streamStarted = false
        subsampleStart = order.first.map { fragment.samples[$0].offset } ?? 0
    }

    var isComplete: Bool { sampleCursor >= order.count }

    func transform(_ window: UnsafeMutableRawBufferPointer, at start: Int) throws(SegmentCryptoError) -> Int {
        guard let fragment else { return start + window.count }
        let end = start + window.count
        while sampleCursor < order.count {
            let sample = fragment.samples[order[sampleCursor]]
            guard subsampleStart < end else { break }
            let subsamples = fragment.subsamples(of: sample)
            let subsampleCount = max(subsamples.count, 1)
            if !streamStarted {
                let ivStart = Int(sample.ivIndex) * 16
                do {
                    try fragment.ivTable.withUnsafeBytes { try cipher.reset(iv: UnsafeRawBufferPointer(rebasing: $0[ivStart..<(ivStart + 16)])) }
                } catch {
                    throw .cryptoFailure(segment: segment)
                }
                streamStarted = true
            }
            while subsampleCursor < subsampleCount {
                let range =
                    subsamples.isEmpty
                    ? Subsample(clearBytes: 0, protectedBytes: sample.size)
                    : subsamples[subsamples.startIndex + subsampleCursor]
                let protectedStart = subsampleStart + range.clearBytes
                let protectedEnd = protectedStart + range.protectedBytes
                let from = protectedStart + byteCursor
                guard from >= start else {
                    throw .malformedContainer(segment: segment, detail: "the samples of the moof at byte \(fragment.start) overlap")
                }
                let upTo = min(protectedEnd, end)
                if upTo > from {
                    let bytes = UnsafeMutableRawBufferPointer(rebasing: window[(from - start)..<(upTo - start)])
                    do {
                        _ = try cipher.update(UnsafeRawBufferPointer(bytes), into: bytes)
                    } catch {
                        throw .cryptoFailure(segment: segment)
                    }
                    byteCursor += upTo - from
                }
                // The window ends before this subsample's protected range does: the next window goes on from here.
                if protectedStart + byteCursor < protectedEnd || protectedEnd > end { return end }
                subsampleStart = protectedEnd
                subsampleCursor += 1
                byteCursor = 0
            }
            sampleCursor += 1
            subsampleCursor = 0
            streamStarted = false
            if sampleCursor < order.count { subsampleStart = fragment.samples[order[sampleCursor]].offset }
        }
        return end
    }
}
