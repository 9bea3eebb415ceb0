/// Tells fragmented MP4 from other segment formats (MPEG-TS, packed audio) by the first bytes.
public enum FragmentedMP4Detection {
    /// Boxes that only fragmented MP4 media segments start with (ISO/IEC 14496-12 8.16, 8.8.4; ISO/IEC 23009-1 5.10.3).
    private static let segmentBoxes: Set<FourCC> = [.styp, .sidx, .moof, .emsg, .prft]
    /// Boxes that may come first without deciding anything.
    private static let neutralBoxes: Set<FourCC> = [.free, .skip, .uuid, FourCC("ssix"), FourCC("wide")]
    /// Brands of fragmented files (ISO/IEC 14496-12 iso5/iso6, ISO/IEC 23000-19 CMAF cmf*, DASH).
    private static let fragmentedBrands: Set<String> = [
        "iso5", "iso6", "iso7", "iso8", "iso9", "cmfc", "cmf2", "cmfs", "cmff", "dash", "msdh", "msix",
    ]

    /// Whether `prefix` (the first bytes of a segment or init section; a few hundred are plenty) looks like fragmented
    /// MP4: a media segment's first box (`styp`, `sidx`, `moof`, `emsg`, `prft`), or an `ftyp`/`moov` whose brands or
    /// `mvex` say fragmented.
    ///
    /// ```swift
    /// if FragmentedMP4Detection.looksLikeFragmentedMP4(Array(firstBytes.prefix(512))) { ... }
    /// ```
    public static func looksLikeFragmentedMP4(_ prefix: [UInt8]) -> Bool {
        var offset = 0
        var sawFileType = false
        var fragmentedBrand = false
        while prefix.count - offset >= 8 {
            let size = Int(prefix.mp4UInt32(at: offset))
            let type = FourCC(rawValue: prefix.mp4UInt32(at: offset + 4))
            let printable = type.bytes.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) || $0 == 0x20 || $0 == 0x2D
            }
            guard printable, size == 1 || size >= 8 else { return false }
            if segmentBoxes.contains(type) { return true }
            switch type {
            case .ftyp:
                guard offset == 0, size >= 16 else { return false }
                sawFileType = true
                var brand = offset + 8
                while brand + 4 <= min(offset + size, prefix.count) {
                    if brand != offset + 12, fragmentedBrands.contains(FourCC(rawValue: prefix.mp4UInt32(at: brand)).description) {
                        fragmentedBrand = true
                    }
                    brand += 4
                }
            case .moov:
                // An init section: fragmented when its moov has an mvex (ISO/IEC 14496-12 8.8.1).
                var child = offset + 8
                let end = min(offset + size, prefix.count)
                while child + 8 <= end {
                    let childSize = Int(prefix.mp4UInt32(at: child))
                    if FourCC(rawValue: prefix.mp4UInt32(at: child + 4)) == .mvex { return true }
                    guard childSize >= 8 else { return false }
                    child += childSize
                }
                // The whole moov seen without mvex: a progressive MP4. Cut off: trust the brands.
                return offset + size <= prefix.count ? false : fragmentedBrand
            case .mdat:
                return false
            default:
                guard neutralBoxes.contains(type) || sawFileType else { return false }
            }
            guard size != 1 else { return sawFileType && fragmentedBrand }
            offset += size
        }
        return sawFileType && fragmentedBrand
    }
}
