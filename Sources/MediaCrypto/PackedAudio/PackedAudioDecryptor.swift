public import StowageCrypto

/// Decrypts SAMPLE-AES packed audio (RFC 8216bis 3.4, Apple's "MPEG-2 Stream Encryption Format for HTTP Live
/// Streaming" 2.3 and 4): a segment of raw AAC (ADTS), AC-3 or E-AC-3 frames after an ID3 tag carrying the
/// `com.apple.streaming.transportStreamTimestamp` PRIV frame, as Apple's tools and Shaka Packager write audio-only
/// renditions. Every frame is encrypted as in a TS audio PES (``SampleAESAudioTransform``): its header and 16 bytes
/// clear, then whole blocks as one CBC chain from the IV, a partial block clear.
///
/// ID3 tags (at the start, and any between frames) pass through unchanged; the frames are decrypted one by one as
/// they complete, so memory holds at most one frame (a few KB). The output has the input's length.
///
/// ```swift
/// let decryptor = try PackedAudioDecryptor(key: key, iv: iv, segment: "audio_1.aac")
/// for chunk in chunks { try decryptor.process(chunk) { try output.write($0) } }
/// try decryptor.finish { try output.write($0) }
/// ```
public final class PackedAudioDecryptor: SegmentTransform {
    /// An ID3 tag or a frame longer than this is refused (real ones are a few KB).
    static let maximumUnit = 1 << 20

    private let cipher: SampleAESBlockCipher
    private let segment: String
    private var codec: SampleAESCodec?
    /// Bytes of the unit (tag or frame) being gathered.
    private var pending: [UInt8] = []
    /// Where the next unit starts in the segment, for errors.
    private var position = 0
    private(set) var frameCount = 0

    /// - Parameters:
    ///   - key: the 16-byte key; `iv`: the 16-byte IV (the EXT-X-KEY IV, or the media sequence number).
    ///   - segment: the segment's name, used in errors.
    public init(key: SecretBytes, iv: [UInt8], segment: String) throws(SegmentCryptoError) {
        cipher = try SampleAESBlockCipher(key: key, iv: iv, direction: .decrypt, segment: segment)
        self.segment = segment
    }

    deinit {
        // Clear audio passes through this buffer.
        pending.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
    }

    public func process(_ chunk: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        var offset = 0
        while offset < chunk.count {
            // Gather until the unit's length is known and then until it is whole.
            let needed = try unitLength() ?? max(10, pending.count + 1)
            let take = min(needed - pending.count, chunk.count - offset)
            if take > 0 {
                pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[offset..<(offset + take)]))
                offset += take
            }
            try completeUnits(emit: emit)
        }
    }

    public func finish(emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        if !pending.isEmpty {
            try completeUnits(emit: emit)
            guard pending.isEmpty else {
                throw SegmentCryptoError.malformedContainer(
                    segment: segment,
                    detail: "the segment ends \(pending.count) bytes into a unit at byte \(position): it is truncated"
                )
            }
        }
        guard frameCount > 0 else {
            throw SegmentCryptoError.malformedContainer(segment: segment, detail: "the packed audio segment holds no audio frame")
        }
    }

    /// The length of the unit `pending` starts, once enough of it is there to tell; nil before.
    private func unitLength() throws(SegmentCryptoError) -> Int? {
        guard pending.count >= 3 else { return nil }
        if pendingStartsWithTag {
            guard pending.count >= 10 else { return nil }
            // ID3v2: a 10-byte header, a synchsafe size, and a 10-byte footer when flag 0x10 is set.
            let size = pending[6..<10].reduce(0) { $0 << 7 | Int($1 & 0x7F) }
            let length = 10 + size + (pending[5] & 0x10 != 0 ? 10 : 0)
            guard length <= Self.maximumUnit else { throw malformed("an ID3 tag of \(length) bytes at byte \(position)") }
            return length
        }
        guard pending.count >= AudioFrameHeader.minimumBytes else { return nil }
        let codec: SampleAESCodec
        if let known = self.codec {
            codec = known
        } else {
            codec = try detectCodec()
            self.codec = codec
        }
        let header = pending.withUnsafeBufferPointer { AudioFrameHeader.parse($0.baseAddress!, available: $0.count, codec: codec) }
        guard let header, header.frameLength > 0 else {
            throw malformed("no \(codec.frameName) frame header at byte \(position)")
        }
        return header.frameLength
    }

    /// The codec of the first frame: ADTS (sync 0xFFF) or AC-3 / E-AC-3 (sync 0x0B77, told apart by bsid).
    private func detectCodec() throws(SegmentCryptoError) -> SampleAESCodec {
        if let codec = AudioFrameHeader.codec(atStartOf: pending) { return codec }
        throw malformed("byte \(position) starts neither an ID3 tag nor an ADTS, AC-3 or E-AC-3 frame")
    }

    /// Whether `pending` starts with an ID3v2 tag ("ID3").
    private var pendingStartsWithTag: Bool { pending.count >= 3 && pending[0] == 0x49 && pending[1] == 0x44 && pending[2] == 0x33 }

    /// Decrypts and emits every whole unit `pending` holds.
    private func completeUnits(emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        while let length = try unitLength(), pending.count >= length {
            try completeUnit(length, emit: emit)
        }
    }

    private func completeUnit(_ length: Int, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        if !pendingStartsWithTag, let codec {
            try pending.withUnsafeMutableBufferPointer { (buffer) throws(SegmentCryptoError) in
                _ = try SampleAESAudioTransform.transform(
                    buffer.baseAddress!,
                    count: length,
                    codec: codec,
                    cipher: cipher,
                    segment: segment,
                    pid: 0
                )
            }
            frameCount += 1
        }
        try pending.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        pending.removeFirst(length)
        position += length
    }

    private func malformed(_ detail: String) -> SegmentCryptoError {
        .malformedContainer(segment: segment, detail: "packed audio: \(detail)")
    }
}
