import StowageCrypto

/// Parses one `traf` (ISO/IEC 14496-12 8.8.6) into the samples of a ``MovieFragment``.
struct TrackFragmentParser {
    private let moof: [UInt8]
    private let traf: MP4Box
    private let index: Int
    private let previousDataEnd: Int
    private let initSection: CBCSInitSection?
    private let purpose: MovieFragment.Purpose
    private let segment: String

    /// Position just past this traf's last sample, the data base of a next traf with neither base flag.
    private(set) var dataEnd = 0

    /// Per-sample encryption parameters while parsing: tenc defaults, maybe replaced by a seig group entry.
    private var parameters: [EncryptionParameters?] = []

    init(
        moof: [UInt8],
        traf: MP4Box,
        index: Int,
        previousDataEnd: Int,
        initSection: CBCSInitSection?,
        purpose: MovieFragment.Purpose,
        segment: String
    ) {
        self.moof = moof
        self.traf = traf
        self.index = index
        self.previousDataEnd = previousDataEnd
        self.initSection = initSection
        self.purpose = purpose
        self.segment = segment
    }

    private func fail(_ detail: String) -> SegmentCryptoError {
        .malformedContainer(segment: segment, detail: "traf at byte \(traf.start) of the moof: \(detail)")
    }

    /// tfhd (ISO/IEC 14496-12 8.8.7).
    private struct Header {
        var trackID: UInt32
        var baseDataOffset: Int?
        var baseDataOffsetField: Int?
        var sampleDescriptionIndex: UInt32?
        var defaultSampleSize: UInt32?
        var defaultBaseIsMoof: Bool
    }

    mutating func parse(into fragment: inout MovieFragment) throws(SegmentCryptoError) {
        let children = try MP4Box.children(of: moof, in: traf.payload, context: "traf at byte \(traf.start)", segment: segment)
        let headers = children.filter { $0.type == .tfhd }
        guard headers.count == 1 else { throw fail("\(headers.count) tfhd boxes, must be exactly one") }
        let header = try parseHeader(headers[0])

        var track: TrackDescription?
        var entry: SampleEntryDescription?
        if let initSection {
            guard let described = initSection.trackDescriptions[header.trackID] else {
                throw fail("track \(header.trackID) is not declared by the init section")
            }
            track = described
            // ISO/IEC 14496-12 8.8.7: the tfhd index overrides trex's default_sample_description_index.
            let descriptionIndex = Int(header.sampleDescriptionIndex ?? described.defaultSampleDescriptionIndex)
            guard descriptionIndex >= 1, descriptionIndex <= described.entries.count else {
                throw fail("sample description index \(descriptionIndex), the track has \(described.entries.count) sample entries")
            }
            entry = described.entries[descriptionIndex - 1]
        }

        // ISO/IEC 14496-12 8.8.7.1: the data base is base_data_offset when present; else the moof's first byte when
        // default-base-is-moof is set or for the first traf; else the end of the previous traf's data.
        let baseIsMoof = header.baseDataOffset == nil && (header.defaultBaseIsMoof || index == 0)
        let dataBase = header.baseDataOffset ?? (baseIsMoof ? fragment.start : previousDataEnd)
        var layout = TrackFragmentLayout(
            traf: traf,
            trackID: header.trackID,
            baseDataOffset: header.baseDataOffsetField.map { ($0, header.baseDataOffset ?? 0) },
            samples: fragment.samples.count..<fragment.samples.count,
            entry: entry
        )

        let runs = children.filter { $0.type == .trun }
        var nextPosition = dataBase
        for run in runs {
            nextPosition = try parseRun(
                run,
                dataBase: dataBase,
                continuing: nextPosition,
                defaultSize: header.defaultSampleSize ?? track?.defaultSampleSize,
                trackID: header.trackID,
                layout: &layout,
                fragment: &fragment
            )
        }
        dataEnd = nextPosition
        layout.samples = layout.samples.lowerBound..<fragment.samples.count

        for child in children where child.type == .senc || isCommonEncryptionAuxiliaryInformation(child) {
            layout.hasSampleEncryptionBoxes = true
            fragment.encryptionBoxOffsets.append(child.start)
        }
        for child in children where isSampleEncryptionGroup(child) {
            fragment.encryptionBoxOffsets.append(child.start)
        }
        fragment.trackFragments.append(layout)

        guard case .decryption(let fallbackIV) = purpose, let protection = entry?.protection else { return }
        guard let defaults = protection.defaults else {
            throw .unsupportedStream(segment: segment, detail: "track \(header.trackID) uses scheme '\(protection.scheme)' without a tenc box")
        }
        let sampleCount = layout.samples.count
        parameters = Array(repeating: defaults, count: sampleCount)
        try applySampleGroups(children, defaults: defaults, trackID: header.trackID)
        try readAuxiliaryInformation(children, header: header, layout: layout, fallbackIV: fallbackIV, fragment: &fragment)
    }

