/// How one track of an init section is protected, as its `sinf` box says (ISO/IEC 14496-12 8.12,
/// ISO/IEC 23001-7 8.1 and 8.2).
///
/// A clear track (no `sinf`, such as a closed-caption track next to encrypted video) is listed too, with
/// `scheme == nil` and `isProtected == false`.
public struct TrackProtection: Sendable, Hashable {
    /// The track's `tkhd` track_ID, which `tfhd` boxes refer to.
    public let trackID: UInt32
    /// The `hdlr` handler type: `vide`, `soun`, `text`, `clcp`...
    public let handler: String
    /// The format of the clear samples: the `frma` data format (`avc1`, `mp4a`...) of an encrypted entry, or the
    /// sample entry's own type for a clear track.
    public let originalFormat: String
    /// The `schm` scheme type (`cbcs`, `cenc`, `cbc1`, `cens`); `nil` for a clear track.
    public let scheme: String?
    /// The `tenc` default_KID as 32 lowercase hex digits; `nil` for a clear track.
    public let defaultKID: String?
    /// The `tenc` default_isProtected: whether samples are encrypted unless a sample group says otherwise.
    public let isProtected: Bool
    /// The `tenc` default_Per_Sample_IV_Size: 0 (the constant IV applies), 8 or 16.
    public let perSampleIVSize: Int
    /// The `tenc` default_constant_IV (ISO/IEC 23001-7 8.2.2), present when `perSampleIVSize` is 0.
    public let constantIV: [UInt8]?
    /// The `tenc` default_crypt_byte_block: encrypted 16-byte blocks per pattern (1 for `cbcs` video).
    public let cryptByteBlock: Int
    /// The `tenc` default_skip_byte_block: clear 16-byte blocks per pattern (9 for `cbcs` video, 0 for audio).
    public let skipByteBlock: Int
}
