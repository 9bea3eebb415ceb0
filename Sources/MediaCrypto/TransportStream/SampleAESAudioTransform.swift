/// SAMPLE-AES for audio frames in a PES payload (Apple, "MPEG-2 Stream Encryption Format for HTTP Live
/// Streaming", 2.3 Audio Streams). The transform is the same in both directions and keeps every length.
///
/// - AAC in ADTS: the 7- or 9-byte ADTS header and 16 more bytes are clear, then every whole 16-byte block
///   is encrypted and a partial block at the end stays clear.
/// - AC-3 and E-AC-3: the same from the sync word, with no header exception: 16 clear bytes, then
///   whole blocks. The frame size comes from frmsizecod (AC-3) or frmsiz (E-AC-3).
///
/// Each frame is its own protected block: one CBC chain from the IV.
enum SampleAESAudioTransform {
    static let clearLeader = 16

    /// Transforms the frames of `payload[0..<count]` in place. Calls `firstFrame` with the header of the first
    /// frame, before it is transformed (the encryptor derives the audio setup information from it).
    ///
    /// - Parameter allowIncompleteTail: a last frame that goes on past `count` (into the next PES packet) is left as it
    ///   is rather than refused.
    /// - Returns: the bytes of whole frames transformed: `count` unless a tail was left.
    @discardableResult
    static func transform(
        _ payload: UnsafeMutablePointer<UInt8>,
        count: Int,
        codec: SampleAESCodec,
        cipher: SampleAESBlockCipher,
        segment: String,
        pid: UInt16,
        allowIncompleteTail: Bool = false,
        firstFrame: (AudioFrameHeader, UnsafePointer<UInt8>) throws(SegmentCryptoError) -> Void = { _, _ in }
    ) throws(SegmentCryptoError) -> Int {
        var offset = 0
        while offset < count {
            let frame = payload + offset
            // A header cut short (9 bytes is the longest, ADTS with CRC) or a frame cut short goes on in the next PES.
            if allowIncompleteTail && count - offset < 9 { return offset }
            if allowIncompleteTail, let header = AudioFrameHeader.parse(frame, available: count - offset, codec: codec),
                header.frameLength > count - offset
            {
                return offset
            }
            guard let header = AudioFrameHeader.parse(frame, available: count - offset, codec: codec) else {
                throw .malformedContainer(
                    segment: segment,
                    detail:
                        "PID \(TransportStreamText.pid(pid)): no \(codec.frameName) frame header at byte \(offset) of a PES payload of \(count) bytes"
                )
            }
            guard header.frameLength <= count - offset else {
                throw .malformedContainer(
                    segment: segment,
                    detail:
                        "PID \(TransportStreamText.pid(pid)): a \(codec.frameName) frame of \(header.frameLength) bytes at byte \(offset) runs past the end of its PES payload (\(count) bytes)"
                )
            }
            if offset == 0 { try firstFrame(header, frame) }
            let leader = header.headerLength + clearLeader
            if header.frameLength > leader {
                let blocks = (header.frameLength - leader) / 16
                try cipher.transform(frame + leader, byteCount: blocks * 16)
            }
            offset += header.frameLength
        }
        return count
    }
}

extension SampleAESCodec {
    /// The frame format's name, for error details.
    var frameName: String {
        switch self {
        case .h264: "H.264"
        case .aac: "ADTS"
        case .ac3: "AC-3"
        case .eac3: "E-AC-3"
        }
    }
}