    private func parseHeader(_ box: MP4Box) throws(SegmentCryptoError) -> Header {
        var reader = MP4Reader(moof, box: box, segment: segment)
        let (_, flags) = try reader.versionAndFlags()
        var header = Header(trackID: try reader.uint32(), defaultBaseIsMoof: flags & 0x02_0000 != 0)
        if flags & 0x01 != 0 {
            header.baseDataOffsetField = reader.position
            let base = try reader.uint64()
            // Positions are counted from the segment's first byte; a base past 2^62 cannot be in any segment.
            guard base < 1 << 62 else { throw reader.fail("base_data_offset \(base) is beyond any segment") }
            header.baseDataOffset = Int(base)
        }
        if flags & 0x02 != 0 { header.sampleDescriptionIndex = try reader.uint32() }
        if flags & 0x08 != 0 { _ = try reader.uint32() }
        if flags & 0x10 != 0 { header.defaultSampleSize = try reader.uint32() }
        if flags & 0x20 != 0 { _ = try reader.uint32() }
        return header
    }

    /// trun (ISO/IEC 14496-12 8.8.8); returns the position just past the run's data.
    private func parseRun(
        _ box: MP4Box,
        dataBase: Int,
        continuing: Int,
        defaultSize: UInt32?,
        trackID: UInt32,
        layout: inout TrackFragmentLayout,
        fragment: inout MovieFragment
    ) throws(SegmentCryptoError) -> Int {
        var reader = MP4Reader(moof, box: box, segment: segment)
        let (_, flags) = try reader.versionAndFlags()
        let count = Int(try reader.uint32())
        var position = continuing
        if flags & 0x01 != 0 {
            // A run without data_offset continues where the previous run of the traf ended (8.8.8.1).
            layout.dataOffsets.append((reader.position, dataBase))
            let dataOffset = Int(Int32(bitPattern: try reader.uint32()))
            position = dataBase + dataOffset
        }
        if flags & 0x04 != 0 { try reader.skip(4) }
        let hasDuration = flags & 0x100 != 0
        let hasSize = flags & 0x200 != 0
        let hasFlags = flags & 0x400 != 0
        let hasCompositionOffset = flags & 0x800 != 0
        let entrySize = 4 * [hasDuration, hasSize, hasFlags, hasCompositionOffset].filter { $0 }.count
        guard count <= MovieFragment.maximumSampleCount - fragment.samples.count else {
            throw .limitExceeded(
                segment: segment,
                detail: "moof at byte \(fragment.start) describes more than \(MovieFragment.maximumSampleCount) samples"
            )
        }
        guard entrySize == 0 || count <= reader.remaining / entrySize else {
            throw reader.fail("sample_count \(count) needs \(count * entrySize) bytes of entries, the box has \(reader.remaining)")
        }
        guard hasSize || defaultSize != nil else {
            throw reader.fail("the sample sizes are unknown: no size in trun, tfhd or trex")
        }
        guard position >= 0 else { throw reader.fail("data_offset places samples before the segment's start") }
        fragment.samples.reserveCapacity(fragment.samples.count + count)
        for _ in 0..<count {
            if hasDuration { try reader.skip(4) }
            let size = Int(hasSize ? try reader.uint32() : defaultSize ?? 0)
            if hasFlags { try reader.skip(4) }
            if hasCompositionOffset { try reader.skip(4) }
            fragment.samples.append(FragmentSample(offset: position, size: size, trackID: trackID))
            position += size
        }
        guard reader.remaining == 0 else { throw reader.fail("\(reader.remaining) bytes follow the \(count) sample entries") }
        return position
    }

    /// Whether `box` is an sbgp or sgpd of grouping type `seig` (ISO/IEC 23001-7 6).
    private func isSampleEncryptionGroup(_ box: MP4Box) -> Bool {
        guard box.type == .sbgp || box.type == .sgpd, box.payload.count >= 8 else { return false }
        return FourCC(rawValue: moof.mp4UInt32(at: box.payload.lowerBound + 4)) == .seig
    }

