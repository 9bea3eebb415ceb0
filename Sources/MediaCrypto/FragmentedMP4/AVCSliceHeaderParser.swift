/// Finds where the slice data of an H.264 slice NAL unit begins, so `cbcs` encryption can leave the NAL header and
/// slice header clear (ISO/IEC 23001-7 10.2 for NAL-structured video; ISO/IEC 23000-19 CMAF: for `cbcs` the
/// protected range starts at the first byte of video data after the slice header, as Shaka Packager and mp4ff do).
///
/// The slice header's length depends on the active SPS and PPS (ITU-T H.264 7.3.2.1, 7.3.2.2, 7.3.3), taken from
/// `avcC` and updated by parameter sets found in samples (`avc3`).
struct AVCSliceHeaderParser {
    struct SequenceParameterSet {
        var chromaArrayType = 1
        var separateColourPlane = false
        var log2MaxFrameNum = 4
        var frameMbsOnly = true
        var picOrderCountType = 0
        var log2MaxPicOrderCountLsb = 4
        var deltaPicOrderAlwaysZero = false
        var picSizeInMapUnits = 1
    }

    struct PictureParameterSet {
        var spsID = 0
        var entropyCodingMode = false
        var bottomFieldPicOrderInFramePresent = false
        var numSliceGroups = 1
        var sliceGroupMapType = 0
        var sliceGroupChangeRate = 1
        var numRefIdxL0Default = 1
        var numRefIdxL1Default = 1
        var weightedPred = false
        var weightedBipredIdc = 0
        var deblockingFilterControlPresent = false
        var redundantPicCountPresent = false
    }

    private var sequenceParameterSets: [Int: SequenceParameterSet] = [:]
    private var pictureParameterSets: [Int: PictureParameterSet] = [:]
    let nalLengthSize: Int
    private let segment: String

    /// Reads `avcC` (ISO/IEC 14496-15 5.3.3.1): version, profile, compatibility, level, lengthSizeMinusOne, then the
    /// SPS and PPS NAL units.
    init(avcConfiguration config: [UInt8], segment: String) throws(SegmentCryptoError) {
        self.segment = segment
        var reader = MP4Reader(config, range: 0..<config.count, context: "avcC", segment: segment)
        _ = try reader.uint32()
        nalLengthSize = Int(try reader.uint8() & 0x03) + 1
        guard nalLengthSize != 3 else { throw reader.fail("NAL unit length size 3 is not allowed") }
        let spsCount = Int(try reader.uint8() & 0x1F)
        for _ in 0..<spsCount {
            let length = Int(try reader.uint16())
            let start = reader.position
            try reader.skip(length)
            try parseSequenceParameterSet(config, start..<(start + length))
        }
        let ppsCount = Int(try reader.uint8())
        for _ in 0..<ppsCount {
            let length = Int(try reader.uint16())
            let start = reader.position
            try reader.skip(length)
            try parsePictureParameterSet(config, start..<(start + length))
        }
    }

    private func fail(_ detail: String) -> SegmentCryptoError {
        .malformedContainer(segment: segment, detail: "H.264: \(detail)")
    }

    /// Updates the parameter sets from an SPS (type 7) or PPS (type 8) NAL unit; ignores other types.
    mutating func observe(_ bytes: [UInt8], nal: Range<Int>) throws(SegmentCryptoError) {
        guard !nal.isEmpty else { return }
        switch bytes[nal.lowerBound] & 0x1F {
        case 7: try parseSequenceParameterSet(bytes, nal)
        case 8: try parsePictureParameterSet(bytes, nal)
        default: break
        }
    }

