/// Recognizes an MPEG-2 transport stream from its first bytes.
public enum TransportStreamDetection {
    /// Whether `prefix` starts like a transport stream: the sync byte 0x47 at offsets 0 and 188, and at 376 when
    /// the prefix is that long (ISO/IEC 13818-1 2.4.3.2). Needs at least 189 bytes; a shorter prefix is not
    /// recognized.
    ///
    /// ```swift
    /// if TransportStreamDetection.looksLikeTransportStream(Array(firstBytes.prefix(377))) { ... }
    /// ```
    public static func looksLikeTransportStream(_ prefix: [UInt8]) -> Bool {
        let sync: UInt8 = 0x47
        guard prefix.count > 188, prefix[0] == sync, prefix[188] == sync else { return false }
        return prefix.count <= 376 || prefix[376] == sync
    }
}