    /// Whether `box` is a saiz or saio for Common Encryption: without aux_info_type, or with the scheme as type
    /// (ISO/IEC 14496-12 8.7.8.3; ISO/IEC 23001-7 7.1). Other auxiliary information is none of our business.
    private func isCommonEncryptionAuxiliaryInformation(_ box: MP4Box) -> Bool {
        guard box.type == .saiz || box.type == .saio, box.payload.count >= 4 else { return false }
        guard moof.mp4UInt32(at: box.payload.lowerBound) & 0x01 != 0 else { return true }
        guard box.payload.count >= 8 else { return false }
        return [.cenc, .cbcs, .cens, .cbc1].contains(FourCC(rawValue: moof.mp4UInt32(at: box.payload.lowerBound + 4)))
    }

    /// Applies `seig` sample groups (ISO/IEC 23001-7 6, ISO/IEC 14496-12 8.9): a group entry replaces the tenc
    /// defaults for the samples mapped to it, e.g. to leave some clear.
    private mutating func applySampleGroups(_ children: [MP4Box], defaults: EncryptionParameters, trackID: UInt32) throws(SegmentCryptoError) {
        var groupEntries: [EncryptionParameters] = []
        for box in children where box.type == .sgpd {
            guard isSampleEncryptionGroup(box) else { continue }
            // ISO/IEC 14496-12 8.9.3: version 1 gives a default_length, 0 for per-entry lengths.
            var reader = MP4Reader(moof, box: box, segment: segment)
            let (version, _) = try reader.versionAndFlags()
            _ = try reader.uint32()
            var defaultLength: UInt32 = 0
            if version == 1 { defaultLength = try reader.uint32() }
            if version >= 2 { _ = try reader.uint32() }
            let count = Int(try reader.uint32())
            guard count <= reader.remaining / 20 else { throw reader.fail("entry_count \(count) does not fit the box") }
            for _ in 0..<count {
                var length: Int?
                if version == 1 { length = defaultLength == 0 ? Int(try reader.uint32()) : Int(defaultLength) }
                let start = reader.position
                groupEntries.append(try EncryptionParameters.read(from: &reader))
                // An entry longer than the seig fields keeps its extra bytes to itself.
                if let length {
                    guard reader.position - start <= length else { throw reader.fail("a seig entry is longer than its \(length) bytes") }
                    try reader.skip(length - (reader.position - start))
                }
            }
        }
        for box in children where box.type == .sbgp {
            guard isSampleEncryptionGroup(box) else { continue }
            var reader = MP4Reader(moof, box: box, segment: segment)
            let (version, _) = try reader.versionAndFlags()
            _ = try reader.uint32()
            if version == 1 { _ = try reader.uint32() }
            let count = Int(try reader.uint32())
            guard count <= reader.remaining / 8 else { throw reader.fail("entry_count \(count) does not fit the box") }
            var sample = 0
            for _ in 0..<count {
                let run = Int(try reader.uint32())
                let groupIndex = try reader.uint32()
                guard run <= parameters.count - sample else { throw reader.fail("maps more samples than the traf has") }
                var replacement: EncryptionParameters? = defaults
                if groupIndex > 0x10000 {
                    let local = Int(groupIndex - 0x10001)
                    guard local < groupEntries.count else { throw reader.fail("group_description_index \(groupIndex) has no sgpd entry") }
                    replacement = groupEntries[local]
                } else if groupIndex > 0 {
                    throw .unsupportedStream(segment: segment, detail: "track \(trackID) uses seig sample groups described in the moov")
                }
                if let replacement, replacement.isProtected, replacement.keyID != defaults.keyID {
                    throw .unsupportedStream(
                        segment: segment,
                        detail:
                            "track \(trackID) switches to key ID \(Hex.encode(replacement.keyID)) in a sample group; Stowage has one key per rendition"
                    )
                }
                for index in sample..<(sample + run) { parameters[index] = replacement }
                sample += run
            }
        }
    }

