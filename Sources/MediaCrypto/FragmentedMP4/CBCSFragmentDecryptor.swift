public import StowageCrypto

/// Decrypts fragmented MP4 media segments protected with `cbcs` (ISO/IEC 23001-7 10.4), the scheme HLS calls
/// SAMPLE-AES for fMP4, or with `cenc` (10.1), which HLS calls SAMPLE-AES-CTR, streaming with bounded memory.
///
/// Feed a segment (`styp`, `sidx`, `moof` + `mdat` pairs...) in chunks of any size: each `moof` is held whole
/// (at most ``maximumMovieFragmentSize`` bytes) to learn the samples, then its `mdat` is decrypted as its bytes
/// arrive, holding back at most the 15 bytes of an encrypted block cut by a chunk boundary.
///
/// Decryption keeps every byte count, so the output has the input's layout: the `mdat` payload is decrypted in place
/// and the `moof` keeps its size, with its `senc`, `saiz`, `saio`, `seig` sample groups and `pssh` renamed to `free`
/// (ISO/IEC 14496-12 8.1.2 allows free space in any box). Renaming rather than removing them keeps every trun
/// data_offset, tfhd base_data_offset, `sidx` reference size and HLS byte range valid, while no player sees
/// encryption information left next to the clear init section from ``CBCSInitSection/clearInitSection()``.
///
/// ```swift
/// let initSection = try CBCSInitSection.parse(initBytes, segment: "init.mp4")
/// let decryptor = try CBCSFragmentDecryptor(initSection: initSection, key: key, segment: "seg1.m4s")
/// for chunk in chunks { try decryptor.process(chunk) { try output.write($0) } }
/// try decryptor.finish { try output.write($0) }
/// ```
public final class CBCSFragmentDecryptor: SegmentTransform {
    /// A `moof` larger than this is refused: real ones are kilobytes.
    public static let maximumMovieFragmentSize = 16 << 20
    /// The `mdat` is decrypted in windows of at most this many bytes.
    static let windowSize = 256 * 1024

    private let initSection: CBCSInitSection
    private let fallbackIV: [UInt8]?
    private let segment: String
    private var scanner: TopLevelBoxScanner
    private let cipher: any FragmentSampleCipher
    /// The protection scheme of the rendition's tracks (`cbcs` or `cenc`).
    public let scheme: String
    private let window: UnsafeMutableRawBufferPointer
    /// The parsed moof whose mdat has not arrived yet.
    private var pendingFragment: MovieFragment?
    /// Inside the mdat of `pendingFragment`.
    private var isInMediaData = false
    /// Bytes at the start of `window` held back from the previous piece, and the position of the first.
    private var carriedCount = 0
    private var carriedStart = 0

    /// - Parameters:
    ///   - initSection: the parsed init section of the rendition.
    ///   - key: the 16-byte content key (HLS gives one key per rendition, so every protected track uses it).
    ///   - iv: 16 bytes used only when neither `senc` nor `tenc` provides an IV.
    ///   - segment: the segment's name, used in errors.
    /// - Throws: ``SegmentCryptoError/invalidKey(segment:)``, ``SegmentCryptoError/invalidIV(segment:)``, or
    ///   ``SegmentCryptoError/unsupportedStream(segment:detail:)`` for a scheme other than `cbcs` and `cenc` (`cbc1`,
    ///   `cens`), tracks with different schemes or key IDs, or a protected track this parser cannot read.
    public init(initSection: CBCSInitSection, key: SecretBytes, iv: [UInt8]? = nil, segment: String) throws(SegmentCryptoError) {
        guard key.count == 16 else { throw .invalidKey(segment: segment) }
        if let iv, iv.count != 16 { throw .invalidIV(segment: segment) }
        var keyIDs: Set<[UInt8]> = []
        var schemes: Set<FourCC> = []
        for track in initSection.trackDescriptions.values.sorted(by: { $0.trackID < $1.trackID }) {
            for entry in track.entries {
                if entry.isOpaqueEncrypted {
                    throw .unsupportedStream(
                        segment: segment,
                        detail: "track \(track.trackID) has an encrypted '\(entry.format)' entry Stowage cannot read"
                    )
                }
                guard let protection = entry.protection else { continue }
                guard [.cbcs, .cenc, .cbc1, .cens].contains(protection.scheme) else {
                    throw .unsupportedStream(
                        segment: segment,
                        detail:
                            "track \(track.trackID) uses scheme '\(protection.scheme)'; Stowage decrypts the Common Encryption schemes 'cbcs' (HLS SAMPLE-AES), 'cenc' (SAMPLE-AES-CTR), 'cbc1' and 'cens'"
                    )
                }
                guard let defaults = protection.defaults else {
                    throw .malformedContainer(segment: segment, detail: "track \(track.trackID) is '\(protection.scheme)' but has no tenc")
                }
                keyIDs.insert(defaults.keyID)
                schemes.insert(protection.scheme)
            }
        }
        guard keyIDs.count <= 1 else {
            throw .unsupportedStream(segment: segment, detail: "the protected tracks use \(keyIDs.count) key IDs; Stowage has one key per rendition")
        }
        guard schemes.count <= 1 else {
            throw .unsupportedStream(segment: segment, detail: "the protected tracks mix the schemes \(schemes.map(\.description).sorted())")
        }
        let scheme = schemes.first ?? .cbcs
        self.initSection = initSection
        self.fallbackIV = iv
        self.segment = segment
        scanner = TopLevelBoxScanner(segment: segment)
        self.scheme = scheme.description
        cipher =
            scheme == .cenc
            ? try CENCSampleCipher(key: key, segment: segment)
            : try CBCSSampleCipher(key: key, direction: .decrypt, windowCapacity: Self.windowSize + 16, scheme: scheme, segment: segment)
        window = .allocate(byteCount: Self.windowSize + 16, alignment: 16)
        window.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        // Clear media passes through this buffer.
        window.initializeMemory(as: UInt8.self, repeating: 0)
        window.deallocate()
    }

