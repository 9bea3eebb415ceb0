public import StowageCrypto

/// Encrypts clear fragmented MP4 media segments with `cbcs` (ISO/IEC 23001-7 10.4), matching an init section made by
/// ``CBCSInitSection/encrypting(clearInit:keyID:constantIV:segment:)``: H.264 video with pattern 1:9 in subsamples that
/// leave each NAL header and slice header clear, audio whole-sample, all with the init section's constant IV.
///
/// Each `traf` of a protected track gains `saiz`, `saio` and `senc` (ISO/IEC 23001-7 7), so its `moof` grows: the
/// encryptor fixes the `moof` and `traf` sizes, every trun data_offset and tfhd base_data_offset, and the reference
/// sizes of a `sidx` before the fragments it indexes.
///
/// Memory: the subsample map in `senc` depends on the NAL units of the `mdat` that follows the `moof`, so a whole
/// fragment (`moof` + `mdat`) is held, at most ``maximumFragmentSize`` bytes; behind a `sidx`, the output is held until
/// the indexed fragments are done, within the same bound. Everything else streams.
///
/// ```swift
/// let encryptedInit = try CBCSInitSection.encrypting(clearInit: clearInit, keyID: kid, constantIV: iv, segment: "init.mp4")
/// let encryptor = try CBCSFragmentEncryptor(initSection: encryptedInit, key: key, segment: "seg1.m4s")
/// let encrypted = try encryptor.transform(clearSegment)
/// ```
public final class CBCSFragmentEncryptor: SegmentTransform {
    /// The most a fragment (moof + mdat), or the output held behind a `sidx`, may take.
    public static let maximumFragmentSize = 64 << 20
    /// Subsamples per fragment: each costs 6 bytes of senc and a few words here.
    static let maximumSubsampleCount = 1 << 21

    private struct PendingFragment {
        var header: TopLevelBoxScanner.Header
        var moof: [UInt8]
        var fragment: MovieFragment
        /// Boxes between the moof and its mdat.
        var interstitial: [UInt8] = []
    }

    /// A `sidx` (ISO/IEC 14496-12 8.16.3) whose sizes are fixed once the bytes it indexes have passed.
    private struct SegmentIndex {
        var heldOffset: Int
        var end: Int
        var firstOffsetField: Int
        var firstOffsetIsWide: Bool
        var firstReference: Int
        var references: [(field: Int, start: Int, end: Int)]
        var lastEnd: Int { references.last?.end ?? end }
    }

    private let initSection: CBCSInitSection
    private let segment: String
    private var scanner: TopLevelBoxScanner
    private let cipher: CBCSSampleCipher
    private var videoLayouts: [UInt32: VideoSubsampleLayout] = [:]
    private var pending: PendingFragment?
    private var held: [UInt8] = []
    private var indexes: [SegmentIndex] = []
    /// Each moof so far: its position in the input and how many bytes it grew.
    private var growth: [(start: Int, bytes: Int)] = []

