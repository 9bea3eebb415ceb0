/// One `stsd` entry as far as encryption cares.
struct SampleEntryDescription: Sendable {
    /// The entry's own type: `encv`, `enca`, `avc1`...
    var format: FourCC
    var protection: SampleEntryProtection?
    /// An `enc*` entry this parser cannot look inside (a track that is neither video nor audio).
    var isOpaqueEncrypted = false
    /// The `avcC` payload (ISO/IEC 14496-15 5.3.3.1), kept to find slice headers when encrypting.
    var avcConfiguration: [UInt8]?

    /// The format of the clear samples.
    var originalFormat: FourCC { protection?.originalFormat ?? format }
}

/// A sample entry's protection: `schm` and `tenc` inside its `sinf` (ISO/IEC 14496-12 8.12).
struct SampleEntryProtection: Sendable, Hashable {
    var scheme: FourCC
    var originalFormat: FourCC
    /// `nil` when the `sinf` has no `tenc` (a scheme other than Common Encryption).
    var defaults: EncryptionParameters?
}
