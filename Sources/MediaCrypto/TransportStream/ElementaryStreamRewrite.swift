/// One protected elementary stream (PID) while its PES packets are reassembled, transformed and repacketized.
final class ElementaryStreamRewrite {
    /// An adaptation field worth keeping (PCR, random_access_indicator...), by the position of its packet in the
    /// PES packet; its meaningful bytes (flags first) are in `adaptationBytes`.
    struct AdaptationRecord {
        let ordinal: Int
        let start: Int
        let count: Int
    }

    let pid: UInt16
    let codec: SampleAESCodec

    /// The PES packet being collected, from its packet_start_code_prefix.
    let pes = TransportStreamBuffer(capacity: 64 * 1024)
    @exclusivity(unchecked) private(set) var inPES = false
    /// -1 until the first 6 bytes of the PES have arrived; then 0 for an unbounded PES (PES_packet_length 0,
    /// allowed for video) or the whole PES packet's size.
    @exclusivity(unchecked) var declaredSize = -1
    /// The packet index where the PES began, for error details.
    @exclusivity(unchecked) private(set) var firstPacketIndex = 0
    /// The output queue slots of the PES packet's input packets, in order; ``phantomSlot`` for a packet of a
    /// neighbouring segment, whose output is computed (it shapes the packets of this segment) but not kept.
    @exclusivity(unchecked) private(set) var slots: [Int] = []
    /// The first slot in the queue (not a phantom), `Int.max` while there is none: output waits for it.
    @exclusivity(unchecked) private(set) var firstQueuedSlot = Int.max
    /// The ordinals of the PES packet's input packets that carried no payload (an adaptation field alone), so that
    /// decryption gives each payload packet a payload packet back (``SampleAESTransportStreamRewriter``).
    @exclusivity(unchecked) private(set) var payloadlessOrdinals: [Int] = []
    /// The cipher of the PES packet when it is not the segment's: one begun in the previous segment is decrypted
    /// with that segment's key and IV.
    @exclusivity(unchecked) var pesCipher: SampleAESBlockCipher?
    /// Whether a payload packet of this PID was seen in the segment: before one, a packet that continues a PES
    /// packet continues the previous segment's.
    @exclusivity(unchecked) var sawPayload = false
    @exclusivity(unchecked) private(set) var adaptationRecords: [AdaptationRecord] = []
    let adaptationBytes = TransportStreamBuffer(capacity: 1024)

    /// The last continuity_counter seen on input, -1 before the first payload packet.
    @exclusivity(unchecked) var lastInputCounter = -1
    /// Whether the last payload packet was already repeated once (2.4.3.3 allows one duplicate).
    @exclusivity(unchecked) var sawDuplicate = false
    /// The output continuity_counter of the next payload packet, -1 until the first input packet gives it.
    @exclusivity(unchecked) var nextOutputCounter = -1

    /// Encryptor, audio: the audio setup information derived from the stream's first frame.
    @exclusivity(unchecked) var audioSetup: AudioSetupInformation?

    init(pid: UInt16, codec: SampleAESCodec) {
        self.pid = pid
        self.codec = codec
    }

    /// Starts collecting a new PES packet.
    func begin(packetIndex: Int) {
        inPES = true
        firstPacketIndex = packetIndex
        declaredSize = -1
        pes.removeAll()
        slots.removeAll(keepingCapacity: true)
        firstQueuedSlot = .max
        payloadlessOrdinals.removeAll(keepingCapacity: true)
        pesCipher = nil
        adaptationRecords.removeAll(keepingCapacity: true)
        adaptationBytes.removeAll()
    }

    /// Forgets the PES packet after it has been written out.
    func end() {
        inPES = false
        pesCipher = nil
        pes.removeAll()
    }

    /// A slot whose packet belongs to a neighbouring segment: written to scratch memory and dropped.
    static let phantomSlot = -1

    /// Adds the queue slot (or ``phantomSlot``) of the PES packet's next input packet and returns its ordinal.
    func addSlot(_ sequence: Int, carriesPayload: Bool = true) -> Int {
        if sequence != Self.phantomSlot && firstQueuedSlot == .max { firstQueuedSlot = sequence }
        slots.append(sequence)
        if !carriesPayload { payloadlessOrdinals.append(slots.count - 1) }
        return slots.count - 1
    }

    func recordAdaptation(ordinal: Int, bytes: UnsafePointer<UInt8>, count: Int) {
        adaptationRecords.append(AdaptationRecord(ordinal: ordinal, start: adaptationBytes.count, count: count))
        adaptationBytes.append(bytes, count: count)
    }

    /// The meaningful bytes of a record.
    func adaptation(_ record: AdaptationRecord) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: adaptationBytes.base + record.start, count: record.count)
    }

    /// Takes the next payload packet's output continuity_counter.
    func takeOutputCounter() -> UInt8 {
        let counter = UInt8(max(nextOutputCounter, 0))
        nextOutputCounter = Int((counter + 1) & 0x0F)
        return counter
    }

    /// The counter of the last payload packet written: what an adaptation-field-only packet repeats (2.4.3.3).
    var repeatedOutputCounter: UInt8 { UInt8((max(nextOutputCounter, 0) + 15) & 0x0F) }
}
