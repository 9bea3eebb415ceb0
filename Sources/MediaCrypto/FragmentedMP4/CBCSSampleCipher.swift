import StowageCrypto

/// Applies `cbcs` (ISO/IEC 23001-7 10.4) to the samples of one movie fragment as the bytes of its `mdat` pass by in
/// windows, in either direction; decrypts `cbc1` (10.2) and `cens` (10.3) the same way.
///
/// The schemes differ in two things only: the block cipher mode (CBC for `cbcs` and `cbc1`, CTR for `cens`) and how
/// far one chain runs (each subsample from the sample's IV for `cbcs`; the whole sample, across its subsamples, for
/// `cbc1` and `cens`). `cbc1` has no pattern (every whole block), `cens` and `cbcs` take the `tenc` pattern.
///
/// In each subsample's protected range (the whole sample without subsamples) the 16-byte blocks follow the pattern:
/// `crypt` blocks encrypted, `skip` blocks clear, repeated; a pattern of 0:0 (or `skip` 0) encrypts every whole block;
/// a partial block at the end stays clear (ISO/IEC 23001-7 9.6, 10.4.2). The encrypted blocks of one subsample form
/// one CBC chain, restarted with the sample's IV (the constant IV) at the start of every subsample.
///
/// A window holds consecutive bytes of the segment. The cipher transforms, in place, every encrypted block that lies
/// wholly inside it, gathering the blocks of a subsample into scratch memory for one OpenSSL call and scattering them
/// back; it reports how far the window is final, which stops before an encrypted block cut by the window's end. The
/// caller carries those (at most 15) bytes into the next window.
final class CBCSSampleCipher {
    /// The block cipher of a scheme, re-armed with a sample's (or subsample's) IV.
    private enum Chain {
        case cbc(AESCBCCipher)
        case ctr(AESCTRCipher)

        func reset(iv: UnsafeRawBufferPointer) throws {
            switch self {
            case .cbc(let cipher): try cipher.reset(iv: iv)
            case .ctr(let cipher): try cipher.reset(iv: iv)
            }
        }

        func transformInPlace(_ blocks: UnsafeMutableRawBufferPointer) throws {
            switch self {
            case .cbc(let cipher): try cipher.transformBlocksInPlace(blocks)
            case .ctr(let cipher): _ = try cipher.update(UnsafeRawBufferPointer(blocks), into: blocks)
            }
        }
    }

    private let cipher: Chain
    /// Whether each subsample starts its chain from the IV (`cbcs`) or the whole sample is one chain (`cbc1`, `cens`).
    private let chainPerSubsample: Bool
    private let segment: String
    /// Gathered blocks; never more than one window.
    private let scratch: UnsafeMutableRawBufferPointer
    let windowCapacity: Int

    /// The protected sample, its subsample and the next block of that subsample's range; `chainStarted`: the chain
    /// of the current subsample (cbcs) or sample (cbc1, cens) has been started with the IV.
    private var cursor = ProtectedSampleCursor()
    /// Window-relative runs of encrypted bytes gathered for the current subsample.
    private var runs: [(offset: Int, count: Int)] = []

    /// - Parameter scheme: `cbcs` (either direction), `cbc1` or `cens` (decryption).
    init(
        key: SecretBytes,
        direction: AESCBCCipher.Direction,
        windowCapacity: Int,
        scheme: FourCC = .cbcs,
        segment: String
    ) throws(SegmentCryptoError) {
        guard key.count == 16 else { throw .invalidKey(segment: segment) }
        do {
            // cbcs and cbc1 are AES-128-CBC without padding, cens AES-128-CTR (ISO/IEC 23001-7 10.2-10.4); the IV is
            // set per subsample or per sample.
            cipher =
                scheme == .cens
                ? .ctr(try AESCTRCipher(key: key, iv: [UInt8](repeating: 0, count: 16)))
                : .cbc(try AESCBCCipher(key: key, iv: [UInt8](repeating: 0, count: 16), direction: direction, padding: false))
        } catch {
            throw .cryptoFailure(segment: segment)
        }
        chainPerSubsample = scheme == .cbcs
        self.segment = segment
        self.windowCapacity = windowCapacity
        scratch = .allocate(byteCount: windowCapacity, alignment: 16)
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        // Clear media passes through the scratch buffer.
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
        scratch.deallocate()
    }

