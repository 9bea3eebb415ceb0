extension CBCSInitSection {
    /// The init section made clear: each `encv`/`enca` entry renamed back to its `frma` format with its `sinf`
    /// removed (ISO/IEC 14496-12 8.12), every `pssh` removed from the `moov` (ISO/IEC 23001-7 8.1), and every
    /// ancestor box's size fixed.
    ///
    /// Fragments decrypted by ``CBCSFragmentDecryptor`` play after this init section as a clear stream.
    ///
    /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` if an `encv`/`enca` entry has no `frma`.
    public func clearInitSection() throws(SegmentCryptoError) -> [UInt8] {
        let segment = self.segment
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        for box in try MP4Box.children(of: bytes, in: 0..<bytes.count, context: "init section", isFile: true, segment: segment) {
            guard box.type == .moov else {
                output += bytes[box.start..<box.end]
                continue
            }
            var moov = try EditableBox.open(bytes, box, segment: segment)
            moov.children?.removeAll { $0.type == .pssh }
            try moov.updateSampleEntries { (entry: inout EditableBox, _: FourCC) throws(SegmentCryptoError) in
                guard let children = entry.children, let sinf = children.first(where: { $0.type == .sinf }) else { return }
                guard let frma = sinf.children?.first(where: { $0.type == .frma }), frma.raw.count >= 12 else {
                    throw .malformedContainer(segment: segment, detail: "sample entry '\(entry.type)' has a sinf without frma")
                }
                entry.type = FourCC(rawValue: frma.raw.mp4UInt32(at: 8))
                entry.children = children.filter { $0.type != .sinf }
            }
            moov.serialize(into: &output)
        }
        return output
    }
}