    /// Reads the IVs and subsamples: from senc (ISO/IEC 23001-7 7.2), else from the sample auxiliary information that
    /// saiz and saio locate (ISO/IEC 14496-12 8.7.8, 8.7.9; ISO/IEC 23001-7 7.1), which must lie inside the moof.
    private mutating func readAuxiliaryInformation(
        _ children: [MP4Box],
        header: Header,
        layout: TrackFragmentLayout,
        fallbackIV: [UInt8]?,
        fragment: inout MovieFragment
    ) throws(SegmentCryptoError) {
        let firstSample = layout.samples.lowerBound
        let sampleCount = layout.samples.count
        var constantIVIndex: [[UInt8]: Int32] = [:]

        // Every sample gets its parameters; protected ones also an IV.
        func assign(_ sampleIndex: Int, iv perSampleIV: [UInt8]?, subsamples: [Subsample]?) throws(SegmentCryptoError) {
            guard let parameters = parameters[sampleIndex - firstSample], parameters.isProtected else { return }
            var sample = fragment.samples[sampleIndex]
            guard !(parameters.cryptByteBlock == 0 && parameters.skipByteBlock > 0) else {
                throw .unsupportedStream(
                    segment: segment,
                    detail: "track \(sample.trackID) has pattern 0:\(parameters.skipByteBlock), which encrypts nothing"
                )
            }
            sample.isProtected = true
            sample.cryptByteBlock = UInt8(parameters.cryptByteBlock)
            sample.skipByteBlock = UInt8(parameters.skipByteBlock)
            if let perSampleIV, !perSampleIV.isEmpty {
                // ISO/IEC 23001-7 9.1: an 8-byte IV fills the first half of the 16-byte IV.
                sample.ivIndex = Int32(fragment.ivTable.count / 16)
                fragment.ivTable += perSampleIV + [UInt8](repeating: 0, count: 16 - perSampleIV.count)
            } else {
                guard let iv = parameters.constantIV ?? fallbackIV else { throw .invalidIV(segment: segment) }
                if let known = constantIVIndex[iv] {
                    sample.ivIndex = known
                } else {
                    sample.ivIndex = Int32(fragment.ivTable.count / 16)
                    constantIVIndex[iv] = sample.ivIndex
                    fragment.ivTable += iv
                }
            }
            if let subsamples, !subsamples.isEmpty {
                let total = subsamples.reduce(0) { $0 + $1.clearBytes + $1.protectedBytes }
                guard total == sample.size else {
                    throw fail("the subsamples of a sample of track \(sample.trackID) add up to \(total) bytes, the sample has \(sample.size)")
                }
                sample.subsampleStart = Int32(fragment.subsamples.count)
                sample.subsampleCount = Int32(subsamples.count)
                fragment.subsamples += subsamples
            }
            fragment.samples[sampleIndex] = sample
        }

        if let senc = children.first(where: { $0.type == .senc }) {
            var reader = MP4Reader(moof, box: senc, segment: segment)
            let (_, flags) = try reader.versionAndFlags()
            let count = Int(try reader.uint32())
            guard count == sampleCount else { throw reader.fail("sample_count \(count), the trun boxes describe \(sampleCount) samples") }
            for sample in 0..<sampleCount {
                let (iv, subsamples) = try readEntry(&reader, sample: sample, withSubsamples: flags & 0x02 != 0)
                try assign(firstSample + sample, iv: iv, subsamples: subsamples)
            }
            guard reader.remaining == 0 else { throw reader.fail("\(reader.remaining) bytes follow the \(count) entries") }
            return
        }

        let sizes = children.first { $0.type == .saiz && isCommonEncryptionAuxiliaryInformation($0) }
        let offsets = children.first { $0.type == .saio && isCommonEncryptionAuxiliaryInformation($0) }
        guard let sizes, let offsets else {
            // Without auxiliary information a sample has no IV of its own and no subsamples: that is only valid with a
            // constant IV (ISO/IEC 23001-7 7.1).
            for sample in 0..<sampleCount {
                if let parameters = parameters[sample], parameters.isProtected, parameters.perSampleIVSize > 0 {
                    throw fail("track \(header.trackID) has per-sample IVs but no senc, saiz or saio")
                }
                try assign(firstSample + sample, iv: nil, subsamples: nil)
            }
            return
        }

        let entries = try auxiliaryInformation(
            sizes: sizes,
            offsets: offsets,
            children: children,
            header: header,
            sampleCount: sampleCount,
            fragmentStart: fragment.start
        )
        for (sample, (position, infoSize)) in entries.enumerated() {
            let local = position - fragment.start
            guard local >= 0, local <= moof.count - infoSize else {
                throw .unsupportedStream(
                    segment: segment,
                    detail: "track \(header.trackID): sample auxiliary information at byte \(position) lies outside the moof"
                )
            }
            var reader = MP4Reader(
                moof,
                range: local..<(local + infoSize),
                context: "sample auxiliary information at byte \(position)",
                segment: segment
            )
            let ivSize = parameters[sample]?.isProtected == true ? parameters[sample]?.perSampleIVSize ?? 0 : 0
            // ISO/IEC 23001-7 7.1: subsample information follows the IV when the entry is longer than the IV.
            let (iv, subsamples) = try readEntry(&reader, sample: sample, withSubsamples: infoSize > ivSize)
            guard reader.remaining == 0 else { throw reader.fail("\(reader.remaining) bytes left over") }
            try assign(firstSample + sample, iv: iv, subsamples: subsamples)
        }
    }

