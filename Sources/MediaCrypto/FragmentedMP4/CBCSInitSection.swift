import StowageCrypto

/// The protection of an init section (`ftyp` + `moov`, HLS `EXT-X-MAP`): per track, the original format, the
/// scheme, the key ID, the constant or per-sample IV and the encryption pattern (ISO/IEC 23001-7 8).
///
/// ```swift
/// let initSection = try CBCSInitSection.parse(initBytes, segment: "init.mp4")
/// let clearInit = try initSection.clearInitSection()
/// let decryptor = try CBCSFragmentDecryptor(initSection: initSection, key: key, segment: "seg1.m4s")
/// ```
///
/// A clear init section parses too (every track with `scheme == nil`); ``encrypting(clearInit:keyID:constantIV:segment:)``
/// turns one into a `cbcs` init section.
public struct CBCSInitSection: Sendable {
    /// The init section's bytes, as parsed.
    public let bytes: [UInt8]
    /// Every track, in `moov` order.
    public let tracks: [TrackProtection]
    /// The name used in errors.
    public let segment: String

    /// Whether any track has a protection scheme (`sinf`): false for a clear init section. A playlist that sample-encrypts
    /// segments under a clear one is inconsistent (a hostile or broken source): players would take encrypted samples
    /// for clear ones.
    public var protectsAnyTrack: Bool { tracks.contains { $0.scheme != nil } }

    /// The tracks by track_ID, with what the fragment parsers need beyond ``tracks``.
    let trackDescriptions: [UInt32: TrackDescription]

