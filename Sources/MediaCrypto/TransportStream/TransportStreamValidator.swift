/// Checks a transport stream segment as it streams past, without keeping it: sync bytes, adaptation fields, the
/// PAT and PMT (present, CRC-checked, before the media they describe), PES packet headers and lengths, and
/// continuity counters (ISO/IEC 13818-1 2.4.3 and 2.4.4). `verify` runs it over stored segments, encrypted or clear.
///
/// ```swift
/// let validator = TransportStreamValidator(segment: "seg12.ts", boundaries: .open)
/// for chunk in chunks { try chunk.withUnsafeBytes { try validator.process($0) } }
/// let summary = try validator.finish()
/// ```
///
/// One validator checks one segment on one thread; its stored properties are `@exclusivity(unchecked)`, as the
/// SAMPLE-AES rewriter's are, because the runtime's access checks on them took a fifth of `verify --deep`.
public final class TransportStreamValidator {
    /// Whether the input is a whole stream or one segment of a longer one.
    public enum Boundaries: Sendable {
        /// A stream on its own: every PES packet starts and ends inside it, and nothing comes before the PAT and PMT.
        case closed
        /// A segment of a stream cut wherever the segmenter chose, as players concatenate them: it may begin inside a
        /// PES packet that started in the previous segment (until the first payload_unit_start on that PID), begin
        /// with media before the PAT and PMT that describe it (skipped, continuity still checked), and end inside a
        /// PES packet the next segment finishes. Damage inside the segment is still damage.
        case open
    }

    private struct PIDState {
        var lastCounter: Int8 = -1
        var sawDuplicate = false
        var inPES = false
        /// Bytes of the current PES packet so far, and its declared size (0 unbounded, -1 not known yet).
        var pesBytes = 0
        var declaredSize = -1
        var pesStartPacket = 0
        /// Whether a PES packet started on this PID in this segment (before one, an open segment may be continuing).
        var sawStart = false
    }

    private enum Role: UInt8 {
        case unknown
        case programAssociation
        case programMap
        case pesStream
        case otherStream
    }

    private let segment: String
    private let boundaries: Boundaries
    /// Open boundaries: packets skipped because they came before the PMT that describes their PID.
    public private(set) var skippedBeforeProgramMap = 0
    @exclusivity(unchecked) private var framer = TransportPacketFramer()
    @exclusivity(unchecked) private var packetIndex = 0
    @exclusivity(unchecked) private var states = [PIDState](repeating: PIDState(), count: 8192)
    @exclusivity(unchecked) private var roles = [Role](repeating: .unknown, count: 8192)
    @exclusivity(unchecked) private var patAssembler = PSISectionAssembler()
    @exclusivity(unchecked) private var sawPAT = false
    @exclusivity(unchecked) private var programs: [TransportStreamSummary.Program] = []
    @exclusivity(unchecked) private var programMaps: [UInt16: PSISectionAssembler] = [:]
    @exclusivity(unchecked) private var streamsByProgram: [UInt16: [TransportStreamSummary.ElementaryStream]] = [:]
    @exclusivity(unchecked) private var pesCount: [UInt16: Int] = [:]
    /// The first damage found; reported again by every later call.
    @exclusivity(unchecked) private var failure: SegmentCryptoError?

    /// - Parameters:
    ///   - segment: The segment's name, used in errors.
    ///   - boundaries: ``Boundaries/closed`` for a stream on its own, ``Boundaries/open`` for one segment of an HLS
    ///     rendition, whose PES packets may span segments.
    public init(segment: String, boundaries: Boundaries = .closed) {
        self.segment = segment
        self.boundaries = boundaries
        roles[0] = .programAssociation
    }