    /// ITU-T H.264 7.3.2.1.1, up to frame_mbs_only_flag.
    private mutating func parseSequenceParameterSet(_ bytes: [UInt8], _ nal: Range<Int>) throws(SegmentCryptoError) {
        guard nal.count > 1 else { throw fail("an SPS NAL unit is empty") }
        var reader = NALBitReader(bytes, range: (nal.lowerBound + 1)..<nal.upperBound, segment: segment)
        var sps = SequenceParameterSet()
        let profile = try reader.bits(8)
        try reader.skipBits(16)
        let id = try reader.unsignedExpGolomb(max: 31, "seq_parameter_set_id")
        if [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].contains(profile) {
            let chromaFormat = try reader.unsignedExpGolomb(max: 3, "chroma_format_idc")
            var separateColourPlane = false
            if chromaFormat == 3 { separateColourPlane = try reader.flag() }
            sps.chromaArrayType = separateColourPlane ? 0 : chromaFormat
            sps.separateColourPlane = separateColourPlane
            _ = try reader.unsignedExpGolomb(max: 14, "bit_depth_luma_minus8")
            _ = try reader.unsignedExpGolomb(max: 14, "bit_depth_chroma_minus8")
            try reader.skipBits(1)
            if try reader.flag() {
                for list in 0..<(chromaFormat == 3 ? 12 : 8) where try reader.flag() {
                    // scaling_list() (7.3.2.1.1.1): delta_scale until nextScale is 0.
                    var lastScale = 8
                    var nextScale = 8
                    for _ in 0..<(list < 6 ? 16 : 64) where nextScale != 0 {
                        let delta = try reader.signedExpGolomb()
                        nextScale = ((lastScale + delta) % 256 + 256) % 256
                        lastScale = nextScale == 0 ? lastScale : nextScale
                    }
                }
            }
        } else {
            sps.chromaArrayType = 1
        }
        sps.log2MaxFrameNum = try reader.unsignedExpGolomb(max: 12, "log2_max_frame_num_minus4") + 4
        sps.picOrderCountType = try reader.unsignedExpGolomb(max: 2, "pic_order_cnt_type")
        if sps.picOrderCountType == 0 {
            sps.log2MaxPicOrderCountLsb = try reader.unsignedExpGolomb(max: 12, "log2_max_pic_order_cnt_lsb_minus4") + 4
        } else if sps.picOrderCountType == 1 {
            sps.deltaPicOrderAlwaysZero = try reader.flag()
            _ = try reader.signedExpGolomb()
            _ = try reader.signedExpGolomb()
            let cycle = try reader.unsignedExpGolomb(max: 255, "num_ref_frames_in_pic_order_cnt_cycle")
            for _ in 0..<cycle { _ = try reader.signedExpGolomb() }
        }
        _ = try reader.unsignedExpGolomb()
        try reader.skipBits(1)
        let widthInMbs = try reader.unsignedExpGolomb(max: 1 << 16, "pic_width_in_mbs_minus1") + 1
        let heightInMapUnits = try reader.unsignedExpGolomb(max: 1 << 16, "pic_height_in_map_units_minus1") + 1
        sps.frameMbsOnly = try reader.flag()
        sps.picSizeInMapUnits = widthInMbs * heightInMapUnits
        sequenceParameterSets[id] = sps
    }

