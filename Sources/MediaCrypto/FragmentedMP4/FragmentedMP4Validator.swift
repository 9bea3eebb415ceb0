/// Checks that a fragmented MP4 media segment is well formed: every box fits its parent, each `moof` is followed by
/// an `mdat`, and the samples its `trun` boxes describe exactly fill that `mdat`'s payload, without overlap
/// (ISO/IEC 14496-12 8.8). With the init section, `trex` defaults and encryption boxes (`senc` counts, subsample sums)
/// are checked too.
///
/// ```swift
/// let summary = try FragmentedMP4Validator.validate(decrypted, initSection: clearInit, segment: "seg1.m4s")
///
/// let validation = FragmentedMP4Validator.Stream(initSection: nil, segment: "seg1.m4s")
/// for chunk in chunks { try validation.process(chunk) }
/// let streamed = try validation.finish()
/// ```
public enum FragmentedMP4Validator {
    /// Validates a segment held in memory.
    ///
    /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` naming the first problem,
    ///   ``SegmentCryptoError/limitExceeded(segment:detail:)`` for a `moof` over 16 MiB.
    public static func validate(
        _ bytes: [UInt8],
        initSection: CBCSInitSection? = nil,
        segment: String
    ) throws(SegmentCryptoError) -> FragmentedMP4Summary {
        let stream = Stream(initSection: initSection, segment: segment)
        try stream.process(bytes)
        return try stream.finish()
    }

    /// A validation in progress over a segment arriving in chunks; holds at most one `moof`.
    public final class Stream {
        private let initSection: CBCSInitSection?
        private let segment: String
        private var scanner: TopLevelBoxScanner
        private var summary = FragmentedMP4Summary()
        private var trackIDs: Set<UInt32> = []
        private var pending: MovieFragment?
        private var mediaData: TopLevelBoxScanner.Header?
        private var mediaDataBytes = 0

        /// - Parameters:
        ///   - initSection: the rendition's init section, for `trex` defaults and encryption parameters; `nil` checks
        ///     with what each `tfhd` says.
        ///   - segment: the segment's name, used in errors.
        public init(initSection: CBCSInitSection?, segment: String) {
            self.initSection = initSection
            self.segment = segment
            scanner = TopLevelBoxScanner(segment: segment)
        }

        /// Checks the next chunk.
        public func process(_ chunk: [UInt8]) throws(SegmentCryptoError) {
            // withUnsafeBytes rethrows untyped errors; only SegmentCryptoError can come out of the body.
            do {
                try chunk.withUnsafeBytes { try process($0) }
            } catch let error as SegmentCryptoError {
                throw error
            } catch {
                throw .malformedContainer(segment: segment, detail: "\(error)")
            }
        }

        /// Checks the next chunk.
        public func process(_ chunk: UnsafeRawBufferPointer) throws(SegmentCryptoError) {
            var offset = 0
            while let event = try scanner.next(chunk, offset: &offset) {
                switch event {
                case .header(let header):
                    summary.topLevelBoxes[header.type.description, default: 0] += 1
                    switch header.type {
                    case .moof:
                        if let pending { throw missingMediaData(pending) }
                        try scanner.bufferBox(limit: CBCSFragmentDecryptor.maximumMovieFragmentSize)
                    case .mdat:
                        guard let pending else {
                            throw .malformedContainer(segment: segment, detail: "the mdat at byte \(header.start) has no moof before it")
                        }
                        if let range = pending.dataRange {
                            guard range.lowerBound >= header.payloadStart, header.end.map({ range.upperBound <= $0 }) ?? true else {
                                throw .malformedContainer(
                                    segment: segment,
                                    detail: "the moof at byte \(pending.start) places samples in bytes \(range.lowerBound)..<\(range.upperBound), "
                                        + "outside the payload of the mdat at byte \(header.start)"
                                )
                            }
                        }
                        mediaData = header
                        mediaDataBytes = 0
                    default:
                        break
                    }
                case .box(let header, let bytes):
                    let fragment = try MovieFragment.parse(
                        bytes,
                        at: header.start,
                        initSection: initSection,
                        purpose: initSection == nil ? .layout : .decryption(fallbackIV: [UInt8](repeating: 0, count: 16)),
                        segment: segment
                    )
                    summary.sequenceNumbers.append(fragment.sequenceNumber)
                    summary.sampleCount += fragment.samples.count
                    summary.sampleBytes += fragment.sampleBytes
                    summary.isEncrypted = summary.isEncrypted || !fragment.encryptionBoxOffsets.isEmpty
                    trackIDs.formUnion(fragment.trackFragments.map(\.trackID))
                    pending = fragment
                case .payload(let piece):
                    if mediaData != nil { mediaDataBytes += piece.count }
                case .end:
                    try endMediaData()
                }
            }
        }

        /// Ends the segment and returns what it holds.
        ///
        /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` when the segment stops inside a box or
        ///   a `moof` has no `mdat`.
        public func finish() throws(SegmentCryptoError) -> FragmentedMP4Summary {
            if try scanner.finish() != nil { try endMediaData() }
            if let pending { throw missingMediaData(pending) }
            guard summary.topLevelBoxes["moof"] != nil else {
                throw .malformedContainer(segment: segment, detail: "the segment has no moof")
            }
            summary.trackIDs = trackIDs.sorted()
            return summary
        }

        private func missingMediaData(_ fragment: MovieFragment) -> SegmentCryptoError {
            .malformedContainer(segment: segment, detail: "the moof at byte \(fragment.start) has no mdat")
        }

        private func endMediaData() throws(SegmentCryptoError) {
            guard let header = mediaData, let fragment = pending else { return }
            mediaData = nil
            pending = nil
            // ISO/IEC 14496-12 8.8.8: the runs describe the mdat's samples; here they must fill it exactly.
            guard fragment.sampleBytes == mediaDataBytes else {
                throw .malformedContainer(
                    segment: segment,
                    detail: "the samples of the moof at byte \(fragment.start) add up to \(fragment.sampleBytes) bytes, "
                        + "the mdat at byte \(header.start) holds \(mediaDataBytes)"
                )
            }
            summary.fragmentCount += 1
            summary.mediaDataBytes += mediaDataBytes
        }
    }
}
