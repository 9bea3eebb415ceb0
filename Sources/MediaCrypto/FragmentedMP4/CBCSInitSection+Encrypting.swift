extension CBCSInitSection {
    /// The encryption pattern for video: 1 encrypted block, then 9 clear ones (ISO/IEC 23001-7 10.4.1 recommends
    /// 1:9; Apple's HLS authoring specification requires it).
    static let videoPattern = (crypt: 1, skip: 9)

    /// Makes a `cbcs` init section from a clear one: every H.264 video and every audio track gets an `encv`/`enca`
    /// entry with `sinf` = `frma` + `schm` (`cbcs`, version 1.0) + `schi`/`tenc` version 1 (ISO/IEC 23001-7 8.2, 10.4):
    /// video with pattern 1:9, audio whole-block (0:0), both with the constant IV and no per-sample IV, as HLS uses.
    /// Other tracks (captions, subtitles, metadata) stay clear.
    ///
    /// Encrypt the matching fragments with ``CBCSFragmentEncryptor`` and the returned section.
    ///
    /// ```swift
    /// let encryptedInit = try CBCSInitSection.encrypting(clearInit: clearInit, keyID: kid, constantIV: iv, segment: "init.mp4")
    /// try Data(encryptedInit.bytes).write(to: initURL)
    /// ```
    ///
    /// - Parameters:
    ///   - clearInit: a fragmented MP4 init section with no protected track.
    ///   - keyID: the 16-byte default_KID written to every `tenc`.
    ///   - constantIV: the 16-byte default_constant_IV.
    /// - Throws: ``SegmentCryptoError/invalidKey(segment:)`` for a key ID that is not 16 bytes,
    ///   ``SegmentCryptoError/invalidIV(segment:)`` for an IV that is not 16 bytes,
    ///   ``SegmentCryptoError/unsupportedStream(segment:detail:)`` for an already protected track or a video codec
    ///   other than H.264 (finding HEVC slice headers is not implemented).
    public static func encrypting(
        clearInit: [UInt8],
        keyID: [UInt8],
        constantIV: [UInt8],
        segment: String
    ) throws(SegmentCryptoError) -> CBCSInitSection {
        guard keyID.count == 16 else { throw .invalidKey(segment: segment) }
        guard constantIV.count == 16 else { throw .invalidIV(segment: segment) }
        let clear = try parse(clearInit, segment: segment)
        if let protected = clear.tracks.first(where: { $0.scheme != nil }) {
            throw .unsupportedStream(segment: segment, detail: "track \(protected.trackID) is already protected with '\(protected.scheme ?? "")'")
        }
        var output: [UInt8] = []
        for box in try MP4Box.children(of: clearInit, in: 0..<clearInit.count, context: "init section", isFile: true, segment: segment) {
            guard box.type == .moov else {
                output += clearInit[box.start..<box.end]
                continue
            }
            var moov = try EditableBox.open(clearInit, box, segment: segment)
            try moov.updateSampleEntries { (entry: inout EditableBox, handler: FourCC) throws(SegmentCryptoError) in
                guard handler == .vide || handler == .soun else { return }
                guard entry.children != nil else {
                    throw .unsupportedStream(segment: segment, detail: "sample entry '\(entry.type)' has a layout Stowage cannot extend")
                }
                let isVideo = handler == .vide
                if isVideo && entry.type != .avc1 && entry.type != .avc3 {
                    throw .unsupportedStream(
                        segment: segment,
                        detail: "encrypting '\(entry.type)' video is not implemented (cbcs needs its slice headers found; only H.264 is)"
                    )
                }
                let parameters = EncryptionParameters(
                    isProtected: true,
                    perSampleIVSize: 0,
                    keyID: keyID,
                    constantIV: constantIV,
                    cryptByteBlock: isVideo ? videoPattern.crypt : 0,
                    skipByteBlock: isVideo ? videoPattern.skip : 0
                )
                let original = entry.type
                entry.type = isVideo ? .encv : .enca
                entry.children?.append(protectionSchemeInfo(originalFormat: original, parameters: parameters))
            }
            moov.serialize(into: &output)
        }
        return try parse(output, segment: segment)
    }

    /// `sinf` (ISO/IEC 14496-12 8.12): `frma`, `schm` with scheme `cbcs` version 0x00010000 (ISO/IEC 23001-7 10.4),
    /// and `schi` holding `tenc` version 1, which carries the pattern (ISO/IEC 23001-7 8.2.2).
    private static func protectionSchemeInfo(originalFormat: FourCC, parameters: EncryptionParameters) -> EditableBox {
        let frma = EditableBox.plainBox(.frma, payload: originalFormat.bytes)
        var schmPayload = FourCC.cbcs.bytes
        schmPayload.appendMP4UInt32(0x0001_0000)
        let schm = EditableBox.fullBox(.schm, payload: schmPayload)
        let tenc = EditableBox.fullBox(.tenc, version: 1, payload: parameters.serialized())
        return .container(
            .sinf,
            children: [
                EditableBox(type: .frma, children: nil, raw: frma),
                EditableBox(type: .schm, children: nil, raw: schm),
                .container(.schi, children: [EditableBox(type: .tenc, children: nil, raw: tenc)]),
            ]
        )
    }
}