    /// ITU-T H.264 7.3.2.2, up to redundant_pic_cnt_present_flag.
    private mutating func parsePictureParameterSet(_ bytes: [UInt8], _ nal: Range<Int>) throws(SegmentCryptoError) {
        guard nal.count > 1 else { throw fail("a PPS NAL unit is empty") }
        var reader = NALBitReader(bytes, range: (nal.lowerBound + 1)..<nal.upperBound, segment: segment)
        var pps = PictureParameterSet()
        let id = try reader.unsignedExpGolomb(max: 255, "pic_parameter_set_id")
        pps.spsID = try reader.unsignedExpGolomb(max: 31, "seq_parameter_set_id")
        pps.entropyCodingMode = try reader.flag()
        pps.bottomFieldPicOrderInFramePresent = try reader.flag()
        pps.numSliceGroups = try reader.unsignedExpGolomb(max: 7, "num_slice_groups_minus1") + 1
        if pps.numSliceGroups > 1 {
            pps.sliceGroupMapType = try reader.unsignedExpGolomb(max: 6, "slice_group_map_type")
            switch pps.sliceGroupMapType {
            case 0:
                for _ in 0..<pps.numSliceGroups { _ = try reader.unsignedExpGolomb() }
            case 2:
                for _ in 0..<(pps.numSliceGroups - 1) {
                    _ = try reader.unsignedExpGolomb()
                    _ = try reader.unsignedExpGolomb()
                }
            case 3, 4, 5:
                try reader.skipBits(1)
                pps.sliceGroupChangeRate = try reader.unsignedExpGolomb(max: 1 << 20, "slice_group_change_rate_minus1") + 1
            case 6:
                let mapUnits = try reader.unsignedExpGolomb(max: 1 << 20, "pic_size_in_map_units_minus1") + 1
                let idBits = Self.ceilLog2(pps.numSliceGroups)
                try reader.skipBits(mapUnits * idBits)
            default:
                break
            }
        }
        pps.numRefIdxL0Default = try reader.unsignedExpGolomb(max: 31, "num_ref_idx_l0_default_active_minus1") + 1
        pps.numRefIdxL1Default = try reader.unsignedExpGolomb(max: 31, "num_ref_idx_l1_default_active_minus1") + 1
        pps.weightedPred = try reader.flag()
        pps.weightedBipredIdc = Int(try reader.bits(2))
        _ = try reader.signedExpGolomb()
        _ = try reader.signedExpGolomb()
        _ = try reader.signedExpGolomb()
        pps.deblockingFilterControlPresent = try reader.flag()
        try reader.skipBits(1)
        pps.redundantPicCountPresent = try reader.flag()
        pictureParameterSets[id] = pps
    }

    /// Ceil(Log2(value)) for value >= 1.
    private static func ceilLog2(_ value: Int) -> Int {
        var bits = 0
        while (1 << bits) < value { bits += 1 }
        return bits
    }

