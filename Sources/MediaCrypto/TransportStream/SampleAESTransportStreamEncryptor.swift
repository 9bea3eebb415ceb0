public import StowageCrypto

/// Encrypts a clear MPEG-2 transport stream segment with HLS `METHOD=SAMPLE-AES` (Apple, "MPEG-2 Stream
/// Encryption Format for HTTP Live Streaming"): the inverse of ``SampleAESTransportStreamDecryptor``.
///
/// H.264 (0x1B), AAC in ADTS (0x0F), AC-3 (0x81) and E-AC-3 (0x87) streams are encrypted (2.2 and 2.3; H.264 NAL
/// units get emulation prevention applied again after encryption) and signaled in the PMT as 3.0 requires:
/// stream types 0xDB, 0xCF, 0xC1 and 0xC2, a private data indicator descriptor (`zavc`, `aacd`, `ac3d`, `ec3d`),
/// and for audio a registration descriptor `apad` carrying the audio setup information (2.3.2) derived from the
/// stream's first frame. Other media stream types that SAMPLE-AES cannot protect in a transport stream (HEVC,
/// MPEG audio...) are refused rather than left clear; data streams (ID3, SCTE-35) pass through.
///
/// The PMT goes out once the first frame of each audio stream has been seen; the output between it and that
/// frame waits (bounded like the decryptor's).
///
/// ```swift
/// let encryptor = try SampleAESTransportStreamEncryptor(key: key, iv: iv, segment: "seg12.ts")
/// for chunk in chunks { try encryptor.process(chunk) { try output.write($0) } }
/// try encryptor.finish { try output.write($0) }
/// ```
public final class SampleAESTransportStreamEncryptor: SegmentTransform {
    private let rewriter: SampleAESTransportStreamRewriter

    /// - Parameters:
    ///   - key: The 16-byte AES-128 key.
    ///   - iv: 16 bytes: the IV the playlist's `EXT-X-KEY` will carry (or the media sequence number).
    ///   - segment: The segment's name, used in errors.
    /// - Throws: ``SegmentCryptoError/invalidKey(segment:)``, ``SegmentCryptoError/invalidIV(segment:)`` or
    ///   ``SegmentCryptoError/cryptoFailure(segment:)``.
    public init(key: SecretBytes, iv: [UInt8], segment: String) throws(SegmentCryptoError) {
        rewriter = try SampleAESTransportStreamRewriter(key: key, iv: iv, direction: .encrypt, segment: segment)
    }

    /// Encrypts the next chunk of the segment; output follows through `emit`, possibly later.
    /// - Throws: ``SegmentCryptoError`` for a damaged or unsupported segment, or what `emit` throws.
    public func process(_ chunk: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try rewriter.process(chunk, emit: emit)
    }

    /// Ends the segment: encrypts and emits the last PES packets.
    /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` when the segment is truncated or lacks
    ///   its PAT or PMT.
    public func finish(emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try rewriter.finish(emit: emit)
    }
}
