/// One sample of a movie fragment: where its bytes lie in the segment and how they are encrypted.
struct FragmentSample {
    /// Position of the sample's first byte, counted from the segment's first byte.
    var offset: Int
    var size: Int
    var trackID: UInt32
    var isProtected = false
    var cryptByteBlock: UInt8 = 0
    var skipByteBlock: UInt8 = 0
    /// Index of the sample's 16-byte IV in ``MovieFragment/ivTable``; -1 when clear.
    var ivIndex: Int32 = -1
    var subsampleStart: Int32 = 0
    /// 0: the whole sample is one protected range (ISO/IEC 23001-7 9.5, whole-sample encryption).
    var subsampleCount: Int32 = 0

    var end: Int { offset + size }
}

/// A `senc` subsample entry (ISO/IEC 23001-7 7.2.2): clear bytes, then protected bytes.
struct Subsample: Equatable {
    var clearBytes: Int
    var protectedBytes: Int
}
