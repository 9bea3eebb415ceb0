/// A parsed `moof` (ISO/IEC 14496-12 8.8.4): every sample of every `traf` with its position in the segment, and for
/// protected samples the IV and subsamples from `senc`, or from `saiz`/`saio` when `senc` is absent (ISO/IEC 23001-7 7).
struct MovieFragment {
    /// What the parse must extract.
    enum Purpose {
        /// Positions only; encryption boxes are noted, not read (validation, and the encryptor's clear input).
        case layout
        /// Positions plus IVs and subsamples of protected samples; `fallbackIV` serves when neither senc nor tenc has one.
        case decryption(fallbackIV: [UInt8]?)
    }

    /// A bound on samples per moof: each costs memory here, and a 20-byte trun with no per-sample fields may claim 2^32.
    static let maximumSampleCount = 1 << 20

    /// Position of the moof's first byte in the segment.
    let start: Int
    let size: Int
    var sequenceNumber: UInt32 = 0
    var samples: [FragmentSample] = []
    var subsamples: [Subsample] = []
    var ivTable: [UInt8] = []
    var trackFragments: [TrackFragmentLayout] = []
    /// Moof-relative offsets of boxes that describe encryption (senc, saiz, saio, seig groups, pssh).
    var encryptionBoxOffsets: [Int] = []

    var end: Int { start + size }

    /// The samples holding bytes, sorted by position; they never overlap (checked by `parse`).
    private(set) var samplesInStreamOrder: [Int] = []

    /// The byte range the samples cover, `nil` when they are all empty.
    var dataRange: Range<Int>? {
        guard let first = samplesInStreamOrder.first, let last = samplesInStreamOrder.last else { return nil }
        return samples[first].offset..<samples[last].end
    }

    var sampleBytes: Int { samples.reduce(0) { $0 + $1.size } }

    private init(start: Int, size: Int) {
        self.start = start
        self.size = size
    }

    /// Parses a whole `moof` box.
    ///
    /// - Parameters:
    ///   - moof: the box, header included.
    ///   - start: its position in the segment.
    ///   - initSection: the tracks' sample entries and `trex` defaults; `nil` parses positions with what tfhd says.
    static func parse(
        _ moof: [UInt8],
        at start: Int,
        initSection: CBCSInitSection?,
        purpose: Purpose,
        segment: String
    ) throws(SegmentCryptoError) -> MovieFragment {
        var fragment = MovieFragment(start: start, size: moof.count)
        let header = try MP4Box.at(0, in: moof, limit: moof.count, context: "segment", segment: segment)
        var previousDataEnd = start
        var trafIndex = 0
        for child in try MP4Box.children(of: moof, in: header.payload, context: "moof at byte \(start)", segment: segment) {
            switch child.type {
            case .mfhd:
                var reader = MP4Reader(moof, box: child, segment: segment)
                _ = try reader.versionAndFlags()
                fragment.sequenceNumber = try reader.uint32()
            case .traf:
                var parser = TrackFragmentParser(
                    moof: moof,
                    traf: child,
                    index: trafIndex,
                    previousDataEnd: previousDataEnd,
                    initSection: initSection,
                    purpose: purpose,
                    segment: segment
                )
                try parser.parse(into: &fragment)
                previousDataEnd = parser.dataEnd
                trafIndex += 1
            case .pssh:
                fragment.encryptionBoxOffsets.append(child.start)
            default:
                break
            }
        }
        try fragment.sortSamples(segment: segment)
        return fragment
    }

    private mutating func sortSamples(segment: String) throws(SegmentCryptoError) {
        samplesInStreamOrder = samples.indices.filter { samples[$0].size > 0 }
        samplesInStreamOrder.sort { samples[$0].offset < samples[$1].offset }
        for (previous, next) in zip(samplesInStreamOrder, samplesInStreamOrder.dropFirst()) where samples[previous].end > samples[next].offset {
            throw .malformedContainer(
                segment: segment,
                detail:
                    "moof at byte \(start): samples of tracks \(samples[previous].trackID) and \(samples[next].trackID) overlap at byte \(samples[next].offset)"
            )
        }
        if let first = samplesInStreamOrder.first, samples[first].offset < end {
            throw .malformedContainer(
                segment: segment,
                detail: "moof at byte \(start) places sample data at byte \(samples[first].offset), before its own end"
            )
        }
    }

    /// The subsamples of a sample, `[]` for whole-sample encryption.
    func subsamples(of sample: FragmentSample) -> ArraySlice<Subsample> {
        subsamples[Int(sample.subsampleStart)..<Int(sample.subsampleStart + sample.subsampleCount)]
    }
}
