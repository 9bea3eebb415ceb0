/// Splits H.264 samples into `cbcs` subsamples (ISO/IEC 23001-7 10.2, 10.4): each slice NAL unit (types 1 to 5) is
/// clear up to the end of its slice header and protected after it; every other NAL unit (SPS, PPS, SEI, AUD...) is
/// clear and joins the clear part of the next subsample. A clear run longer than BytesOfClearData's 16 bits allows is
/// split into (65535, 0) subsamples (ISO/IEC 23001-7 7.2.2).
struct VideoSubsampleLayout {
    private var parser: AVCSliceHeaderParser
    private let segment: String

    init(avcConfiguration: [UInt8], segment: String) throws(SegmentCryptoError) {
        parser = try AVCSliceHeaderParser(avcConfiguration: avcConfiguration, segment: segment)
        self.segment = segment
    }

    /// The subsamples of the sample in `bytes[sample]`, which sum to its size.
    mutating func subsamples(of bytes: [UInt8], sample: Range<Int>) throws(SegmentCryptoError) -> [Subsample] {
        var result: [Subsample] = []
        var clear = 0
        var position = sample.lowerBound
        let lengthSize = parser.nalLengthSize
        while position < sample.upperBound {
            guard sample.upperBound - position >= lengthSize else {
                throw .malformedContainer(segment: segment, detail: "an H.264 sample ends inside a NAL unit length")
            }
            var length = 0
            for index in 0..<lengthSize { length = length << 8 | Int(bytes[position + index]) }
            position += lengthSize
            guard length <= sample.upperBound - position else {
                throw .malformedContainer(
                    segment: segment,
                    detail: "an H.264 NAL unit claims \(length) bytes, its sample has \(sample.upperBound - position) left"
                )
            }
            let nal = position..<(position + length)
            position += length
            let type = length > 0 ? bytes[nal.lowerBound] & 0x1F : 0
            try parser.observe(bytes, nal: nal)
            guard (1...5).contains(type) else {
                clear += lengthSize + length
                continue
            }
            let header = try parser.clearHeaderLength(bytes, nal: nal)
            clear += lengthSize + header
            let protected = length - header
            guard protected > 0 else { continue }
            Self.append(&result, clear: clear, protected: protected)
            clear = 0
        }
        if clear > 0 || result.isEmpty { Self.append(&result, clear: clear, protected: 0) }
        return result
    }

    private static func append(_ result: inout [Subsample], clear: Int, protected: Int) {
        var clear = clear
        while clear > 0xFFFF {
            result.append(Subsample(clearBytes: 0xFFFF, protectedBytes: 0))
            clear -= 0xFFFF
        }
        result.append(Subsample(clearBytes: clear, protectedBytes: protected))
    }
}
