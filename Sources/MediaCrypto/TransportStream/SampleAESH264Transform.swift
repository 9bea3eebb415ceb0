/// SAMPLE-AES for H.264 video in a PES payload (Apple, "MPEG-2 Stream Encryption Format for HTTP Live Streaming",
/// 2.2 H.264 Video Streams).
///
/// Only NAL units of type 1 (non-IDR slice) and 5 (IDR slice) are protected. In a protected NAL unit the first
/// 32 bytes (the type byte and a 31-byte leader) are clear; then, while more than 16 bytes remain, one 16-byte
/// block is encrypted and up to 144 bytes follow in the clear. A NAL unit of 48 bytes or less therefore stays
/// clear, and so does a final remainder of exactly 16 bytes. All encrypted blocks of a NAL unit form one CBC chain
/// from the IV (Listing 2-1).
///
/// 2.2: "Each NAL unit is formed with start code emulation prevention applied": the encryptor encrypts the NAL
/// unit as it stood in the byte stream (with its own emulation prevention bytes) and then applies emulation
/// prevention again, so the ciphertext cannot imitate a start code. The decryptor removes exactly that outer
/// layer, decrypts, and writes the result as it is: the original NAL unit, with its original escaping.
enum SampleAESH264Transform {
    /// Listing 2-1: nal_unit_type_byte plus unencrypted_leader.
    static let clearLeader = 32
    /// One encrypted block, then 144 clear bytes.
    static let patternStride = 160
    /// A NAL unit this long or shorter has no encrypted block.
    static let largestClearNALUnit = 48

    /// Whether a NAL unit is protected: type 1 or 5 and longer than 48 bytes.
    @inline(__always)
    static func isProtected(_ nalUnit: UnsafePointer<UInt8>, length: Int) -> Bool {
        guard length > largestClearNALUnit else { return false }
        let type = nalUnit[0] & 0x1F
        return type == 1 || type == 5
    }

    /// The number of encrypted blocks in a protected NAL unit of `length` bytes (without outer escaping).
    @inline(__always)
    static func encryptedBlockCount(length: Int) -> Int {
        length - clearLeader > 16 ? (length - clearLeader - 17) / patternStride + 1 : 0
    }

    /// Decrypts the access unit in `payload[0..<count]` in place and returns its new length: shorter by the
    /// emulation prevention bytes the encryptor added.
    ///
    /// - Parameters:
    ///   - emulationPrevention: scratch space for the positions of emulation prevention bytes, kept between calls so
    ///     that nothing is allocated per NAL unit.
    ///   - boundary: a position in the input (where one PES packet's part of a NAL unit ends and the next one's
    ///     begins); `removedBeforeBoundary` is increased by the bytes removed before it, so that it sits at
    ///     `boundary - removedBeforeBoundary` in the output.
    static func decrypt(
        _ payload: UnsafeMutablePointer<UInt8>,
        count: Int,
        cipher: SampleAESBlockCipher,
        emulationPrevention: inout [Int],
        segment: String,
        pid: UInt16,
        boundary: Int = .max,
        removedBeforeBoundary: inout Int
    ) throws(SegmentCryptoError) -> Int {
        guard var startCode = try firstStartCode(payload, count: count, segment: segment, pid: pid) else { return count }
        var read = 0
        var write = 0
        while true {
            let nalStart = startCode + 3
            // One pass finds the end of the NAL unit and the emulation prevention bytes in it.
            emulationPrevention.removeAll(keepingCapacity: true)
            let next = AnnexBScanner.startCode(in: payload, from: nalStart, end: count, emulationPrevention: &emulationPrevention)
            let nalEnd = trimmingTrailingZeros(payload, from: nalStart, to: next ?? count)
            // Leading zeros and the start code, moved down over the bytes removed so far.
            TransportStreamBuffer.move(payload + write, payload + read, nalStart - read)
            write += nalStart - read
            let length = nalEnd - nalStart
            if isProtected(payload + nalStart, length: length) {
                // Remove the outer layer of emulation prevention, compacting the NAL unit down to `write`.
                var from = nalStart
                if boundary < nalEnd {
                    for epb in emulationPrevention where epb < boundary { removedBeforeBoundary += 1 }
                } else if boundary != .max {
                    removedBeforeBoundary += emulationPrevention.count
                }
                for epb in emulationPrevention {
                    TransportStreamBuffer.move(payload + write, payload + from, epb - from)
                    write += epb - from
                    from = epb + 1
                }
                TransportStreamBuffer.move(payload + write, payload + from, nalEnd - from)
                write += nalEnd - from
                let clearLength = length - emulationPrevention.count
                try cipher.transform(
                    blocksAt: payload + write - clearLength + clearLeader,
                    stride: patternStride,
                    blockCount: encryptedBlockCount(length: clearLength)
                )
            } else {
                TransportStreamBuffer.move(payload + write, payload + nalStart, length)
                write += length
            }
            read = nalEnd
            guard let next else { break }
            startCode = next
        }
        TransportStreamBuffer.move(payload + write, payload + read, count - read)
        return write + count - read
    }

