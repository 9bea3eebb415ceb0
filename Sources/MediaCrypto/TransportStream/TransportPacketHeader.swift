/// The header of one 188-byte transport stream packet and where its adaptation field and payload lie
/// (ISO/IEC 13818-1 2.4.3.2 and 2.4.3.4).
struct TransportPacketHeader {
    /// Every transport stream packet is 188 bytes.
    static let size = 188
    /// The first byte of every packet.
    static let syncByte: UInt8 = 0x47
    /// The PID of null (stuffing) packets.
    static let nullPID: UInt16 = 0x1FFF

    /// Table 2-3: PIDs 0x0000-0x000F are reserved (PAT, CAT...) and 0x1FFF is the null packet; elementary streams use
    /// the others.
    static func isElementaryPID(_ pid: UInt16) -> Bool {
        pid >= 0x10 && pid < nullPID
    }

    let payloadUnitStart: Bool
    let pid: UInt16
    /// transport_scrambling_control: non-zero means the payload is scrambled at the transport level (DVB-CSA and
    /// the like), which SAMPLE-AES never does.
    let scramblingControl: UInt8
    let continuityCounter: UInt8
    let hasPayload: Bool
    /// The adaptation field's bytes after its length byte (flags, fields, stuffing); empty when absent.
    let adaptationFieldStart: Int
    let adaptationFieldLength: Int
    /// Where the payload starts in the packet (188 when there is none).
    let payloadOffset: Int

    /// The adaptation field's flags byte, 0 when there is no adaptation field or it is a single stuffing byte.
    let adaptationFlags: UInt8

    /// Whether the packet has an adaptation field (possibly empty).
    var hasAdaptationField: Bool { adaptationFieldStart == 5 }

    /// discontinuity_indicator: the continuity counter may jump here (2.4.3.5).
    var discontinuity: Bool { adaptationFlags & 0x80 != 0 }

    /// Parses the packet at `packet` (188 readable bytes).
    /// - Parameter packetIndex: the packet's position in the segment, for error messages.
    init(parsing packet: UnsafePointer<UInt8>, packetIndex: Int, segment: borrowing String) throws(SegmentCryptoError) {
        guard packet[0] == Self.syncByte else {
            throw .malformedContainer(
                segment: segment,
                detail:
                    "packet \(packetIndex) (byte \(packetIndex * Self.size)) starts with 0x\(TransportStreamText.hex(packet[0])), not the sync byte 0x47"
            )
        }
        guard packet[1] & 0x80 == 0 else {
            throw .malformedContainer(segment: segment, detail: "packet \(packetIndex) has transport_error_indicator set")
        }
        payloadUnitStart = packet[1] & 0x40 != 0
        pid = UInt16(packet[1] & 0x1F) << 8 | UInt16(packet[2])
        scramblingControl = packet[3] >> 6
        continuityCounter = packet[3] & 0x0F
        let control = (packet[3] >> 4) & 0x03
        guard control != 0 else {
            throw .malformedContainer(segment: segment, detail: "packet \(packetIndex) has the reserved adaptation_field_control 00")
        }
        hasPayload = control & 0x01 != 0
        if control & 0x02 != 0 {
            let length = Int(packet[4])
            // 2.4.3.5: 0...182 with a payload, 183 without one.
            guard length <= (hasPayload ? 182 : 183) else {
                throw .malformedContainer(
                    segment: segment,
                    detail: "packet \(packetIndex) has an adaptation field of \(length) bytes, longer than the packet allows"
                )
            }
            adaptationFieldStart = 5
            adaptationFieldLength = length
            adaptationFlags = length > 0 ? packet[5] : 0
            payloadOffset = hasPayload ? 5 + length : Self.size
        } else {
            adaptationFieldStart = 4
            adaptationFieldLength = 0
            adaptationFlags = 0
            payloadOffset = 4
        }
    }

    /// The length of the meaningful part of the adaptation field (the flags byte and the fields it announces,
    /// without trailing stuffing), 0 when there is nothing worth keeping (no adaptation field, or flags all zero).
    func meaningfulAdaptationLength(in packet: UnsafePointer<UInt8>, packetIndex: Int, segment: String) throws(SegmentCryptoError) -> Int {
        guard adaptationFieldLength > 0, adaptationFlags != 0 else { return 0 }
        let fields = packet + adaptationFieldStart
        var length = 1
        if adaptationFlags & 0x10 != 0 { length += 6 }  // PCR
        if adaptationFlags & 0x08 != 0 { length += 6 }  // OPCR
        if adaptationFlags & 0x04 != 0 { length += 1 }  // splice_countdown
        if adaptationFlags & 0x02 != 0 {  // transport_private_data
            guard length < adaptationFieldLength else { throw overrun(packetIndex, segment) }
            length += 1 + Int(fields[length])
        }
        if adaptationFlags & 0x01 != 0 {  // adaptation_field_extension
            guard length < adaptationFieldLength else { throw overrun(packetIndex, segment) }
            length += 1 + Int(fields[length])
        }
        guard length <= adaptationFieldLength else { throw overrun(packetIndex, segment) }
        return length
    }

    private func overrun(_ packetIndex: Int, _ segment: String) -> SegmentCryptoError {
        .malformedContainer(segment: segment, detail: "packet \(packetIndex): the adaptation field's flags announce more than its length holds")
    }
}

/// How the transport stream code spells bytes and PIDs in error details.
enum TransportStreamText {
    private static let digits = Array("0123456789abcdef")

    /// Two lowercase hex digits.
    static func hex(_ byte: UInt8) -> String {
        String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }

    /// A PID as `0x0100`.
    static func pid(_ pid: UInt16) -> String {
        "0x" + hex(UInt8(pid >> 8)) + hex(UInt8(pid & 0xFF))
    }
}