    /// The bytes of `nal` (a coded slice, types 1 to 5) that must stay clear: the NAL header and the whole slice
    /// header (ITU-T H.264 7.3.3), rounded up to a byte.
    func clearHeaderLength(_ bytes: [UInt8], nal: Range<Int>) throws(SegmentCryptoError) -> Int {
        guard nal.count > 1 else { return nal.count }
        let nalHeader = bytes[nal.lowerBound]
        let nalRefIdc = Int(nalHeader >> 5) & 0x03
        let isIDR = nalHeader & 0x1F == 5
        var reader = NALBitReader(bytes, range: (nal.lowerBound + 1)..<nal.upperBound, segment: segment)
        _ = try reader.unsignedExpGolomb()
        let sliceType = try reader.unsignedExpGolomb(max: 9, "slice_type") % 5
        let isP = sliceType == 0
        let isB = sliceType == 1
        let isSP = sliceType == 3
        let isSI = sliceType == 4
        let isI = sliceType == 2
        let ppsID = try reader.unsignedExpGolomb(max: 255, "pic_parameter_set_id")
        guard let pps = pictureParameterSets[ppsID] else { throw fail("a slice refers to PPS \(ppsID), which was never sent") }
        guard let sps = sequenceParameterSets[pps.spsID] else { throw fail("PPS \(ppsID) refers to SPS \(pps.spsID), which was never sent") }
        if sps.separateColourPlane { try reader.skipBits(2) }
        try reader.skipBits(sps.log2MaxFrameNum)
        var fieldPic = false
        if !sps.frameMbsOnly {
            fieldPic = try reader.flag()
            if fieldPic { try reader.skipBits(1) }
        }
        if isIDR { _ = try reader.unsignedExpGolomb() }
        if sps.picOrderCountType == 0 {
            try reader.skipBits(sps.log2MaxPicOrderCountLsb)
            if pps.bottomFieldPicOrderInFramePresent && !fieldPic { _ = try reader.signedExpGolomb() }
        }
        if sps.picOrderCountType == 1 && !sps.deltaPicOrderAlwaysZero {
            _ = try reader.signedExpGolomb()
            if pps.bottomFieldPicOrderInFramePresent && !fieldPic { _ = try reader.signedExpGolomb() }
        }
        if pps.redundantPicCountPresent { _ = try reader.unsignedExpGolomb() }
        if isB { try reader.skipBits(1) }
        var refL0 = pps.numRefIdxL0Default
        var refL1 = pps.numRefIdxL1Default
        if isP || isSP || isB {
            if try reader.flag() {
                refL0 = try reader.unsignedExpGolomb(max: 31, "num_ref_idx_l0_active_minus1") + 1
                if isB { refL1 = try reader.unsignedExpGolomb(max: 31, "num_ref_idx_l1_active_minus1") + 1 }
            }
        }
        // ref_pic_list_modification() (7.3.3.1), for slice NAL units 1 to 5.
        if !isI && !isSI { try skipReferenceListModification(&reader) }
        if isB { try skipReferenceListModification(&reader) }
        if (pps.weightedPred && (isP || isSP)) || (pps.weightedBipredIdc == 1 && isB) {
            // pred_weight_table() (7.3.3.2).
            _ = try reader.unsignedExpGolomb()
            if sps.chromaArrayType != 0 { _ = try reader.unsignedExpGolomb() }
            for list in 0..<(isB ? 2 : 1) {
                for _ in 0..<(list == 0 ? refL0 : refL1) {
                    if try reader.flag() {
                        _ = try reader.signedExpGolomb()
                        _ = try reader.signedExpGolomb()
                    }
                    if sps.chromaArrayType != 0, try reader.flag() {
                        for _ in 0..<4 { _ = try reader.signedExpGolomb() }
                    }
                }
            }
        }
        if nalRefIdc != 0 {
            // dec_ref_pic_marking() (7.3.3.3).
            if isIDR {
                try reader.skipBits(2)
            } else if try reader.flag() {
                var operations = 0
                while true {
                    let operation = try reader.unsignedExpGolomb(max: 6, "memory_management_control_operation")
                    if operation == 0 { break }
                    operations += 1
                    guard operations <= 66 else { throw fail("a slice header has more than 66 memory management operations") }
                    if operation == 1 || operation == 3 { _ = try reader.unsignedExpGolomb() }
                    if operation == 2 { _ = try reader.unsignedExpGolomb() }
                    if operation == 3 || operation == 6 { _ = try reader.unsignedExpGolomb() }
                    if operation == 4 { _ = try reader.unsignedExpGolomb() }
                }
            }
        }
        if pps.entropyCodingMode && !isI && !isSI { _ = try reader.unsignedExpGolomb() }
        _ = try reader.signedExpGolomb()
        if isSP || isSI {
            if isSP { try reader.skipBits(1) }
            _ = try reader.signedExpGolomb()
        }
        if pps.deblockingFilterControlPresent {
            let disable = try reader.unsignedExpGolomb(max: 6, "disable_deblocking_filter_idc")
            if disable != 1 {
                _ = try reader.signedExpGolomb()
                _ = try reader.signedExpGolomb()
            }
        }
        if pps.numSliceGroups > 1 && (3...5).contains(pps.sliceGroupMapType) {
            // Ceil(Log2(PicSizeInMapUnits ÷ SliceGroupChangeRate + 1)), with exact division (7.4.3).
            let rate = pps.sliceGroupChangeRate
            var bits = 0
            while rate << bits < sps.picSizeInMapUnits + rate { bits += 1 }
            try reader.skipBits(bits)
        }
        return 1 + reader.consumedBytes
    }

    /// ref_pic_list_modification() for one list: a flag, then operations until modification_of_pic_nums_idc 3.
    private func skipReferenceListModification(_ reader: inout NALBitReader) throws(SegmentCryptoError) {
        guard try reader.flag() else { return }
        var operations = 0
        while true {
            let operation = try reader.unsignedExpGolomb(max: 5, "modification_of_pic_nums_idc")
            if operation == 3 { break }
            operations += 1
            guard operations <= 33 else { throw fail("a slice header has more than 33 reference list modifications") }
            _ = try reader.unsignedExpGolomb()
        }
    }
}
