/// Writes transport stream packets (ISO/IEC 13818-1 2.4.3.2), filling a packet whose payload is short with
/// adaptation-field stuffing (2.4.3.5: stuffing_byte) so the payload always ends the packet.
enum TransportPacketWriter {
    /// The most payload a packet can carry next to an adaptation field holding `adaptationCount` meaningful bytes
    /// (flags and fields, without the length byte); 184 without an adaptation field.
    static func payloadCapacity(adaptationCount: Int) -> Int {
        adaptationCount > 0 ? TransportPacketHeader.size - 5 - adaptationCount : TransportPacketHeader.size - 4
    }

    /// Writes one packet into `packet` (188 writable bytes).
    ///
    /// - Parameters:
    ///   - adaptation: The adaptation field's meaningful bytes (flags first), or an empty buffer for none.
    ///   - payload: At most `payloadCapacity(adaptationCount: adaptation.count)` bytes; when empty, the packet has
    ///     only an adaptation field (adaptation_field_control 10) and `adaptation` must not be empty.
    static func write(
        into packet: UnsafeMutablePointer<UInt8>,
        pid: UInt16,
        unitStart: Bool,
        continuityCounter: UInt8,
        adaptation: UnsafeRawBufferPointer,
        payload: UnsafeRawBufferPointer
    ) {
        let size = TransportPacketHeader.size
        precondition(payload.count <= payloadCapacity(adaptationCount: adaptation.count))
        precondition(!payload.isEmpty || !adaptation.isEmpty)
        let stuffing = payloadCapacity(adaptationCount: adaptation.count) - payload.count
        let hasAdaptation = !adaptation.isEmpty || stuffing > 0
        let control: UInt8 = (hasAdaptation ? 0x20 : 0) | (payload.isEmpty ? 0 : 0x10)
        packet[0] = TransportPacketHeader.syncByte
        packet[1] = (unitStart ? 0x40 : 0) | UInt8(pid >> 8)
        packet[2] = UInt8(pid & 0xFF)
        packet[3] = control | (continuityCounter & 0x0F)
        var offset = 4
        if hasAdaptation {
            if adaptation.isEmpty {
                // Stuffing only: a lone length byte of 0 for one byte, else a zero flags byte and 0xFF fill.
                packet[4] = UInt8(stuffing - 1)
                offset = 5
                if stuffing > 1 {
                    packet[5] = 0
                    (packet + 6).update(repeating: 0xFF, count: stuffing - 2)
                    offset = 4 + stuffing
                }
            } else {
                let length = adaptation.count + stuffing
                packet[4] = UInt8(length)
                UnsafeMutableRawPointer(packet + 5).copyMemory(from: adaptation.baseAddress!, byteCount: adaptation.count)
                (packet + 5 + adaptation.count).update(repeating: 0xFF, count: stuffing)
                offset = 5 + length
            }
        }
        if let source = payload.baseAddress, !payload.isEmpty {
            UnsafeMutableRawPointer(packet + offset).copyMemory(from: source, byteCount: payload.count)
        }
        assert(offset + payload.count == size)
    }
}