    /// Parses `ftyp` + `moov` (and whatever other top-level boxes precede the first fragment).
    ///
    /// - Parameters:
    ///   - bytes: the whole init section; a `moov` is required, a `moof` or `mdat` is refused.
    ///   - segment: the init section's name, used in errors.
    /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` for a damaged box tree,
    ///   ``SegmentCryptoError/unsupportedStream(segment:detail:)`` for a file that is not fragmented.
    public static func parse(_ bytes: [UInt8], segment: String) throws(SegmentCryptoError) -> CBCSInitSection {
        let topLevel = try MP4Box.children(of: bytes, in: 0..<bytes.count, context: "init section", isFile: true, segment: segment)
        if let fragment = topLevel.first(where: { $0.type == .moof || $0.type == .mdat }) {
            throw .malformedContainer(
                segment: segment,
                detail: "the init section holds a '\(fragment.type)' at byte \(fragment.start); pass only the boxes before the first moof"
            )
        }
        guard let moov = topLevel.first(where: { $0.type == .moov }) else {
            throw .malformedContainer(segment: segment, detail: "the init section has no moov box")
        }
        var descriptions: [UInt32: TrackDescription] = [:]
        var order: [UInt32] = []
        var trex: [UInt32: (index: UInt32, size: UInt32)] = [:]
        var hasMovieExtends = false
        for child in try MP4Box.children(of: bytes, in: moov.payload, context: "moov", segment: segment) {
            switch child.type {
            case .trak:
                let track = try parseTrack(bytes, child, segment: segment)
                guard descriptions[track.trackID] == nil else {
                    throw .malformedContainer(segment: segment, detail: "two trak boxes declare track \(track.trackID)")
                }
                descriptions[track.trackID] = track
                order.append(track.trackID)
            case .mvex:
                hasMovieExtends = true
                for box in try MP4Box.children(of: bytes, in: child.payload, context: "mvex", segment: segment) where box.type == .trex {
                    // ISO/IEC 14496-12 8.8.3: track_ID, default_sample_description_index, duration, size, flags.
                    var reader = MP4Reader(bytes, box: box, segment: segment)
                    _ = try reader.versionAndFlags()
                    let trackID = try reader.uint32()
                    let index = try reader.uint32()
                    _ = try reader.uint32()
                    let size = try reader.uint32()
                    trex[trackID] = (index, size)
                }
            default:
                break
            }
        }
        guard hasMovieExtends else {
            throw .unsupportedStream(segment: segment, detail: "the moov has no mvex box: this is not a fragmented MP4 init section")
        }
        for (trackID, defaults) in trex {
            descriptions[trackID]?.defaultSampleDescriptionIndex = defaults.index
            descriptions[trackID]?.defaultSampleSize = defaults.size
        }
        let tracks = order.compactMap { descriptions[$0] }.map(Self.summary)
        return CBCSInitSection(bytes: bytes, tracks: tracks, segment: segment, trackDescriptions: descriptions)
    }

    /// The public view of a track: its first encrypted sample entry, or its first entry when none is encrypted.
    private static func summary(_ track: TrackDescription) -> TrackProtection {
        let entry = track.entries.first { $0.protection != nil } ?? track.entries.first
        let defaults = entry?.protection?.defaults
        return TrackProtection(
            trackID: track.trackID,
            handler: track.handler.description,
            originalFormat: entry?.originalFormat.description ?? "",
            scheme: entry?.protection?.scheme.description,
            defaultKID: defaults.map { Hex.encode($0.keyID) },
            isProtected: defaults?.isProtected ?? false,
            perSampleIVSize: defaults?.perSampleIVSize ?? 0,
            constantIV: defaults?.constantIV,
            cryptByteBlock: defaults?.cryptByteBlock ?? 0,
            skipByteBlock: defaults?.skipByteBlock ?? 0
        )
    }

    private static func parseTrack(_ bytes: [UInt8], _ trak: MP4Box, segment: String) throws(SegmentCryptoError) -> TrackDescription {
        let children = try MP4Box.children(of: bytes, in: trak.payload, context: "trak", segment: segment)
        guard let tkhd = children.first(where: { $0.type == .tkhd }) else {
            throw .malformedContainer(segment: segment, detail: "trak at byte \(trak.start) has no tkhd")
        }
        // ISO/IEC 14496-12 8.3.2: creation and modification times are 32 bits in version 0, 64 in version 1.
        var reader = MP4Reader(bytes, box: tkhd, segment: segment)
        let (version, _) = try reader.versionAndFlags()
        try reader.skip(version == 1 ? 16 : 8)
        let trackID = try reader.uint32()

        guard let mdia = children.first(where: { $0.type == .mdia }) else {
            throw .malformedContainer(segment: segment, detail: "track \(trackID) has no mdia")
        }
        let mdiaChildren = try MP4Box.children(of: bytes, in: mdia.payload, context: "mdia", segment: segment)
        guard let hdlr = mdiaChildren.first(where: { $0.type == .hdlr }) else {
            throw .malformedContainer(segment: segment, detail: "track \(trackID) has no hdlr")
        }
        var hdlrReader = MP4Reader(bytes, box: hdlr, segment: segment)
        _ = try hdlrReader.versionAndFlags()
        _ = try hdlrReader.uint32()
        let handler = FourCC(rawValue: try hdlrReader.uint32())

        var entries: [SampleEntryDescription] = []
        if let stsd = try findStsd(bytes, mdiaChildren: mdiaChildren, segment: segment) {
            for entry in try sampleEntries(bytes, stsd: stsd, segment: segment) {
                entries.append(try parseSampleEntry(bytes, entry, handler: handler, segment: segment))
            }
        }
        return TrackDescription(trackID: trackID, handler: handler, entries: entries)
    }

    private static func findStsd(_ bytes: [UInt8], mdiaChildren: [MP4Box], segment: String) throws(SegmentCryptoError) -> MP4Box? {
        guard let minf = mdiaChildren.first(where: { $0.type == .minf }) else { return nil }
        let minfChildren = try MP4Box.children(of: bytes, in: minf.payload, context: "minf", segment: segment)
        guard let stbl = minfChildren.first(where: { $0.type == .stbl }) else { return nil }
        return try MP4Box.children(of: bytes, in: stbl.payload, context: "stbl", segment: segment).first { $0.type == .stsd }
    }

    /// The entries of an `stsd` (ISO/IEC 14496-12 8.5.2): version and flags, entry_count, then the entries.
    static func sampleEntries(_ bytes: [UInt8], stsd: MP4Box, segment: String) throws(SegmentCryptoError) -> [MP4Box] {
        guard stsd.payload.count >= 8 else {
            throw .malformedContainer(segment: segment, detail: "stsd at byte \(stsd.start) is too short")
        }
        let entries = try MP4Box.children(of: bytes, in: (stsd.payload.lowerBound + 8)..<stsd.end, context: "stsd", segment: segment)
        let declared = Int(bytes.mp4UInt32(at: stsd.payload.lowerBound + 4))
        guard declared == entries.count else {
            throw .malformedContainer(segment: segment, detail: "stsd at byte \(stsd.start) declares \(declared) entries but holds \(entries.count)")
        }
        return entries
    }

    /// Bytes between a sample entry's header and its child boxes, or `nil` for a layout this parser does not know.
    ///
    /// ISO/IEC 14496-12 12.1.3 (VisualSampleEntry: 78 bytes) and 12.2.3 (AudioSampleEntry: 28 bytes; the QuickTime
    /// sound description versions 1 and 2 add 16 and 36 bytes).
    static func sampleEntryFieldsLength(_ bytes: [UInt8], entry: MP4Box, handler: FourCC) -> Int? {
        if entry.type == .encv || (handler == .vide && entry.type != .enca) {
            return 78
        }
        if entry.type == .enca || handler == .soun {
            guard entry.payload.count >= 28 else { return 28 }
            switch bytes.mp4UInt16(at: entry.payload.lowerBound + 8) {
            case 1: return 44
            case 2: return 64
            default: return 28
            }
        }
        return nil
    }

    private static func parseSampleEntry(
        _ bytes: [UInt8],
        _ entry: MP4Box,
        handler: FourCC,
        segment: String
    ) throws(SegmentCryptoError) -> SampleEntryDescription {
        var description = SampleEntryDescription(format: entry.type)
        guard let fieldsLength = sampleEntryFieldsLength(bytes, entry: entry, handler: handler) else {
            // ISO/IEC 14496-12 8.12.1: 'enc*' marks a protected entry whatever the media.
            description.isOpaqueEncrypted = entry.type.description.hasPrefix("enc")
            return description
        }
        guard entry.payload.count >= fieldsLength else {
            throw .malformedContainer(segment: segment, detail: "sample entry '\(entry.type)' at byte \(entry.start) is too short")
        }
        let children = try MP4Box.children(
            of: bytes,
            in: (entry.payload.lowerBound + fieldsLength)..<entry.end,
            context: "sample entry '\(entry.type)'",
            segment: segment
        )
        if let avcC = children.first(where: { $0.type == .avcC }) {
            description.avcConfiguration = Array(bytes[avcC.payload])
        }
        if let sinf = children.first(where: { $0.type == .sinf }) {
            description.protection = try parseProtectionScheme(bytes, sinf, segment: segment)
        } else if entry.type == .encv || entry.type == .enca {
            throw .malformedContainer(segment: segment, detail: "sample entry '\(entry.type)' at byte \(entry.start) has no sinf")
        }
        return description
    }

    /// `sinf` (ISO/IEC 14496-12 8.12.1): `frma` (original format), `schm` (scheme), `schi` holding `tenc`.
    private static func parseProtectionScheme(_ bytes: [UInt8], _ sinf: MP4Box, segment: String) throws(SegmentCryptoError) -> SampleEntryProtection {
        var originalFormat: FourCC?
        var scheme: FourCC?
        var defaults: EncryptionParameters?
        for child in try MP4Box.children(of: bytes, in: sinf.payload, context: "sinf", segment: segment) {
            var reader = MP4Reader(bytes, box: child, segment: segment)
            switch child.type {
            case .frma:
                originalFormat = FourCC(rawValue: try reader.uint32())
            case .schm:
                _ = try reader.versionAndFlags()
                scheme = FourCC(rawValue: try reader.uint32())
            case .schi:
                for box in try MP4Box.children(of: bytes, in: child.payload, context: "schi", segment: segment) where box.type == .tenc {
                    // ISO/IEC 23001-7 8.2.2: version 0 has no pattern (its byte is reserved).
                    var tenc = MP4Reader(bytes, box: box, segment: segment)
                    let (version, _) = try tenc.versionAndFlags()
                    guard version <= 1 else { throw tenc.fail("version \(version) is unknown") }
                    defaults = try EncryptionParameters.read(from: &tenc)
                    if version == 0 {
                        defaults?.cryptByteBlock = 0
                        defaults?.skipByteBlock = 0
                    }
                }
            default:
                break
            }
        }
        guard let originalFormat else {
            throw .malformedContainer(segment: segment, detail: "sinf at byte \(sinf.start) has no frma")
        }
        guard let scheme else {
            throw .malformedContainer(segment: segment, detail: "sinf at byte \(sinf.start) has no schm")
        }
        return SampleEntryProtection(scheme: scheme, originalFormat: originalFormat, defaults: defaults)
    }
}

extension CBCSInitSection: CustomStringConvertible {
    /// The name, size and tracks, without the bytes.
    public var description: String {
        let tracks = tracks.map { "\($0.trackID) \($0.handler) \($0.originalFormat) \($0.scheme ?? "clear")" }.joined(separator: ", ")
        return "CBCSInitSection(\(segment), \(bytes.count) bytes, tracks: \(tracks))"
    }
}
