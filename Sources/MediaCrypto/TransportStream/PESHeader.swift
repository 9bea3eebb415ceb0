/// The fixed part of a PES packet header (ISO/IEC 13818-1 2.4.3.6-2.4.3.7).
enum PESHeader {
    /// Stream ids whose PES packets have no optional header: program_stream_map, padding_stream,
    /// private_stream_2, ECM, EMM, program_stream_directory, DSMCC_stream, ITU-T H.222.1 type E.
    static func hasOptionalHeader(streamID: UInt8) -> Bool {
        ![0xBC, 0xBE, 0xBF, 0xF0, 0xF1, 0xFF, 0xF2, 0xF8].contains(streamID)
    }

    /// Video streams (0xE0-0xEF) may leave PES_packet_length at 0 (2.4.3.7).
    static func isVideo(streamID: UInt8) -> Bool {
        streamID & 0xF0 == 0xE0
    }

    /// The PES_packet_length field of a PES packet whose first 6 bytes are at `pes`, after checking the
    /// packet_start_code_prefix; returns the whole packet's size, or 0 for an unbounded one.
    static func declaredSize(_ pes: UnsafePointer<UInt8>, pid: UInt16, packetIndex: Int, segment: String) throws(SegmentCryptoError) -> Int {
        guard pes[0] == 0, pes[1] == 0, pes[2] == 1 else {
            throw .malformedContainer(
                segment: segment,
                detail: "packet \(packetIndex): the PES packet on PID \(TransportStreamText.pid(pid)) does not start with 00 00 01"
            )
        }
        let length = Int(pes[4]) << 8 | Int(pes[5])
        return length == 0 ? 0 : 6 + length
    }

    /// The size of the header of a whole PES packet of `count` bytes, after checking its marker bits and that it
    /// is not scrambled at the PES level.
    static func headerSize(_ pes: UnsafePointer<UInt8>, count: Int, pid: UInt16, packetIndex: Int, segment: String) throws(SegmentCryptoError) -> Int
    {
        guard hasOptionalHeader(streamID: pes[3]) else { return 6 }
        guard count >= 9, pes[6] & 0xC0 == 0x80 else {
            throw .malformedContainer(
                segment: segment,
                detail: "packet \(packetIndex): the PES header on PID \(TransportStreamText.pid(pid)) lacks its '10' marker bits"
            )
        }
        guard pes[6] & 0x30 == 0 else {
            throw .unsupportedStream(
                segment: segment,
                detail: "PID \(TransportStreamText.pid(pid)) is scrambled at the PES level (PES_scrambling_control), not with SAMPLE-AES"
            )
        }
        let size = 9 + Int(pes[8])
        guard size <= count else {
            throw .malformedContainer(
                segment: segment,
                detail: "packet \(packetIndex): PES_header_data_length on PID \(TransportStreamText.pid(pid)) runs past the PES packet"
            )
        }
        return size
    }
}
