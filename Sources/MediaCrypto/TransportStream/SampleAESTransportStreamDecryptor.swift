public import StowageCrypto

/// Decrypts an HLS `METHOD=SAMPLE-AES` MPEG-2 transport stream segment (Apple, "MPEG-2 Stream Encryption Format
/// for HTTP Live Streaming") into a clear transport stream that any demuxer reads.
///
/// Protected streams are found in the PMT by their stream types (0xDB H.264, 0xCF AAC in ADTS, 0xC1 AC-3, 0xC2
/// E-AC-3). Their PES packets are reassembled per PID, decrypted (H.264 NAL units of type 1 and 5 after removing the
/// outer layer of emulation prevention; every audio frame), and repacketized; the PMT gets the clear stream types
/// back (0x1B, 0x0F, 0x81, 0x87) without the SAMPLE-AES descriptors and with a new CRC. PES_packet_length, PTS and
/// DTS, PCRs, random-access flags and continuity counters are kept (PES_packet_length corrected where the payload
/// shrank), and every other PID passes through untouched.
///
/// The clear segment has the encrypted one's size, and every packet stays where it was: a PES packet that shrank
/// (the emulation prevention bytes removed) ends in adaptation-field stuffing rather than in fewer packets.
///
/// Streaming: feed the segment in chunks of any size; memory stays at one PES packet per protected PID (at most
/// 32 MiB each) plus the output waiting behind it. The segment must carry a PAT and PMT (RFC 8216 3.2: for a segment
/// that relies on `EXT-X-MAP`, feed the map's bytes first); media may come before them.
///
/// PES packets split between segments (byte-count segmenters) are decrypted whole when the `neighbours` are given:
/// the part in the previous segment is read from its last payload_unit_start on the PID, the part in the next up to
/// its next one, and only this segment's packets are emitted. Without neighbours such a segment is refused.
///
/// ```swift
/// let decryptor = try SampleAESTransportStreamDecryptor(key: key, iv: iv, segment: "seg12.ts")
/// for chunk in chunks { try decryptor.process(chunk) { try output.write($0) } }
/// try decryptor.finish { try output.write($0) }
/// ```
public final class SampleAESTransportStreamDecryptor: SegmentTransform {
    private let rewriter: SampleAESTransportStreamRewriter

    /// - Parameters:
    ///   - key: The 16-byte AES-128 key.
    ///   - iv: 16 bytes: the IV attribute, or the media sequence number (RFC 8216bis 5.2).
    ///   - segment: The segment's name, used in errors.
    ///   - promptOutput: emit clear packets after each chunk as soon as no incomplete PES packet holds them back (for
    ///     a player waiting on a segment still arriving), rather than in batches of 256 KiB (fewer, larger writes).
    /// - Throws: ``SegmentCryptoError/invalidKey(segment:)``, ``SegmentCryptoError/invalidIV(segment:)`` or
    ///   ``SegmentCryptoError/cryptoFailure(segment:)``.
    ///   - neighbours: the previous and next segments of the rendition, for PES packets split between segments.
    public init(
        key: SecretBytes,
        iv: [UInt8],
        segment: String,
        promptOutput: Bool = false,
        neighbours: TransportStreamNeighbours = .none
    ) throws(SegmentCryptoError) {
        rewriter = try SampleAESTransportStreamRewriter(
            key: key,
            iv: iv,
            direction: .decrypt,
            segment: segment,
            emitThreshold: promptOutput ? 0 : SampleAESTransportStreamRewriter.batchBytes,
            neighbours: neighbours
        )
    }

    /// Decrypts the next chunk of the segment; clear output follows through `emit`, possibly later.
    /// - Throws: ``SegmentCryptoError`` (`malformed_container`, `limit_exceeded`, `unsupported_stream`,
    ///   `crypto_failure`) for a damaged or unsupported segment, or what `emit` throws.
    public func process(_ chunk: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try rewriter.process(chunk, emit: emit)
    }

    /// Whether ``finish(emit:)`` would refuse as `neighbour_segment_pending` (``TransportStreamNeighbours/nextPending``): a
    /// PES packet open at the end of what was fed may go on in the next segment, still downloading. Ask once the whole
    /// segment was fed; give the next segment with ``supplyNext(_:)`` when it has arrived, then finish.
    public var needsNextSegment: Bool { rewriter.needsNextSegment }

    /// Whether packets wait for the previous segment, still downloading (``TransportStreamNeighbours/previousPending``):
    /// they continue one of its PES packets. Give it with ``supplyPrevious(_:)`` when it has arrived.
    public var needsPreviousSegment: Bool { rewriter.needsPreviousSegment }

    /// Gives the previous segment, arrived since the decryptor was made; the packets that waited for it are handled
    /// and their output follows with the next ``process(_:emit:)`` or ``finish(emit:)``.
    /// - Throws: ``SegmentCryptoError`` for a PES packet that cannot be decrypted with it.
    public func supplyPrevious(_ previous: TransportStreamNeighbour) throws {
        try rewriter.supplyPrevious(previous)
    }

    /// Gives the next segment, arrived since the decryptor was made, before ``finish(emit:)``.
    public func supplyNext(_ next: TransportStreamNeighbour) {
        rewriter.supplyNext(next)
    }

    /// Ends the segment: decrypts and emits the last PES packets.
    /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` when the segment is truncated (a partial
    ///   packet, a PES packet shorter than it declares) or lacks its PAT or PMT.
    public func finish(emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try rewriter.finish(emit: emit)
    }
}