    /// ``decrypt(_:count:cipher:emulationPrevention:segment:pid:boundary:removedBeforeBoundary:)`` without a boundary.
    static func decrypt(
        _ payload: UnsafeMutablePointer<UInt8>,
        count: Int,
        cipher: SampleAESBlockCipher,
        emulationPrevention: inout [Int],
        segment: String,
        pid: UInt16
    ) throws(SegmentCryptoError) -> Int {
        var removed = 0
        return try decrypt(
            payload,
            count: count,
            cipher: cipher,
            emulationPrevention: &emulationPrevention,
            segment: segment,
            pid: pid,
            removedBeforeBoundary: &removed
        )
    }

    /// Encrypts the access unit in `payload[0..<count]` (in place, then escaped) and appends it to `output`.
    static func encrypt(
        _ payload: UnsafeMutablePointer<UInt8>,
        count: Int,
        into output: TransportStreamBuffer,
        cipher: SampleAESBlockCipher,
        segment: String,
        pid: UInt16
    ) throws(SegmentCryptoError) {
        guard var startCode = try firstStartCode(payload, count: count, segment: segment, pid: pid) else {
            output.append(payload, count: count)
            return
        }
        var read = 0
        while true {
            let nalStart = startCode + 3
            let next = AnnexBScanner.startCode(in: payload, from: nalStart, end: count)
            let nalEnd = trimmingTrailingZeros(payload, from: nalStart, to: next ?? count)
            let length = nalEnd - nalStart
            if isProtected(payload + nalStart, length: length) {
                output.append(payload + read, count: nalStart - read)
                try cipher.transform(
                    blocksAt: payload + nalStart + clearLeader,
                    stride: patternStride,
                    blockCount: encryptedBlockCount(length: length)
                )
                appendEscaped(payload + nalStart, count: length, to: output)
            } else {
                output.append(payload + read, count: nalEnd - read)
            }
            read = nalEnd
            guard let next else { break }
            startCode = next
        }
        output.append(payload + read, count: count - read)
    }

    /// The first start code; nil when the payload has none. Anything but zero bytes before it would be the tail
    /// of a NAL unit begun in the previous PES packet, which cannot be decrypted on its own.
    private static func firstStartCode(
        _ payload: UnsafeMutablePointer<UInt8>,
        count: Int,
        segment: String,
        pid: UInt16
    ) throws(SegmentCryptoError) -> Int? {
        let first = AnnexBScanner.startCode(in: payload, from: 0, end: count)
        let leading = first ?? count
        for index in 0..<leading where payload[index] != 0 {
            throw .unsupportedStream(
                segment: segment,
                detail:
                    "a PES packet on PID \(TransportStreamText.pid(pid)) begins inside a NAL unit that no PES packet before it in the segment holds"
            )
        }
        return first
    }

    /// Annex B: zero bytes before a start code are trailing_zero_8bits (or the zero_byte of a 4-byte start code),
    /// not part of the NAL unit.
    @inline(__always)
    private static func trimmingTrailingZeros(_ p: UnsafePointer<UInt8>, from start: Int, to end: Int) -> Int {
        var end = end
        while end > start && p[end - 1] == 0 { end -= 1 }
        return end
    }

    /// Appends `p[0..<count]` with emulation prevention applied (ISO/IEC 14496-10 7.4.1): `03` before any byte
    /// of 0 to 3 that follows two zeros, and after a final zero byte.
    private static func appendEscaped(_ p: UnsafePointer<UInt8>, count: Int, to output: TransportStreamBuffer) {
        output.reserveCapacity(output.count + count + count / 2 + 2)
        var read = 0
        while let index = AnnexBScanner.byteNeedingEscape(in: p, from: read, end: count) {
            output.append(p + read, count: index - read)
            output.append(0x03)
            read = index
        }
        output.append(p + read, count: count - read)
        if count > 0 && p[count - 1] == 0 { output.append(0x03) }
    }
}