    /// Checks the next chunk of the segment.
    /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` at the first damage found.
    public func process(_ chunk: UnsafeRawBufferPointer) throws(SegmentCryptoError) {
        if let failure { throw failure }
        do throws(SegmentCryptoError) {
            try framer.feed(chunk) { (packet) throws(SegmentCryptoError) in
                try self.check(packet)
                self.packetIndex += 1
            }
        } catch {
            failure = error
            throw error
        }
    }

    /// Ends the segment and describes it.
    /// - Throws: ``SegmentCryptoError/malformedContainer(segment:detail:)`` when the segment is truncated (a partial
    ///   packet, a PES packet or PSI section cut short) or lacks its PAT or a PMT.
    public func finish() throws(SegmentCryptoError) -> TransportStreamSummary {
        if let failure { throw failure }
        do throws(SegmentCryptoError) {
            return try summarize()
        } catch {
            failure = error
            throw error
        }
    }

    private func summarize() throws(SegmentCryptoError) -> TransportStreamSummary {
        guard framer.carriedCount == 0 else {
            throw malformed("the segment ends \(framer.carriedCount) bytes into packet \(packetIndex): it is truncated")
        }
        guard sawPAT else { throw malformed("the segment has no PAT (program_association_section)") }
        guard !programs.isEmpty else { throw malformed("the PAT lists no program") }
        if let missing = programs.first(where: { streamsByProgram[$0.number] == nil }) {
            throw malformed("no PMT for program \(missing.number) on PID \(TransportStreamText.pid(missing.pmtPID))")
        }
        if patAssembler.hasIncompleteSection || programMaps.values.contains(where: \.hasIncompleteSection) {
            throw malformed("the segment ends inside a PSI section: it is truncated")
        }
        // An open segment may end inside a PES packet; the next segment carries the rest.
        if boundaries == .closed {
            for pid in 0..<states.count where states[pid].inPES {
                try checkPESEnd(UInt16(pid))
            }
        }
        let streams = programs.flatMap { streamsByProgram[$0.number] ?? [] }
        return TransportStreamSummary(
            packetCount: packetIndex,
            programs: programs,
            streams: streams,
            pesCount: pesCount,
            isEncrypted: streams.contains { SampleAESCodec.isEncryptedStreamType($0.streamType) }
        )
    }

    private var allProgramsMapped: Bool {
        sawPAT && programs.allSatisfy { streamsByProgram[$0.number] != nil }
    }

    private func check(_ packet: UnsafePointer<UInt8>) throws(SegmentCryptoError) {
        let header = try TransportPacketHeader(parsing: packet, packetIndex: packetIndex, segment: segment)
        _ = try header.meaningfulAdaptationLength(in: packet, packetIndex: packetIndex, segment: segment)
        let pid = header.pid
        guard pid != TransportPacketHeader.nullPID else { return }
        if try isRepeat(header) { return }
        let payload = UnsafeRawBufferPointer(start: packet + header.payloadOffset, count: TransportPacketHeader.size - header.payloadOffset)
        switch roles[Int(pid)] {
        case .programAssociation:
            guard header.hasPayload else { return }
            try patAssembler.feed(payload, unitStart: header.payloadUnitStart, packetIndex: packetIndex, segment: segment) {
                (section) throws(SegmentCryptoError) in
                try readProgramAssociation(section)
            }
        case .programMap:
            guard header.hasPayload else { return }
            var assembler = programMaps[pid] ?? PSISectionAssembler()
            try assembler.feed(payload, unitStart: header.payloadUnitStart, packetIndex: packetIndex, segment: segment) {
                (section) throws(SegmentCryptoError) in
                try readProgramMap(section)
            }
            programMaps[pid] = assembler
        case .pesStream:
            try checkPES(pid, header, payload)
        case .otherStream:
            return
        case .unknown:
            guard pid < 0x20 || allProgramsMapped else {
                if boundaries == .open, !allProgramsMapped {
                    skippedBeforeProgramMap += 1
                    return
                }
                throw malformed("packet \(packetIndex) on PID \(TransportStreamText.pid(pid)) comes before the PAT and PMT that describe it")
            }
        }
    }

    /// 2.4.3.3: checks the continuity_counter; returns true for the one allowed repeat of a packet.
    private func isRepeat(_ header: TransportPacketHeader) throws(SegmentCryptoError) -> Bool {
        guard header.hasPayload else { return false }
        let pid = Int(header.pid)
        let counter = Int8(header.continuityCounter)
        let last = states[pid].lastCounter
        if last >= 0 && !header.discontinuity {
            if counter == last {
                guard !states[pid].sawDuplicate else {
                    throw malformed("packet \(packetIndex) on PID \(TransportStreamText.pid(header.pid)) repeats a packet a second time")
                }
                states[pid].sawDuplicate = true
                return true
            }
            guard counter == (last + 1) & 0x0F else {
                throw malformed(
                    "continuity_counter on PID \(TransportStreamText.pid(header.pid)) jumps from \(last) to \(counter) at packet \(packetIndex): packets are missing"
                )
            }
        }
        states[pid].lastCounter = counter
        states[pid].sawDuplicate = false
        return false
    }

    private func readProgramAssociation(_ section: UnsafeRawBufferPointer) throws(SegmentCryptoError) {
        let table = try ProgramAssociationTable(section: section, packetIndex: packetIndex, segment: segment)
        sawPAT = true
        for program in table.programs where !programs.contains(where: { $0.number == program.number }) {
            guard program.pmtPID != TransportPacketHeader.nullPID else {
                throw malformed("the PAT puts the PMT of program \(program.number) on the null packet PID 0x1fff")
            }
            switch roles[Int(program.pmtPID)] {
            case .unknown, .programMap:
                roles[Int(program.pmtPID)] = .programMap
                programs.append(TransportStreamSummary.Program(number: program.number, pmtPID: program.pmtPID))
            default:
                throw malformed(
                    "the PAT puts the PMT of program \(program.number) on PID \(TransportStreamText.pid(program.pmtPID)), which carries something else"
                )
            }
        }
    }

    private func readProgramMap(_ section: UnsafeRawBufferPointer) throws(SegmentCryptoError) {
        let table = try ProgramMapTable(section: section, packetIndex: packetIndex, segment: segment)
        var streams: [TransportStreamSummary.ElementaryStream] = []
        for entry in table.streams {
            guard TransportPacketHeader.isElementaryPID(entry.pid) else {
                throw malformed("the PMT lists PID \(TransportStreamText.pid(entry.pid)) as an elementary stream, but it is reserved")
            }
            switch roles[Int(entry.pid)] {
            case .programAssociation, .programMap:
                throw malformed("the PMT lists PID \(TransportStreamText.pid(entry.pid)) as an elementary stream, but it carries PSI")
            default:
                roles[Int(entry.pid)] = Self.carriesPES(entry.streamType) ? .pesStream : .otherStream
            }
            streams.append(TransportStreamSummary.ElementaryStream(pid: entry.pid, streamType: entry.streamType, programNumber: table.programNumber))
        }
        streamsByProgram[table.programNumber] = streams
    }

    /// Stream types carried in PES packets, whose headers are checked; others (private sections 0x05, SCTE-35
    /// 0x86...) are only checked for continuity.
    private static func carriesPES(_ streamType: UInt8) -> Bool {
        [0x01, 0x02, 0x03, 0x04, 0x06, 0x0F, 0x10, 0x11, 0x15, 0x1B, 0x1C, 0x24, 0x42, 0x81, 0x87].contains(streamType)
            || SampleAESCodec.isEncryptedStreamType(streamType)
    }

    private func checkPES(_ pid: UInt16, _ header: TransportPacketHeader, _ payload: UnsafeRawBufferPointer) throws(SegmentCryptoError) {
        guard header.hasPayload else { return }
        let index = Int(pid)
        if header.payloadUnitStart {
            if states[index].inPES { try checkPESEnd(pid) }
            guard payload.count >= 6, payload[0] == 0, payload[1] == 0, payload[2] == 1 else {
                throw malformed("packet \(packetIndex): the PES packet on PID \(TransportStreamText.pid(pid)) does not start with 00 00 01")
            }
            let length = Int(payload[4]) << 8 | Int(payload[5])
            if PESHeader.hasOptionalHeader(streamID: payload[3]) && payload.count >= 9 {
                guard payload[6] & 0xC0 == 0x80 else {
                    throw malformed("packet \(packetIndex): the PES header on PID \(TransportStreamText.pid(pid)) lacks its '10' marker bits")
                }
                guard length == 0 || 3 + Int(payload[8]) <= length else {
                    throw malformed("packet \(packetIndex): PES_header_data_length on PID \(TransportStreamText.pid(pid)) runs past the PES packet")
                }
            }
            states[index].inPES = true
            states[index].pesBytes = 0
            states[index].declaredSize = length == 0 ? 0 : 6 + length
            states[index].pesStartPacket = packetIndex
            states[index].sawStart = true
            pesCount[pid, default: 0] += 1
        }
        guard states[index].inPES else {
            // The rest of a PES packet the previous segment began: its length was checked there and cannot be here.
            if boundaries == .open, !states[index].sawStart { return }
            throw malformed("packet \(packetIndex) on PID \(TransportStreamText.pid(pid)) continues a PES packet that began before the segment")
        }
        states[index].pesBytes += payload.count
        let declared = states[index].declaredSize
        if declared > 0 && states[index].pesBytes >= declared {
            let excess = states[index].pesBytes - declared
            guard excess < payload.count, payload[(payload.count - excess)...].allSatisfy({ $0 == 0xFF }) else {
                throw malformed(
                    "packet \(packetIndex) on PID \(TransportStreamText.pid(pid)) carries more bytes than the PES packet's PES_packet_length"
                )
            }
            states[index].inPES = false
        }
    }

    private func checkPESEnd(_ pid: UInt16) throws(SegmentCryptoError) {
        let state = states[Int(pid)]
        guard state.declaredSize == 0 || state.pesBytes >= state.declaredSize else {
            throw malformed(
                "the PES packet on PID \(TransportStreamText.pid(pid)) starting at packet \(state.pesStartPacket) ends after \(state.pesBytes) of the \(state.declaredSize) bytes its PES_packet_length declares"
            )
        }
        states[Int(pid)].inPES = false
    }

    private func malformed(_ detail: String) -> SegmentCryptoError {
        .malformedContainer(segment: segment, detail: detail)
    }
}