    /// - Parameters:
    ///   - initSection: the `cbcs` init section, as ``CBCSInitSection/encrypting(clearInit:keyID:constantIV:segment:)`` makes.
    ///   - key: the 16-byte content key.
    ///   - segment: the segment's name, used in errors.
    /// - Throws: ``SegmentCryptoError/invalidKey(segment:)``, or ``SegmentCryptoError/unsupportedStream(segment:detail:)``
    ///   for a scheme other than `cbcs`, per-sample IVs, several key IDs, or video other than H.264.
    public init(initSection: CBCSInitSection, key: SecretBytes, segment: String) throws(SegmentCryptoError) {
        guard key.count == 16 else { throw .invalidKey(segment: segment) }
        var keyIDs: Set<[UInt8]> = []
        for track in initSection.trackDescriptions.values {
            for entry in track.entries {
                guard let protection = entry.protection else { continue }
                guard protection.scheme == .cbcs, let defaults = protection.defaults else {
                    throw .unsupportedStream(
                        segment: segment,
                        detail: "track \(track.trackID) uses scheme '\(protection.scheme)'; only 'cbcs' is encrypted"
                    )
                }
                guard defaults.perSampleIVSize == 0, defaults.constantIV != nil else {
                    throw .unsupportedStream(
                        segment: segment,
                        detail: "track \(track.trackID) has per-sample IVs; Stowage encrypts with a constant IV"
                    )
                }
                keyIDs.insert(defaults.keyID)
                switch track.handler {
                case .vide:
                    guard entry.originalFormat == .avc1 || entry.originalFormat == .avc3, let avcC = entry.avcConfiguration else {
                        throw .unsupportedStream(
                            segment: segment,
                            detail: "encrypting '\(entry.originalFormat)' video is not implemented; only H.264 is"
                        )
                    }
                    guard videoLayouts[track.trackID] == nil else {
                        throw .unsupportedStream(segment: segment, detail: "track \(track.trackID) has several protected sample entries")
                    }
                    videoLayouts[track.trackID] = try VideoSubsampleLayout(avcConfiguration: avcC, segment: segment)
                case .soun:
                    break
                default:
                    throw .unsupportedStream(segment: segment, detail: "track \(track.trackID) ('\(track.handler)') is neither video nor audio")
                }
            }
        }
        guard keyIDs.count <= 1 else {
            throw .unsupportedStream(segment: segment, detail: "the protected tracks use \(keyIDs.count) key IDs; one key encrypts them all")
        }
        self.initSection = initSection
        self.segment = segment
        scanner = TopLevelBoxScanner(segment: segment)
        cipher = try CBCSSampleCipher(key: key, direction: .encrypt, windowCapacity: CBCSFragmentDecryptor.windowSize + 16, segment: segment)
    }

    /// Encrypts the next chunk of the segment.
    public func process(_ chunk: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        var offset = 0
        while let event = try scanner.next(chunk, offset: &offset) {
            switch event {
            case .header(let header):
                try begin(header, emit: emit)
            case .payload(let piece):
                try write(piece, emit: emit)
            case .end:
                try flushHeldOutput(emit: emit)
            case .box(let header, let bytes):
                switch header.type {
                case .moof:
                    let fragment = try MovieFragment.parse(bytes, at: header.start, initSection: initSection, purpose: .layout, segment: segment)
                    pending = PendingFragment(header: header, moof: bytes, fragment: fragment)
                case .mdat:
                    try encryptFragment(mediaData: bytes, header: header, emit: emit)
                default:
                    try indexSegment(header, bytes, emit: emit)
                }
                try flushHeldOutput(emit: emit)
            }
        }
    }

