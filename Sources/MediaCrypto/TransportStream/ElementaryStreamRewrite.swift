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
    @exclusivity(unchecked) private(set) var pes = TransportStreamBuffer(capacity: 64 * 1024)
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
    @exclusivity(unchecked) private(set) var adaptationBytes = TransportStreamBuffer(capacity: 1024)
    /// Decryptor: the continuity_counter of each input packet of the PES packet, written back as it came.
    @exclusivity(unchecked) private(set) var counters: [UInt8] = []
    /// Decryptor: payload bytes at the start of the PES packet already clear (the end of a NAL unit or audio frame
    /// that began in the held PES packet, decrypted with it).
    @exclusivity(unchecked) var clearPrefix = 0
    /// Decryptor: a PES packet of this PID collected but not written yet, since its last NAL unit or audio frame may go
    /// on in the next one.
    @exclusivity(unchecked) var held: HeldPES?
    /// Buffers of a written held PES packet, for the next one.
    @exclusivity(unchecked) private var spare: (pes: TransportStreamBuffer, adaptation: TransportStreamBuffer)?

    /// The last continuity_counter seen on input, -1 before the first payload packet.
    @exclusivity(unchecked) var lastInputCounter = -1
    /// Whether the last payload packet was already repeated once (2.4.3.3 allows one duplicate).
    @exclusivity(unchecked) var sawDuplicate = false
    /// Encryptor: the output continuity_counter of the next payload packet, -1 until the first input packet gives it
    /// (the decryptor writes each packet's input counter back, ``counters``).
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
        counters.removeAll(keepingCapacity: true)
        clearPrefix = 0
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
    func addSlot(_ sequence: Int, carriesPayload: Bool = true, counter: UInt8 = 0) -> Int {
        if sequence != Self.phantomSlot && firstQueuedSlot == .max { firstQueuedSlot = sequence }
        slots.append(sequence)
        counters.append(counter)
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

    /// Moves the collected PES packet (`headerSize` bytes of header) into ``held``, to be written once the next PES
    /// packet shows where its last NAL unit or frame ends; the stream is ready for the next one.
    func holdCurrent(headerSize: Int) {
        let fresh = spare ?? (TransportStreamBuffer(capacity: 64 * 1024), TransportStreamBuffer(capacity: 1024))
        spare = nil
        held = HeldPES(
            pes: pes,
            adaptationBytes: adaptationBytes,
            headerSize: headerSize,
            clearPrefix: clearPrefix,
            slots: slots,
            firstQueuedSlot: firstQueuedSlot,
            payloadless: payloadlessOrdinals,
            records: adaptationRecords,
            counters: counters,
            cipher: pesCipher,
            firstPacketIndex: firstPacketIndex
        )
        pes = fresh.pes
        adaptationBytes = fresh.adaptation
        pes.removeAll()
        adaptationBytes.removeAll()
        inPES = false
        pesCipher = nil
    }

    /// Forgets the held PES packet once written, keeping its buffers for the next.
    func dropHeld() {
        guard let held else { return }
        held.pes.removeAll()
        held.adaptationBytes.removeAll()
        spare = (held.pes, held.adaptationBytes)
        self.held = nil
    }

    /// The collected PES packet as ``PESPacketization`` sees it.
    var packetization: PESPacketization {
        PESPacketization(
            slots: slots,
            payloadless: payloadlessOrdinals,
            records: adaptationRecords,
            adaptationBytes: adaptationBytes,
            counters: counters
        )
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

/// Decryptor: a PES packet collected but not written yet (``ElementaryStreamRewrite/held``).
final class HeldPES {
    let pes: TransportStreamBuffer
    let adaptationBytes: TransportStreamBuffer
    let headerSize: Int
    /// Payload bytes at the start already clear.
    var clearPrefix: Int
    let slots: [Int]
    let firstQueuedSlot: Int
    let payloadless: [Int]
    let records: [ElementaryStreamRewrite.AdaptationRecord]
    let counters: [UInt8]
    let cipher: SampleAESBlockCipher?
    let firstPacketIndex: Int

    init(
        pes: TransportStreamBuffer,
        adaptationBytes: TransportStreamBuffer,
        headerSize: Int,
        clearPrefix: Int,
        slots: [Int],
        firstQueuedSlot: Int,
        payloadless: [Int],
        records: [ElementaryStreamRewrite.AdaptationRecord],
        counters: [UInt8],
        cipher: SampleAESBlockCipher?,
        firstPacketIndex: Int
    ) {
        self.pes = pes
        self.adaptationBytes = adaptationBytes
        self.headerSize = headerSize
        self.clearPrefix = clearPrefix
        self.slots = slots
        self.firstQueuedSlot = firstQueuedSlot
        self.payloadless = payloadless
        self.records = records
        self.counters = counters
        self.cipher = cipher
        self.firstPacketIndex = firstPacketIndex
    }

    var payload: UnsafeMutablePointer<UInt8> { pes.base + headerSize }
    var payloadCount: Int { pes.count - headerSize }

    var packetization: PESPacketization {
        PESPacketization(slots: slots, payloadless: payloadless, records: records, adaptationBytes: adaptationBytes, counters: counters)
    }
}

/// What the decryptor's packetization needs of a PES packet: its input packets' slots, adaptation fields, payload-less
/// ordinals and continuity counters.
struct PESPacketization {
    let slots: [Int]
    let payloadless: [Int]
    let records: [ElementaryStreamRewrite.AdaptationRecord]
    let adaptationBytes: TransportStreamBuffer
    let counters: [UInt8]

    func adaptation(_ record: ElementaryStreamRewrite.AdaptationRecord) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: adaptationBytes.base + record.start, count: record.count)
    }
}