    /// Where each sample's auxiliary information lies (its first byte in the segment) and its size, from saiz and saio
    /// (ISO/IEC 14496-12 8.7.8, 8.7.9): with one saio entry per trun, each run's information starts at its own offset.
    private func auxiliaryInformation(
        sizes: MP4Box,
        offsets: MP4Box,
        children: [MP4Box],
        header: Header,
        sampleCount: Int,
        fragmentStart: Int
    ) throws(SegmentCryptoError) -> [(position: Int, size: Int)] {
        var sizeReader = MP4Reader(moof, box: sizes, segment: segment)
        let (_, sizeFlags) = try sizeReader.versionAndFlags()
        if sizeFlags & 0x01 != 0 { try sizeReader.skip(8) }
        let defaultInfoSize = Int(try sizeReader.uint8())
        let infoCount = Int(try sizeReader.uint32())
        guard infoCount == sampleCount else { throw sizeReader.fail("sample_count \(infoCount), the trun boxes describe \(sampleCount) samples") }
        var infoSizes = [Int](repeating: defaultInfoSize, count: defaultInfoSize == 0 ? 0 : infoCount)
        if defaultInfoSize == 0 {
            infoSizes = try sizeReader.bytes(infoCount).map { Int($0) }
        }

        var offsetReader = MP4Reader(moof, box: offsets, segment: segment)
        let (offsetVersion, offsetFlags) = try offsetReader.versionAndFlags()
        if offsetFlags & 0x01 != 0 { try offsetReader.skip(8) }
        let entryCount = Int(try offsetReader.uint32())
        let runCount = children.filter { $0.type == .trun }.count
        guard entryCount == 1 || entryCount == runCount else {
            throw offsetReader.fail("entry_count \(entryCount), must be 1 or the number of trun boxes (\(runCount))")
        }
        var chunkStarts: [Int] = []
        for _ in 0..<entryCount {
            let value = offsetVersion == 0 ? UInt64(try offsetReader.uint32()) : try offsetReader.uint64()
            guard value < 1 << 62 else { throw offsetReader.fail("offset \(value) is beyond any segment") }
            // ISO/IEC 14496-12 8.7.9.3: offsets count from the traf's base_data_offset when tfhd has one, else from the
            // moof's first byte.
            chunkStarts.append((header.baseDataOffset ?? fragmentStart) + Int(value))
        }
        var runFirstSamples: [Int] = []
        var counted = 0
        for run in children where run.type == .trun {
            runFirstSamples.append(counted)
            if run.payload.count >= 8 { counted += Int(moof.mp4UInt32(at: run.payload.lowerBound + 4)) }
        }
        var entries: [(position: Int, size: Int)] = []
        entries.reserveCapacity(sampleCount)
        var position = chunkStarts[0]
        var chunk = 0
        for sample in 0..<sampleCount {
            if chunk + 1 < chunkStarts.count, sample == runFirstSamples[chunk + 1] {
                chunk += 1
                position = chunkStarts[chunk]
            }
            let infoSize = infoSizes.isEmpty ? 0 : infoSizes[sample]
            entries.append((position, infoSize))
            position += infoSize
        }
        return entries
    }

    /// One entry of sample auxiliary information (ISO/IEC 23001-7 7.2): the IV the sample's parameters size, then its
    /// subsamples when the entry has them.
    private func readEntry(_ reader: inout MP4Reader, sample: Int, withSubsamples: Bool) throws(SegmentCryptoError) -> ([UInt8], [Subsample]?) {
        let ivSize = parameters[sample]?.isProtected == true ? parameters[sample]?.perSampleIVSize ?? 0 : 0
        let iv = try reader.bytes(ivSize)
        guard withSubsamples else { return (iv, nil) }
        let count = Int(try reader.uint16())
        guard count <= reader.remaining / 6 else { throw reader.fail("subsample_count \(count) does not fit the box") }
        var subsamples: [Subsample] = []
        subsamples.reserveCapacity(count)
        for _ in 0..<count {
            let clear = Int(try reader.uint16())
            let protected = Int(try reader.uint32())
            subsamples.append(Subsample(clearBytes: clear, protectedBytes: protected))
        }
        return (iv, subsamples)
    }
}