    /// Ends the segment.
    ///
    /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` when the segment stops inside a box or a
    ///   `moof` has no `mdat`.
    public func finish(emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        // A box running to the end (never an mdat: begin refuses those) has streamed through already.
        _ = try scanner.finish()
        if let pending {
            guard pending.fragment.dataRange == nil else {
                throw SegmentCryptoError.malformedContainer(segment: segment, detail: "the moof at byte \(pending.header.start) has no mdat")
            }
            self.pending = nil
            try write(pending.moof + pending.interstitial, emit: emit)
        }
        // A sidx indexing past the end of the segment gets the sizes known so far.
        try flushHeldOutput(emit: emit, force: true)
    }

    private func begin(_ header: TopLevelBoxScanner.Header, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch header.type {
        case .moof:
            if let previous = pending {
                guard previous.fragment.dataRange == nil else {
                    throw SegmentCryptoError.malformedContainer(
                        segment: segment,
                        detail: "the moof at byte \(previous.header.start) is followed by another moof instead of its mdat"
                    )
                }
                pending = nil
                try write(previous.moof + previous.interstitial, emit: emit)
            }
            try scanner.bufferBox(limit: CBCSFragmentDecryptor.maximumMovieFragmentSize)
        case .mdat:
            guard let pending else {
                throw SegmentCryptoError.malformedContainer(segment: segment, detail: "the mdat at byte \(header.start) has no moof before it")
            }
            guard let end = header.end else {
                throw SegmentCryptoError.unsupportedStream(
                    segment: segment,
                    detail: "the mdat at byte \(header.start) runs to the end of the segment"
                )
            }
            if let range = pending.fragment.dataRange, range.lowerBound < header.payloadStart || range.upperBound > end {
                throw SegmentCryptoError.malformedContainer(
                    segment: segment,
                    detail: "the moof at byte \(pending.header.start) places samples in bytes \(range.lowerBound)..<\(range.upperBound), "
                        + "outside the payload of the mdat at byte \(header.start) (\(header.payloadStart)..<\(end))"
                )
            }
            try scanner.bufferBox(limit: Self.maximumFragmentSize - pending.moof.count - pending.interstitial.count)
        case .sidx where pending == nil:
            try scanner.bufferBox(limit: 1 << 20)
        case .moov:
            throw SegmentCryptoError.malformedContainer(
                segment: segment,
                detail: "a moov at byte \(header.start): the init section goes to CBCSInitSection.encrypting, not into a media segment"
            )
        default:
            try write(header.raw, emit: emit)
        }
    }

    /// Sends output on, or holds it while a fragment or a sidx is pending.
    private func write(_ bytes: some Collection<UInt8>, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        if pending != nil {
            guard pending!.interstitial.count + bytes.count <= Self.maximumFragmentSize else { throw overLimit() }
            pending!.interstitial += bytes
        } else if !indexes.isEmpty {
            guard held.count + bytes.count <= Self.maximumFragmentSize else { throw overLimit() }
            held += bytes
        } else {
            try Array(bytes).withUnsafeBytes { try emit($0) }
        }
    }

    private func write(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        if pending == nil && indexes.isEmpty {
            try emit(bytes)
        } else {
            try write(Array(bytes), emit: emit)
        }
    }

    private func overLimit() -> SegmentCryptoError {
        .limitExceeded(segment: segment, detail: "more than \(Self.maximumFragmentSize) bytes would be held to encrypt one fragment")
    }

    /// Where a byte of the input lands in the output: shifted by the growth of every moof before it.
    private func outputPosition(_ position: Int) -> Int {
        position + growth.reduce(0) { $0 + ($1.start < position ? $1.bytes : 0) }
    }

    // MARK: Fragments

    private func encryptFragment(mediaData: [UInt8], header: TopLevelBoxScanner.Header, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard let pending else { return }
        self.pending = nil
        var mdat = mediaData
        var fragment = pending.fragment
        // Per traf: the boxes to append (saiz, saio, senc) and where senc's first entry sits in them.
        var additions: [Int: ProtectionBoxes] = [:]
        for layout in fragment.trackFragments {
            additions[layout.traf.start] = try protectionBoxes(for: layout, of: &fragment, mediaData: mdat, header: header)
        }
        let moof = try grownMoof(pending, fragment: fragment, additions: additions)
        // Encrypt the samples in place, window by window.
        cipher.load(fragment)
        let end = header.start + mdat.count
        var position = header.payloadStart
        try mdat.withUnsafeMutableBytes { buffer in
            while position < end {
                let local = position - header.start
                let count = min(CBCSFragmentDecryptor.windowSize, end - position)
                let ready = try cipher.transform(UnsafeMutableRawBufferPointer(rebasing: buffer[local..<(local + count)]), at: position)
                guard ready > position else {
                    throw SegmentCryptoError.malformedContainer(segment: segment, detail: "a sample runs past the mdat at byte \(header.start)")
                }
                position = ready
            }
        }
        guard cipher.isComplete else {
            throw SegmentCryptoError.malformedContainer(segment: segment, detail: "the mdat at byte \(header.start) ends before its samples")
        }
        try write(moof, emit: emit)
        try write(pending.interstitial, emit: emit)
        try write(mdat, emit: emit)
    }

    /// What a protected traf gains: the boxes to append, where senc's first entry sits in them, and saio's offset
    /// field (nil when saiz and saio are left out).
    private typealias ProtectionBoxes = (bytes: [UInt8], sencEntries: Int, saioField: Int?)

    /// The saiz, saio and senc boxes of one track fragment, its samples marked protected in `fragment` with their
    /// subsamples (the video NAL layout); nil for a track that is not protected.
    private func protectionBoxes(
        for layout: TrackFragmentLayout,
        of fragment: inout MovieFragment,
        mediaData mdat: [UInt8],
        header: TopLevelBoxScanner.Header
    ) throws -> ProtectionBoxes? {
        guard let parameters = layout.entry?.protection?.defaults, parameters.isProtected, let constantIV = parameters.constantIV else {
            return nil
        }
        guard !layout.hasSampleEncryptionBoxes else {
            throw SegmentCryptoError.unsupportedStream(segment: segment, detail: "track \(layout.trackID) already carries senc, saiz or saio")
        }
        let ivIndex = Int32(fragment.ivTable.count / 16)
        fragment.ivTable += constantIV
        var entries: [UInt8] = []
        var infoSizes: [Int] = []
        for index in layout.samples {
            var sample = fragment.samples[index]
            sample.isProtected = true
            sample.cryptByteBlock = UInt8(parameters.cryptByteBlock)
            sample.skipByteBlock = UInt8(parameters.skipByteBlock)
            sample.ivIndex = ivIndex
            if videoLayouts[layout.trackID] != nil {
                let local = (sample.offset - header.start)..<(sample.end - header.start)
                let subsamples = try videoLayouts[layout.trackID]!.subsamples(of: mdat, sample: local)
                // senc counts a sample's subsamples in 16 bits; a fragment's subsamples cost memory here.
                guard subsamples.count <= 0xFFFF, fragment.subsamples.count + subsamples.count <= Self.maximumSubsampleCount else {
                    throw SegmentCryptoError.limitExceeded(
                        segment: segment,
                        detail: "the samples of track \(layout.trackID) have too many NAL units to describe as subsamples"
                    )
                }
                sample.subsampleStart = Int32(fragment.subsamples.count)
                sample.subsampleCount = Int32(subsamples.count)
                fragment.subsamples += subsamples
                // senc entry (ISO/IEC 23001-7 7.2.2): no IV (constant IV), subsample_count, then the pairs.
                entries.appendMP4UInt16(UInt16(subsamples.count))
                for subsample in subsamples {
                    entries.appendMP4UInt16(UInt16(subsample.clearBytes))
                    entries.appendMP4UInt32(UInt32(subsample.protectedBytes))
                }
                infoSizes.append(2 + 6 * subsamples.count)
            } else {
                infoSizes.append(0)
            }
            fragment.samples[index] = sample
        }
        var sencPayload: [UInt8] = []
        sencPayload.appendMP4UInt32(UInt32(layout.samples.count))
        let senc = EditableBox.fullBox(.senc, flags: videoLayouts[layout.trackID] != nil ? 0x02 : 0, payload: sencPayload + entries)
        // saiz/saio point at the senc entries (ISO/IEC 23001-7 7.1). They are left out when every entry is empty,
        // as Shaka Packager does for audio, and when an entry outgrows saiz's 8-bit sizes (more than 42
        // subsamples), where senc alone describes the samples.
        guard infoSizes.contains(where: { $0 > 0 }), infoSizes.allSatisfy({ $0 <= 255 }) else {
            return (senc, 16, nil)
        }
        var saizPayload: [UInt8] = []
        if let first = infoSizes.first, infoSizes.allSatisfy({ $0 == first }) {
            saizPayload.appendMP4UInt8(UInt8(first))
            saizPayload.appendMP4UInt32(UInt32(infoSizes.count))
        } else {
            saizPayload.appendMP4UInt8(0)
            saizPayload.appendMP4UInt32(UInt32(infoSizes.count))
            saizPayload += infoSizes.map { UInt8($0) }
        }
        let saiz = EditableBox.fullBox(.saiz, payload: saizPayload)
        let saio = EditableBox.fullBox(.saio, payload: [0, 0, 0, 1, 0, 0, 0, 0])
        return (saiz + saio + senc, saiz.count + saio.count + 16, saiz.count + 16)
    }

    /// The fragment's moof with each protected traf followed by its additions, every size, offset and position moved
    /// by the growth set right.
    private func grownMoof(_ pending: PendingFragment, fragment: MovieFragment, additions: [Int: ProtectionBoxes]) throws -> [UInt8] {
        let moofStart = pending.header.start
        // Lay out the new moof: each protected traf followed by its additions.
        let grown = additions.values.reduce(0) { $0 + $1.bytes.count }
        let moofOutputStart = outputPosition(moofStart)
        let moofHeader = try MP4Box.at(0, in: pending.moof, limit: pending.moof.count, context: "segment", segment: segment)
        var moof = Array(pending.moof[0..<moofHeader.payload.lowerBound])
        var shifts: [(start: Int, shift: Int)] = []
        var offsetFields: [(layout: TrackFragmentLayout, field: Int, senc: Int)] = []
        for child in try MP4Box.children(of: pending.moof, in: moofHeader.payload, context: "moof", segment: segment) {
            let newStart = moof.count
            shifts.append((child.start, newStart - child.start))
            moof += pending.moof[child.start..<child.end]
            guard let addition = additions[child.start] else { continue }
            try setSize(of: &moof, boxAt: newStart, headerSize: child.headerSize, to: child.size + addition.bytes.count)
            let additionStart = moof.count
            moof += addition.bytes
            if let saioField = addition.saioField, let layout = fragment.trackFragments.first(where: { $0.traf.start == child.start }) {
                offsetFields.append((layout, additionStart + saioField, additionStart + addition.sencEntries))
            }
        }
        try setSize(of: &moof, boxAt: 0, headerSize: moofHeader.headerSize, to: moof.count)
        growth.append((moofStart, grown))

        for (layout, field, senc) in offsetFields {
            // saio counts from the traf's base_data_offset when tfhd has one, else from the moof (8.7.9.3).
            let base = layout.baseDataOffset.map { outputPosition($0.value) } ?? moofOutputStart
            let offset = moofOutputStart + senc - base
            guard offset >= 0, offset <= Int(UInt32.max) else {
                throw SegmentCryptoError.unsupportedStream(segment: segment, detail: "track \(layout.trackID)'s base_data_offset lies after its moof")
            }
            moof.setMP4UInt32(UInt32(offset), at: field)
        }

        // Fix the positions moved by the growth (ISO/IEC 14496-12 8.8.7, 8.8.8).
        func newOffset(_ oldOffset: Int) -> Int {
            oldOffset + (shifts.last { $0.start <= oldOffset }?.shift ?? 0)
        }
        for layout in fragment.trackFragments {
            if let base = layout.baseDataOffset {
                guard base.value <= moofStart || base.value >= moofStart + pending.moof.count else {
                    throw SegmentCryptoError.unsupportedStream(
                        segment: segment,
                        detail: "track \(layout.trackID)'s base_data_offset points inside its moof"
                    )
                }
                moof.setMP4UInt64(UInt64(outputPosition(base.value)), at: newOffset(base.field))
            }
            for dataOffset in layout.dataOffsets {
                guard dataOffset.base <= moofStart || dataOffset.base >= moofStart + pending.moof.count else {
                    throw SegmentCryptoError.unsupportedStream(segment: segment, detail: "track \(layout.trackID)'s data base lies inside its moof")
                }
                let old = Int(Int32(bitPattern: pending.moof.mp4UInt32(at: dataOffset.field)))
                let updated = outputPosition(dataOffset.base + old) - outputPosition(dataOffset.base)
                guard let value = Int32(exactly: updated) else {
                    throw SegmentCryptoError.unsupportedStream(
                        segment: segment,
                        detail: "a trun data_offset of track \(layout.trackID) outgrows 32 bits"
                    )
                }
                moof.setMP4UInt32(UInt32(bitPattern: value), at: newOffset(dataOffset.field))
            }
        }
        return moof
    }

    private func setSize(of bytes: inout [UInt8], boxAt offset: Int, headerSize: Int, to size: Int) throws {
        if headerSize == 16 || headerSize == 32 {
            bytes.setMP4UInt64(UInt64(size), at: offset + 8)
        } else {
            guard size <= Int(UInt32.max) else { throw overLimit() }
            bytes.setMP4UInt32(UInt32(size), at: offset)
        }
    }

    // MARK: Segment index

    /// Holds a sidx (ISO/IEC 14496-12 8.16.3) until the subsegments it indexes have been encrypted.
    private func indexSegment(_ header: TopLevelBoxScanner.Header, _ bytes: [UInt8], emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        let box = try MP4Box.at(0, in: bytes, limit: bytes.count, context: "segment", segment: segment)
        var reader = MP4Reader(bytes, box: box, segment: segment)
        let (version, _) = try reader.versionAndFlags()
        try reader.skip(8)
        try reader.skip(version == 0 ? 4 : 8)
        let firstOffsetField = reader.position
        let firstOffset = version == 0 ? UInt64(try reader.uint32()) : try reader.uint64()
        try reader.skip(2)
        let count = Int(try reader.uint16())
        guard firstOffset < 1 << 40 else { throw reader.fail("first_offset \(firstOffset) is beyond any segment") }
        let end = header.start + bytes.count
        var index = SegmentIndex(
            heldOffset: 0,
            end: end,
            firstOffsetField: firstOffsetField,
            firstOffsetIsWide: version != 0,
            firstReference: end + Int(firstOffset),
            references: []
        )
        var start = index.firstReference
        for _ in 0..<count {
            let field = reader.position
            let size = Int(try reader.uint32() & 0x7FFF_FFFF)
            try reader.skip(8)
            index.references.append((field, start, start + size))
            start += size
        }
        // Nothing is held while no sidx is open, so the sidx starts where the held output ends.
        index.heldOffset = held.count
        indexes.append(index)
        try write(bytes, emit: emit)
    }

    /// Fixes and sends the held output once every sidx's subsegments have passed (or at the end, `force`).
    private func flushHeldOutput(emit: (UnsafeRawBufferPointer) throws -> Void, force: Bool = false) throws {
        guard !indexes.isEmpty, pending == nil, force || indexes.allSatisfy({ $0.lastEnd <= scanner.position }) else { return }
        for index in indexes {
            let firstOffset = outputPosition(index.firstReference) - outputPosition(index.end)
            if index.firstOffsetIsWide {
                held.setMP4UInt64(UInt64(firstOffset), at: index.heldOffset + index.firstOffsetField)
            } else {
                held.setMP4UInt32(UInt32(truncatingIfNeeded: firstOffset), at: index.heldOffset + index.firstOffsetField)
            }
            for reference in index.references {
                let size = outputPosition(reference.end) - outputPosition(reference.start)
                guard size < 1 << 31 else { throw overLimit() }
                let field = index.heldOffset + reference.field
                held.setMP4UInt32(held.mp4UInt32(at: field) & 0x8000_0000 | UInt32(size), at: field)
            }
        }
        indexes.removeAll()
        let output = held
        held.removeAll(keepingCapacity: false)
        try output.withUnsafeBytes { try emit($0) }
    }
}