    /// Decrypts the next chunk of the segment.
    public func process(_ chunk: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        var offset = 0
        while let event = try scanner.next(chunk, offset: &offset) {
            switch event {
            case .header(let header):
                try begin(header, emit: emit)
            case .box(let header, var moof):
                try parseMovieFragment(header, &moof)
                try moof.withUnsafeBytes { try emit($0) }
            case .payload(let piece):
                if isInMediaData {
                    try decrypt(piece, emit: emit)
                } else {
                    try emit(piece)
                }
            case .end:
                if isInMediaData { try endMediaData() }
            }
        }
    }

    /// Ends the segment.
    ///
    /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` when the segment stops inside a box or a
    ///   `moof` has no `mdat`.
    public func finish(emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        if try scanner.finish() != nil, isInMediaData {
            try endMediaData()
        }
        if let pendingFragment, pendingFragment.dataRange != nil {
            throw SegmentCryptoError.malformedContainer(segment: segment, detail: "the moof at byte \(pendingFragment.start) has no mdat")
        }
    }

    private func begin(_ header: TopLevelBoxScanner.Header, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch header.type {
        case .moof:
            if let pendingFragment, pendingFragment.dataRange != nil {
                throw SegmentCryptoError.malformedContainer(
                    segment: segment,
                    detail: "the moof at byte \(pendingFragment.start) is followed by another moof instead of its mdat"
                )
            }
            try scanner.bufferBox(limit: Self.maximumMovieFragmentSize)
        case .mdat:
            guard let fragment = pendingFragment else {
                throw SegmentCryptoError.malformedContainer(segment: segment, detail: "the mdat at byte \(header.start) has no moof before it")
            }
            if let range = fragment.dataRange {
                guard range.lowerBound >= header.payloadStart, header.end.map({ range.upperBound <= $0 }) ?? true else {
                    throw SegmentCryptoError.malformedContainer(
                        segment: segment,
                        detail: "the moof at byte \(fragment.start) places samples in bytes \(range.lowerBound)..<\(range.upperBound), "
                            + "outside the payload of the mdat at byte \(header.start) (\(header.payloadStart)..<\(header.end.map(String.init) ?? "end"))"
                    )
                }
            }
            cipher.load(fragment)
            isInMediaData = true
            carriedCount = 0
            carriedStart = header.payloadStart
            try header.raw.withUnsafeBytes { try emit($0) }
        case .moov:
            throw SegmentCryptoError.malformedContainer(
                segment: segment,
                detail: "a moov at byte \(header.start): the init section goes to CBCSInitSection.parse, not into a media segment"
            )
        default:
            try header.raw.withUnsafeBytes { try emit($0) }
        }
    }

    private func parseMovieFragment(_ header: TopLevelBoxScanner.Header, _ moof: inout [UInt8]) throws {
        let fragment = try MovieFragment.parse(
            moof,
            at: header.start,
            initSection: initSection,
            purpose: .decryption(fallbackIV: fallbackIV),
            segment: segment
        )
        for offset in fragment.encryptionBoxOffsets {
            moof.replaceSubrange((offset + 4)..<(offset + 8), with: FourCC.free.bytes)
        }
        pendingFragment = fragment
    }

    /// Decrypts a piece of mdat payload through the window, carrying a cut block into the next piece.
    private func decrypt(_ piece: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        var consumed = 0
        while consumed < piece.count {
            let count = min(piece.count - consumed, Self.windowSize + 16 - carriedCount)
            window.baseAddress!.advanced(by: carriedCount).copyMemory(from: piece.baseAddress!.advanced(by: consumed), byteCount: count)
            consumed += count
            let filled = carriedCount + count
            let ready = try cipher.transform(UnsafeMutableRawBufferPointer(rebasing: window[0..<filled]), at: carriedStart) - carriedStart
            if ready > 0 { try emit(UnsafeRawBufferPointer(rebasing: window[0..<ready])) }
            carriedCount = filled - ready
            if carriedCount > 0 {
                window.baseAddress!.copyMemory(from: window.baseAddress!.advanced(by: ready), byteCount: carriedCount)
            }
            carriedStart += ready
        }
    }

    private func endMediaData() throws {
        isInMediaData = false
        guard carriedCount == 0, cipher.isComplete else {
            throw SegmentCryptoError.malformedContainer(segment: segment, detail: "the mdat ends before the samples its moof describes")
        }
        pendingFragment = nil
    }
}