    /// Starts on a new fragment's samples.
    func load(_ fragment: MovieFragment) { cursor.load(fragment) }

    /// Whether every protected sample of the fragment has been transformed.
    var isComplete: Bool { cursor.isComplete }

    /// Transforms the encrypted blocks lying wholly inside `window`, whose first byte is at position `start`.
    ///
    /// - Returns: the position up to which the window is final: its end, or the start of an encrypted block the
    ///   window cuts. Bytes from there on must be presented again at the start of the next window.
    func transform(_ window: UnsafeMutableRawBufferPointer, at start: Int) throws(SegmentCryptoError) -> Int {
        let end = start + window.count
        while let sample = cursor.sample, sample.offset < end {
            while cursor.subsampleIndex < cursor.rangeCount(of: sample) {
                let range = cursor.range(of: sample)
                let protectedStart = cursor.subsampleStart + range.clearBytes
                let blocks = range.protectedBytes / 16
                let crypt = Int(sample.cryptByteBlock)
                let skip = Int(sample.skipByteBlock)
                // Pattern 0:0, or no skip, encrypts every whole block (ISO/IEC 23001-7 9.6).
                let period = skip == 0 ? blocks : crypt + skip
                let encryptedPerPeriod = skip == 0 ? blocks : crypt
                var block = cursor.progress
                while block < blocks {
                    let phase = block % period
                    if phase >= encryptedPerPeriod {
                        block += period - phase
                        continue
                    }
                    let runEnd = min(block - phase + encryptedPerPeriod, blocks)
                    let byteStart = protectedStart + block * 16
                    if byteStart >= end { break }
                    let available = min(runEnd - block, (end - byteStart) / 16)
                    if available > 0 {
                        runs.append((byteStart - start, available * 16))
                        block += available
                    }
                    if block < runEnd {
                        // The window cuts this block: transform what is gathered, resume here with the next window.
                        cursor.progress = block
                        try flush(window, sample: sample)
                        return protectedStart + block * 16
                    }
                }
                if block < blocks || protectedStart + range.protectedBytes > end {
                    // The window ends inside this subsample on a block boundary or in its clear tail.
                    cursor.progress = block
                    try flush(window, sample: sample)
                    return end
                }
                try flush(window, sample: sample)
                cursor.nextSubsample(at: protectedStart + range.protectedBytes)
                if chainPerSubsample { cursor.chainStarted = false }
            }
            cursor.nextSample()
        }
        return end
    }

    /// Transforms the runs gathered for the current subsample in one OpenSSL call.
    private func flush(_ window: UnsafeMutableRawBufferPointer, sample: FragmentSample) throws(SegmentCryptoError) {
        guard !runs.isEmpty else { return }
        defer { runs.removeAll(keepingCapacity: true) }
        do {
            if !cursor.chainStarted {
                // ISO/IEC 23001-7 10.4.2: every subsample's chain starts from the IV (cbcs); 10.2, 10.3: every sample's.
                try cursor.resetIV(of: sample) { try cipher.reset(iv: $0) }
                cursor.chainStarted = true
            }
            if runs.count == 1 {
                try cipher.transformInPlace(UnsafeMutableRawBufferPointer(rebasing: window[runs[0].offset..<(runs[0].offset + runs[0].count)]))
                return
            }
            var gathered = 0
            for run in runs {
                scratch.baseAddress!.advanced(by: gathered).copyMemory(from: window.baseAddress!.advanced(by: run.offset), byteCount: run.count)
                gathered += run.count
            }
            try cipher.transformInPlace(UnsafeMutableRawBufferPointer(rebasing: scratch[0..<gathered]))
            var scattered = 0
            for run in runs {
                window.baseAddress!.advanced(by: run.offset).copyMemory(from: scratch.baseAddress!.advanced(by: scattered), byteCount: run.count)
                scattered += run.count
            }
        } catch {
            throw .cryptoFailure(segment: segment)
        }
    }
}
