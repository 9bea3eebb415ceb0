import StowageCrypto

/// The engine behind ``SampleAESTransportStreamDecryptor`` and ``SampleAESTransportStreamEncryptor``: a streaming
/// rewrite of one MPEG-2 transport stream segment that reassembles the PES packets of the protected elementary
/// streams, transforms their samples, rewrites the PMT signaling and repacketizes, passing everything else through.
///
/// Output keeps the input's order: each packet of the output goes into the slot of an input packet
/// (``TransportPacketQueue``), so PIDs stay interleaved as they were and a PCR stays where it was in its stream.
/// Memory is bounded by the largest PES packet (at most ``maximumPESSize``) and the output held behind it (at most
/// ``maximumHeldBytes``).
///
/// Its stored properties, and those of the classes it drives per packet (``ElementaryStreamRewrite``,
/// ``TransportPacketQueue``, ``TransportStreamBuffer``), are `@exclusivity(unchecked)`: one rewriter serves one segment
/// on one thread and never lends a property `inout` while reading it again, and the runtime's access checks on them
/// took 12% of SAMPLE-AES TS decryption (docs/PERFORMANCE.md).
final class SampleAESTransportStreamRewriter {
    enum Direction {
        case decrypt
        case encrypt
    }

    /// No PES packet of a real segment comes near this; a bigger one is refused rather than buffered.
    static let maximumPESSize = 32 * 1024 * 1024
    /// Output waiting behind an incomplete PES packet; beyond this the segment is refused.
    static let maximumHeldBytes = 64 * 1024 * 1024
    /// Output ready to go is emitted once this much has gathered (or at once when nothing is held back).
    static let batchBytes = 256 * 1024
    /// ``batchBytes``, or 0 to emit whatever is ready after each chunk.
    private let emitThreshold: Int

    private enum Role {
        case unknown
        case programAssociation
        case programMap(Int)
        case protected(Int)
        case passthrough
    }

    private let direction: Direction
    private let segment: String
    private let cipher: SampleAESBlockCipher
    /// Decryptor: the segments a PES packet may begin in or end in.
    @exclusivity(unchecked) private var neighbours: TransportStreamNeighbours
    /// A PES packet of this segment began in the previous one: the segmenter cuts inside PES packets.
    @exclusivity(unchecked) private var splitsPESPackets = false
    /// Packets of protected PIDs that continue a PES packet of the previous segment, still downloading: each with the
    /// output slot it keeps, handled once ``supplyPrevious(_:)`` gives that segment.
    @exclusivity(unchecked) private var awaitingPrevious: [(slot: Int, packet: [UInt8], index: Int)] = []
    /// The PIDs whose packets wait in ``awaitingPrevious``.
    @exclusivity(unchecked) private var awaitingPIDs: Set<UInt16> = []
    @exclusivity(unchecked) private var framer = TransportPacketFramer()
    private let queue = TransportPacketQueue()
    @exclusivity(unchecked) private var packetIndex = 0

    @exclusivity(unchecked) private var roles = [Role](repeating: .unknown, count: 8192)
    @exclusivity(unchecked) private var patAssembler = PSISectionAssembler()
    @exclusivity(unchecked) private var sawPAT = false
    @exclusivity(unchecked) private var programs: [ProgramMapRewrite] = []
    @exclusivity(unchecked) private var unmappedPrograms = 0
    @exclusivity(unchecked) private var streams: [ElementaryStreamRewrite] = []
    /// Media packets that came before the PAT and PMT describing them (a segmenter that cut before a PSI repeat):
    /// each with the output slot it keeps, handled once every program is mapped.
    @exclusivity(unchecked) private var early: [(slot: Int, packet: [UInt8], index: Int)] = []
    /// The most packets held before the PAT and PMT (about 3 MB); real segments repeat PSI far more often.
    static let maximumEarlyPackets = 16_384
    /// A PAT or PMT was read since held packets were last looked at: some of them may have a role now.
    @exclusivity(unchecked) private var rolesChanged = false

    /// Encryptor: the H.264 PES packet after encryption and escaping (it grows, so it cannot be done in place).
    private let pesOutput = TransportStreamBuffer(capacity: 64 * 1024)
    /// Decryptor: a NAL unit or audio frame split between two PES packets, joined to be decrypted.
    private let mergeBuffer = TransportStreamBuffer(capacity: 64 * 1024)
    /// Decryptor: where the emulation prevention bytes of the NAL unit being decrypted are.
    @exclusivity(unchecked) private var emulationPreventionPositions: [Int] = []
    /// A packet that does not fit the slots of its PES packet, before it goes to the queue.
    private let extraPacket = UnsafeMutablePointer<UInt8>.allocate(capacity: TransportPacketHeader.size)

    /// Encryptor: PMTs waiting for the first frame of an audio stream, whose audio setup information they carry.
    private struct PendingProgramMap {
        let slot: Int
        let pid: UInt16
        let counter: UInt8
        let adaptationStuffing: Bool
        var table: ProgramMapTable
    }
    @exclusivity(unchecked) private var pendingProgramMaps: [PendingProgramMap] = []

    /// The first error: once the segment is known to be damaged, every later call reports it again rather than
    /// work on half-updated state.
    @exclusivity(unchecked) private var failure: SegmentCryptoError?

    init(
        key: SecretBytes,
        iv: [UInt8],
        direction: Direction,
        segment: String,
        emitThreshold: Int = batchBytes,
        neighbours: TransportStreamNeighbours = .none
    ) throws(SegmentCryptoError) {
        cipher = try SampleAESBlockCipher(key: key, iv: iv, direction: direction == .decrypt ? .decrypt : .encrypt, segment: segment)
        self.neighbours = direction == .decrypt ? neighbours : .none
        self.emitThreshold = emitThreshold
        self.direction = direction
        self.segment = segment
        roles[0] = .programAssociation
    }

    deinit {
        extraPacket.deallocate()
    }

    // MARK: - Streaming

    func process(_ chunk: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        if let failure { throw failure }
        // A large chunk (a whole segment) goes in slices, so output leaves as it is ready and the queue stays small.
        var offset = 0
        repeat {
            let slice = UnsafeRawBufferPointer(rebasing: chunk[offset..<min(chunk.count, offset + Self.batchBytes)])
            do throws(SegmentCryptoError) {
                try framer.feed(slice) { (packet) throws(SegmentCryptoError) in
                    try self.handle(packet)
                    self.packetIndex += 1
                    if !self.early.isEmpty, self.rolesChanged { try self.handleEarlyPackets() }
                }
            } catch {
                failure = error
                throw error
            }
            try emitReady(emit, final: false)
            offset += slice.count
        } while offset < chunk.count
    }

    func finish(emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        if let failure { throw failure }
        do throws(SegmentCryptoError) {
            try finishSegment()
        } catch {
            failure = error
            throw error
        }
        try emitReady(emit, final: true)
    }

    /// Whether packets wait for the previous segment, still downloading, whose PES packets they continue.
    var needsPreviousSegment: Bool { !awaitingPrevious.isEmpty && failure == nil }

    /// Gives the previous segment once it has arrived, and handles the packets that waited for it.
    func supplyPrevious(_ previous: TransportStreamNeighbour) throws {
        if let failure { throw failure }
        neighbours.previous = previous
        neighbours.previousPending = false
        let held = awaitingPrevious
        awaitingPrevious = []
        awaitingPIDs = []
        let current = packetIndex
        defer { packetIndex = current }
        do throws(SegmentCryptoError) {
            for item in held {
                packetIndex = item.index
                try item.packet.withUnsafeBufferPointer { (bytes) throws(SegmentCryptoError) in
                    try handle(bytes.baseAddress!, slot: item.slot)
                }
            }
        } catch {
            failure = error
            throw error
        }
    }

    /// Whether ``finish(emit:)`` would refuse as `neighbour_segment_pending`: the next segment is still downloading and a
    /// PES packet open now may go on in it.
    var needsNextSegment: Bool {
        neighbours.nextPending && failure == nil && streams.contains { $0.inPES && mayGoOnInNext($0) }
    }

    /// Whether a PES packet open at the end may go on in the next segment: a bounded one that is not complete, or an
    /// unbounded one (video, PES_packet_length 0) when the segmenter splits PES packets, as this segment's start showed.
    private func mayGoOnInNext(_ stream: ElementaryStreamRewrite) -> Bool {
        stream.declaredSize != 0 || splitsPESPackets
    }

    /// Gives the next segment once it has arrived, before ``finish(emit:)``.
    func supplyNext(_ next: TransportStreamNeighbour) {
        neighbours.next = next
        neighbours.nextPending = false
    }

    private func finishSegment() throws(SegmentCryptoError) {
        if !early.isEmpty { try handleEarlyPackets() }
        if let first = awaitingPrevious.first {
            throw .neighbourSegmentPending(
                segment: segment,
                detail: "packet \(first.index) on PID \(TransportStreamText.pid(NeighbourPacketScan.pid(first.packet))) continues a PES packet of "
                    + "the previous segment, which is still downloading"
            )
        }
        guard framer.carriedCount == 0 else {
            throw malformed("the segment ends \(framer.carriedCount) bytes into packet \(packetIndex): it is truncated")
        }
        guard sawPAT else { throw malformed("the segment has no PAT (program_association_section)") }
        guard !programs.isEmpty else { throw malformed("the PAT lists no program") }
        if let missing = programs.first(where: { !$0.mapped }) {
            throw malformed("no PMT for program \(missing.programNumber) on PID \(TransportStreamText.pid(missing.pid))")
        }
        if patAssembler.hasIncompleteSection || programs.contains(where: { $0.assembler.hasIncompleteSection }) {
            throw malformed("the segment ends inside a PSI section: it is truncated")
        }
        for stream in streams.filter(\.inPES).sorted(by: { $0.firstQueuedSlot < $1.firstQueuedSlot }) {
            if let next = neighbours.next { try continueIntoNext(stream, next) }
            if stream.inPES && neighbours.nextPending {
                try checkEndsHere(stream)
            }
            // The segment's end ends the last NAL unit.
            if stream.inPES { try completePES(stream, nextStart: .startCode) }
        }
        for stream in streams where stream.held != nil {
            if stream.codec == .h264, let next = neighbours.next, try nextSegmentContinuesNAL(stream, next) {
                throw .unsupportedStream(
                    segment: segment,
                    detail:
                        "the last NAL unit on PID \(TransportStreamText.pid(stream.pid)) goes on in a PES packet of the next segment, \(next.name)"
                )
            }
            try writeHeldDecrypting(stream)
        }
        try resolvePendingProgramMaps(final: true)
    }

    private func emitReady(_ emit: (UnsafeRawBufferPointer) throws -> Void, final: Bool) throws {
        var limit = queue.nextSequence
        if let first = early.first { limit = min(limit, first.slot) }
        if let first = awaitingPrevious.first { limit = min(limit, first.slot) }
        for stream in streams {
            if stream.inPES { limit = min(limit, stream.firstQueuedSlot) }
            if let held = stream.held { limit = min(limit, held.firstQueuedSlot) }
        }
        for pending in pendingProgramMaps { limit = min(limit, pending.slot) }
        let ready = limit - queue.firstSequence
        if ready > 0 && (final || limit == queue.nextSequence || ready * TransportPacketHeader.size >= emitThreshold) {
            try queue.emit(before: limit, emit)
        }
        guard queue.heldByteCount <= Self.maximumHeldBytes else {
            let error = SegmentCryptoError.limitExceeded(
                segment: segment,
                detail: "more than \(Self.maximumHeldBytes >> 20) MiB of output wait behind an incomplete PES packet or PMT"
            )
            failure = error
            throw error
        }
    }

    // MARK: - Packets

    /// Handles one input packet; `slot` is the output slot reserved for it when it arrived before the PMT.
    private func handle(_ packet: UnsafePointer<UInt8>, slot: Int? = nil) throws(SegmentCryptoError) {
        let header = try TransportPacketHeader(parsing: packet, packetIndex: packetIndex, segment: segment)
        switch roles[Int(header.pid)] {
        case .protected(let index):
            try handleProtected(streams[index], packet, header, slot: slot)
        case .passthrough:
            place(packet, in: slot)
        case .programAssociation:
            place(packet, in: slot)
            try handleProgramAssociation(packet, header)
        case .programMap(let index):
            try handleProgramMap(programs[index], packet, header)
        case .unknown:
            // PIDs 0x0000-0x001F are reserved for PSI and SI (CAT, SDT, EIT...), 0x1FFF is the null packet.
            guard header.pid < 0x20 || header.pid == TransportPacketHeader.nullPID || (sawPAT && unmappedPrograms == 0) else {
                // Media before the PAT and PMT that describe it: kept, in its place, until they arrive.
                guard early.count < Self.maximumEarlyPackets else {
                    throw .limitExceeded(
                        segment: segment,
                        detail: "more than \(Self.maximumEarlyPackets) packets come before the PAT and PMT that describe them"
                    )
                }
                early.append((queue.reserve(), Array(UnsafeBufferPointer(start: packet, count: TransportPacketHeader.size)), packetIndex))
                return
            }
            place(packet, in: slot)
        }
    }

    /// A copy of `packet` in its reserved slot, or appended.
    private func place(_ packet: UnsafePointer<UInt8>, in slot: Int?) {
        if let slot {
            queue.slot(slot).update(from: packet, count: TransportPacketHeader.size)
        } else {
            queue.appendCopy(of: packet)
        }
    }

    /// Handles, in their order and slots, the held packets whose PID has a role now (each PID's as soon as its PMT is
    /// read, so none of its later packets goes first); once every program is mapped, all of them.
    private func handleEarlyPackets() throws(SegmentCryptoError) {
        rolesChanged = false
        let everything = sawPAT && unmappedPrograms == 0
        let held = early
        early = []
        let current = packetIndex
        defer { packetIndex = current }
        for item in held {
            let pid = (UInt16(item.packet[1] & 0x1F) << 8) | UInt16(item.packet[2])
            if case .unknown = roles[Int(pid)], !everything {
                early.append(item)
                continue
            }
            packetIndex = item.index
            try item.packet.withUnsafeBufferPointer { (bytes) throws(SegmentCryptoError) in
                try handle(bytes.baseAddress!, slot: item.slot)
            }
        }
    }

    private func payload(_ packet: UnsafePointer<UInt8>, _ header: TransportPacketHeader) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: packet + header.payloadOffset, count: TransportPacketHeader.size - header.payloadOffset)
    }

    // MARK: - PSI

    private func handleProgramAssociation(_ packet: UnsafePointer<UInt8>, _ header: TransportPacketHeader) throws(SegmentCryptoError) {
        guard header.hasPayload else { return }
        try patAssembler.feed(payload(packet, header), unitStart: header.payloadUnitStart, packetIndex: packetIndex, segment: segment) {
            (section) throws(SegmentCryptoError) in
            let table = try ProgramAssociationTable(section: section, packetIndex: packetIndex, segment: segment)
            sawPAT = true
            rolesChanged = true
            for program in table.programs {
                guard program.pmtPID != TransportPacketHeader.nullPID else {
                    throw malformed("the PAT puts the PMT of program \(program.number) on the null packet PID 0x1fff")
                }
                switch roles[Int(program.pmtPID)] {
                case .programMap:
                    continue
                case .unknown:
                    roles[Int(program.pmtPID)] = .programMap(programs.count)
                    programs.append(ProgramMapRewrite(programNumber: program.number, pid: program.pmtPID))
                    unmappedPrograms += 1
                default:
                    throw malformed(
                        "the PAT puts the PMT of program \(program.number) on PID \(TransportStreamText.pid(program.pmtPID)), which carries something else"
                    )
                }
            }
        }
    }

    /// What a PMT section becomes on output.
    private enum ProgramMapOutput {
        /// Nothing to rewrite: no protected stream.
        case unchanged([UInt8])
        case rewritten([UInt8])
        /// Encryptor: an audio stream's setup information is not known yet.
        case pending(ProgramMapTable)
    }

    private func handleProgramMap(
        _ program: ProgramMapRewrite,
        _ packet: UnsafePointer<UInt8>,
        _ header: TransportPacketHeader
    ) throws(SegmentCryptoError) {
        if program.nextOutputCounter < 0 { program.nextOutputCounter = Int(header.continuityCounter) }
        guard header.hasPayload else { return }
        if header.payloadUnitStart { program.stuffsWithAdaptationField = header.hasAdaptationField }
        let startedHere = !program.assembler.hasIncompleteSection
        var outputs: [ProgramMapOutput] = []
        try program.assembler.feed(payload(packet, header), unitStart: header.payloadUnitStart, packetIndex: packetIndex, segment: segment) {
            (section) throws(SegmentCryptoError) in
            outputs.append(try rewriteProgramMap(section, program: program))
        }
        for output in outputs {
            switch output {
            case .unchanged(let section):
                if outputs.count == 1 && startedHere && header.payloadUnitStart && !program.assembler.hasIncompleteSection {
                    // The whole section is in this packet: pass the packet on as it is.
                    queue.appendCopy(of: packet)
                    program.nextOutputCounter = Int((header.continuityCounter + 1) & 0x0F)
                } else {
                    writeSection(section, pid: program.pid, program: program)
                }
            case .rewritten(let section):
                try checkEncryptedProgramMapSize(section.count)
                writeSection(section, pid: program.pid, program: program)
            case .pending(let table):
                pendingProgramMaps.append(
                    PendingProgramMap(
                        slot: queue.reserve(),
                        pid: program.pid,
                        counter: program.takeOutputCounter(),
                        adaptationStuffing: program.stuffsWithAdaptationField,
                        table: table
                    )
                )
            }
        }
    }

    private func rewriteProgramMap(_ section: UnsafeRawBufferPointer, program: ProgramMapRewrite) throws(SegmentCryptoError) -> ProgramMapOutput {
        var table = try ProgramMapTable(section: section, packetIndex: packetIndex, segment: segment)
        if !program.mapped {
            program.mapped = true
            unmappedPrograms -= 1
            rolesChanged = true
        }
        var changed = false
        var waitsForAudio = false
        for index in table.streams.indices {
            let entry = table.streams[index]
            let codec: SampleAESCodec?
            switch direction {
            case .decrypt:
                codec = SampleAESCodec(encryptedStreamType: entry.streamType)
            case .encrypt:
                codec = SampleAESCodec(clearStreamType: entry.streamType)
                if codec == nil && SampleAESCodec.isUnprotectableMediaStreamType(entry.streamType) {
                    throw .unsupportedStream(
                        segment: segment,
                        detail:
                            "PID \(TransportStreamText.pid(entry.pid)) has stream_type 0x\(TransportStreamText.hex(entry.streamType)), which SAMPLE-AES cannot protect in a transport stream"
                    )
                }
            }
            let stream = try assignRole(pid: entry.pid, codec: codec)
            guard let codec, let stream else { continue }
            changed = true
            switch direction {
            case .decrypt:
                // 3.0: back to the clear stream_type, without the SAMPLE-AES signaling descriptors.
                table.streams[index].streamType = codec.clearStreamType
                table.streams[index].descriptors = ProgramMapTable.filterDescriptors(entry.descriptors) { tag, value in
                    !SampleAESCodec.isEncryptionDescriptor(tag: tag, value: value)
                }
            case .encrypt:
                // 3.0: the encrypted stream_type, a private data indicator descriptor, and for audio the audio setup
                // information in an 'apad' registration descriptor.
                table.streams[index].streamType = codec.encryptedStreamType
                table.streams[index].descriptors += [SampleAESCodec.privateDataIndicatorTag, 4] + codec.privateDataIndicator
                if codec.isAudio {
                    if let setup = stream.audioSetup {
                        table.streams[index].descriptors += setup.registrationDescriptor
                    } else {
                        waitsForAudio = true
                    }
                }
            }
        }
        if !changed { return .unchanged(Array(section)) }
        if waitsForAudio { return .pending(table) }
        return .rewritten(table.serialized())
    }

    /// Gives a PID listed in a PMT its role; returns its stream state when it is protected.
    private func assignRole(pid: UInt16, codec: SampleAESCodec?) throws(SegmentCryptoError) -> ElementaryStreamRewrite? {
        guard TransportPacketHeader.isElementaryPID(pid) else {
            throw malformed("the PMT lists PID \(TransportStreamText.pid(pid)) as an elementary stream, but it is reserved")
        }
        switch roles[Int(pid)] {
        case .programAssociation, .programMap:
            throw malformed("the PMT lists PID \(TransportStreamText.pid(pid)) as an elementary stream, but it carries PSI")
        case .protected(let index) where streams[index].codec == codec:
            return streams[index]
        case .protected(let index) where streams[index].inPES:
            throw .unsupportedStream(
                segment: segment,
                detail: "a PMT changes the stream type of PID \(TransportStreamText.pid(pid)) in the middle of a PES packet"
            )
        case .unknown, .passthrough, .protected:
            guard let codec else {
                roles[Int(pid)] = .passthrough
                return nil
            }
            let stream = ElementaryStreamRewrite(pid: pid, codec: codec)
            roles[Int(pid)] = .protected(streams.count)
            streams.append(stream)
            return stream
        }
    }

    /// 3.0: "The PMT must fit into a single transport stream packet; it must not be fragmented."
    private func checkEncryptedProgramMapSize(_ sectionSize: Int) throws(SegmentCryptoError) {
        guard direction == .encrypt, sectionSize > TransportStreamBuffer.singlePacketSectionCapacity else { return }
        throw .unsupportedStream(
            segment: segment,
            detail: "the encrypted PMT would need \(sectionSize) bytes, more than one packet holds (SAMPLE-AES requires an unfragmented PMT)"
        )
    }

    /// Writes a section as new packets on `pid` (pointer_field 0), padding the last one as the input did.
    private func writeSection(_ section: [UInt8], pid: UInt16, program: ProgramMapRewrite) {
        let payload = [0] + section
        var offset = 0
        while offset < payload.count {
            let count = min(184, payload.count - offset)
            writeSectionPacket(
                into: queue.slot(queue.reserve()),
                payload[offset..<(offset + count)],
                pid: pid,
                unitStart: offset == 0,
                counter: program.takeOutputCounter(),
                adaptationStuffing: program.stuffsWithAdaptationField
            )
            offset += count
        }
    }

    /// One packet of a PSI section: stuffed with an adaptation field, or with 0xFF after the section (2.4.4: the
    /// stuffing_bytes after the last section of a packet).
    private func writeSectionPacket(
        into packet: UnsafeMutablePointer<UInt8>,
        _ bytes: ArraySlice<UInt8>,
        pid: UInt16,
        unitStart: Bool,
        counter: UInt8,
        adaptationStuffing: Bool
    ) {
        let padded = adaptationStuffing ? Array(bytes) : Array(bytes) + [UInt8](repeating: 0xFF, count: 184 - bytes.count)
        padded.withUnsafeBytes { payload in
            TransportPacketWriter.write(
                into: packet,
                pid: pid,
                unitStart: unitStart,
                continuityCounter: counter,
                adaptation: UnsafeRawBufferPointer(start: nil, count: 0),
                payload: payload
            )
        }
    }

    /// Encryptor: writes the PMTs whose audio setup information is now known; at the end of the segment, writes the
    /// rest without it (an audio stream with no frame in the segment).
    private func resolvePendingProgramMaps(final: Bool) throws(SegmentCryptoError) {
        guard !pendingProgramMaps.isEmpty else { return }
        var stillPending: [PendingProgramMap] = []
        for var pending in pendingProgramMaps {
            var complete = true
            for index in pending.table.streams.indices {
                let entry = pending.table.streams[index]
                guard let codec = SampleAESCodec(encryptedStreamType: entry.streamType), codec.isAudio,
                    !SampleAESCodec.containsAudioSetup(entry.descriptors),
                    case .protected(let streamIndex) = roles[Int(entry.pid)]
                else { continue }
                if let setup = streams[streamIndex].audioSetup {
                    pending.table.streams[index].descriptors += setup.registrationDescriptor
                } else {
                    complete = complete && final
                }
            }
            guard complete else {
                stillPending.append(pending)
                continue
            }
            let section = pending.table.serialized()
            try checkEncryptedProgramMapSize(section.count)
            writeSectionPacket(
                into: queue.slot(pending.slot),
                ([0] + section)[...],
                pid: pending.pid,
                unitStart: true,
                counter: pending.counter,
                adaptationStuffing: pending.adaptationStuffing
            )
        }
        pendingProgramMaps = stillPending
    }

    // MARK: - PES

    private func handleProtected(
        _ stream: ElementaryStreamRewrite,
        _ packet: UnsafePointer<UInt8>,
        _ header: TransportPacketHeader,
        slot reserved: Int? = nil
    ) throws(SegmentCryptoError) {
        if awaitingPIDs.contains(stream.pid)
            || (neighbours.previousPending && neighbours.previous == nil && !stream.sawPayload && !stream.inPES && header.hasPayload
                && !header.payloadUnitStart)
        {
            // It continues a PES packet of the previous segment, which is still downloading: it waits, in its place.
            guard awaitingPrevious.count < Self.maximumEarlyPackets else {
                throw .limitExceeded(
                    segment: segment,
                    detail: "more than \(Self.maximumEarlyPackets) packets wait for the previous segment, which is still downloading"
                )
            }
            awaitingPIDs.insert(stream.pid)
            awaitingPrevious.append(
                (reserved ?? queue.reserve(), Array(UnsafeBufferPointer(start: packet, count: TransportPacketHeader.size)), packetIndex)
            )
            return
        }
        if header.hasPayload {
            let counter = Int(header.continuityCounter)
            if stream.lastInputCounter >= 0 && !header.discontinuity {
                if counter == stream.lastInputCounter {
                    // 2.4.3.3: a packet may be sent twice; the copy adds nothing.
                    guard !stream.sawDuplicate else {
                        throw malformed("packet \(packetIndex) on PID \(TransportStreamText.pid(stream.pid)) repeats a packet a second time")
                    }
                    stream.sawDuplicate = true
                    return
                }
                guard counter == (stream.lastInputCounter + 1) & 0x0F else {
                    throw malformed(
                        "continuity_counter on PID \(TransportStreamText.pid(stream.pid)) jumps from \(stream.lastInputCounter) to \(counter) at packet \(packetIndex): packets are missing"
                    )
                }
            }
            stream.lastInputCounter = counter
            stream.sawDuplicate = false
            if stream.nextOutputCounter < 0 { stream.nextOutputCounter = counter }
        }
        guard header.scramblingControl == 0 else {
            throw .unsupportedStream(
                segment: segment,
                detail: "PID \(TransportStreamText.pid(stream.pid)) is scrambled at the transport level (transport_scrambling_control)"
            )
        }
        if header.payloadUnitStart && header.hasPayload {
            // Decryptor, video: whether this PES packet begins with a start code tells whether the last NAL unit of
            // the one before ended with it.
            let start = direction == .decrypt && stream.codec == .h264 ? payloadStart(packet, header) : .unknown
            if stream.inPES {
                try completePES(stream, nextStart: start)
            } else if stream.held != nil, start == .startCode {
                try writeHeldDecrypting(stream)
            }
            stream.begin(packetIndex: packetIndex)
        }
        if !stream.inPES {
            guard header.hasPayload else {
                // An adaptation field alone (a PCR, say) between PES packets: pass it on, in our counter sequence.
                place(packet, in: reserved)
                // The encryptor renumbers; the decryptor keeps every packet and so every counter as it came.
                let slot = queue.slot(reserved ?? queue.nextSequence - 1)
                if direction == .encrypt && stream.nextOutputCounter >= 0 { slot[3] = (slot[3] & 0xF0) | stream.repeatedOutputCounter }
                return
            }
            guard !stream.sawPayload, let previous = neighbours.previous else {
                throw malformed(
                    "packet \(packetIndex) on PID \(TransportStreamText.pid(stream.pid)) continues a PES packet that "
                        + (stream.sawPayload ? "was already complete" : "began before the segment, and the previous segment is not at hand")
                )
            }
            try continueFromPrevious(stream, previous, counter: Int(header.continuityCounter))
        }
        if header.hasPayload { stream.sawPayload = true }
        try collect(stream, packet, header, slot: reserved ?? queue.reserve())
    }

    /// Adds an input packet of the PES packet being collected (`slot` is ``ElementaryStreamRewrite/phantomSlot`` for
    /// one of a neighbouring segment), and completes the PES packet when it has all its declared bytes.
    private func collect(
        _ stream: ElementaryStreamRewrite,
        _ packet: UnsafePointer<UInt8>,
        _ header: TransportPacketHeader,
        slot: Int
    ) throws(SegmentCryptoError) {
        let ordinal = stream.addSlot(slot, carriesPayload: header.hasPayload, counter: header.continuityCounter)
        let adaptationCount = try header.meaningfulAdaptationLength(in: packet, packetIndex: packetIndex, segment: segment)
        if adaptationCount > 0 {
            stream.recordAdaptation(ordinal: ordinal, bytes: packet + header.adaptationFieldStart, count: adaptationCount)
        }
        guard header.hasPayload else { return }
        let pes = stream.pes
        var count = TransportPacketHeader.size - header.payloadOffset
        if stream.declaredSize > 0 && pes.count + count > stream.declaredSize {
            // Bytes after the declared end of the PES: only 0xFF stuffing is tolerated (and dropped).
            let excess = pes.count + count - stream.declaredSize
            let tail = packet + TransportPacketHeader.size - excess
            guard excess < count, (0..<excess).allSatisfy({ tail[$0] == 0xFF }) else {
                throw malformed(
                    "packet \(packetIndex) on PID \(TransportStreamText.pid(stream.pid)) carries more bytes than the PES packet's PES_packet_length"
                )
            }
            count -= excess
        }
        guard pes.count + count <= Self.maximumPESSize else {
            throw .limitExceeded(
                segment: segment,
                detail:
                    "the PES packet on PID \(TransportStreamText.pid(stream.pid)) starting at packet \(stream.firstPacketIndex) exceeds \(Self.maximumPESSize >> 20) MiB"
            )
        }
        pes.append(packet + header.payloadOffset, count: count)
        if stream.declaredSize < 0 && pes.count >= 6 {
            stream.declaredSize = try PESHeader.declaredSize(pes.base, pid: stream.pid, packetIndex: stream.firstPacketIndex, segment: segment)
        }
        if stream.declaredSize > 0 && pes.count == stream.declaredSize {
            try completePES(stream)
        }
    }

    /// Starts the PES packet that this segment's first packet on the stream's PID continues: its packets in the
    /// previous segment, from their payload_unit_start, go in first with phantom slots, and it is decrypted with that
    /// segment's key and IV. `counter` is the continuing packet's continuity_counter.
    private func continueFromPrevious(
        _ stream: ElementaryStreamRewrite,
        _ previous: TransportStreamNeighbour,
        counter: Int
    ) throws(SegmentCryptoError) {
        let pid = TransportStreamText.pid(stream.pid)
        let scan = NeighbourPacketScan(neighbour: previous, segment: segment)
        guard let packets = try scan.tail(of: stream.pid, maximumBytes: Self.maximumPESSize + Self.maximumPESSize / 16) else {
            throw .unsupportedStream(
                segment: segment,
                detail: "packet \(packetIndex) on PID \(pid) continues a PES packet that began before the previous segment, \(previous.name): "
                    + "a PES packet across more than two segments is not supported"
            )
        }
        splitsPESPackets = true
        stream.begin(packetIndex: packetIndex)
        stream.pesCipher = try SampleAESBlockCipher(key: previous.key, iv: previous.iv, direction: .decrypt, segment: previous.name)
        var lastCounter = -1
        for packet in packets {
            try packet.withUnsafeBufferPointer { (bytes) throws(SegmentCryptoError) in
                let base = bytes.baseAddress!
                let header = try TransportPacketHeader(parsing: base, packetIndex: packetIndex, segment: segment)
                if header.hasPayload {
                    let current = Int(header.continuityCounter)
                    if current == lastCounter { return }  // 2.4.3.3: a duplicate.
                    lastCounter = current
                }
                try collect(stream, base, header, slot: ElementaryStreamRewrite.phantomSlot)
            }
            guard stream.inPES else {
                throw malformed("packet \(packetIndex) on PID \(pid) continues a PES packet that \(previous.name) already completed")
            }
        }
        guard lastCounter < 0 || (lastCounter + 1) & 0x0F == counter else {
            throw malformed(
                "packet \(packetIndex) on PID \(pid) does not continue the PES packet \(previous.name) ends with "
                    + "(continuity_counter \(lastCounter) there, \(counter) here): the segments are not consecutive"
            )
        }
    }

    /// With the next segment still downloading: refuses a PES packet open at the end that may go on in it
    /// (``mayGoOnInNext(_:)``).
    private func checkEndsHere(_ stream: ElementaryStreamRewrite) throws(SegmentCryptoError) {
        guard mayGoOnInNext(stream) else { return }
        let pid = TransportStreamText.pid(stream.pid)
        if stream.declaredSize != 0 {
            throw .neighbourSegmentPending(
                segment: segment,
                detail: "the PES packet on PID \(pid) starting at packet \(stream.firstPacketIndex) has \(stream.pes.count) "
                    + (stream.declaredSize > 0 ? "of its \(stream.declaredSize) bytes" : "bytes, not even its header")
                    + ", and the next segment, which it goes on in, is still downloading"
            )
        }
        throw .neighbourSegmentPending(
            segment: segment,
            detail:
                "the segment begins inside a PES packet, so its last one, on PID \(pid) from packet \(stream.firstPacketIndex), may end in the next segment, which is still downloading"
        )
    }

    /// Collects the rest of a PES packet still open at the end of the segment from the next segment, up to the next
    /// payload_unit_start on its PID (or its declared end), with phantom slots.
    private func continueIntoNext(_ stream: ElementaryStreamRewrite, _ next: TransportStreamNeighbour) throws(SegmentCryptoError) {
        let pid = TransportStreamText.pid(stream.pid)
        var lastCounter = stream.lastInputCounter
        var continued = false
        let scan = NeighbourPacketScan(neighbour: next, segment: segment)
        let stopped = try scan.head(of: stream.pid) { (packet) throws(SegmentCryptoError) -> Bool in
            if NeighbourPacketScan.startsUnit(packet) { return false }
            continued = true
            return try packet.withUnsafeBufferPointer { (bytes) throws(SegmentCryptoError) -> Bool in
                let base = bytes.baseAddress!
                let header = try TransportPacketHeader(parsing: base, packetIndex: packetIndex, segment: segment)
                if header.hasPayload {
                    let current = Int(header.continuityCounter)
                    if current == lastCounter { return true }  // 2.4.3.3: a duplicate.
                    guard lastCounter < 0 || current == (lastCounter + 1) & 0x0F else {
                        throw malformed(
                            "the PES packet on PID \(pid) starting at packet \(stream.firstPacketIndex) does not go on in \(next.name) "
                                + "(continuity_counter \(lastCounter) here, \(current) there): the segments are not consecutive"
                        )
                    }
                    lastCounter = current
                }
                try collect(stream, base, header, slot: ElementaryStreamRewrite.phantomSlot)
                return stream.inPES
            }
        }
        guard stopped || !continued || !stream.inPES else {
            throw .unsupportedStream(
                segment: segment,
                detail: "the PES packet on PID \(pid) starting at packet \(stream.firstPacketIndex) goes on past the end of the next segment, "
                    + "\(next.name): a PES packet across more than two segments is not supported"
            )
        }
    }

    /// Transforms the collected PES packet and writes it into its slots.
    private func completePES(_ stream: ElementaryStreamRewrite, nextStart: PayloadStart = .unknown) throws(SegmentCryptoError) {
        let pes = stream.pes
        guard stream.declaredSize >= 0 else {
            throw malformed(
                "the PES packet on PID \(TransportStreamText.pid(stream.pid)) starting at packet \(stream.firstPacketIndex) ends after \(pes.count) bytes, inside its header"
            )
        }
        guard stream.declaredSize == 0 || pes.count == stream.declaredSize else {
            throw malformed(
                "the PES packet on PID \(TransportStreamText.pid(stream.pid)) starting at packet \(stream.firstPacketIndex) ends after \(pes.count) of the \(stream.declaredSize) bytes its PES_packet_length declares"
            )
        }
        let headerSize = try PESHeader.headerSize(pes.base, count: pes.count, pid: stream.pid, packetIndex: stream.firstPacketIndex, segment: segment)
        if direction == .decrypt {
            try settleDecrypted(stream, headerSize: headerSize, nextStart: nextStart)
            return
        }
        let payload = pes.base + headerSize
        let payloadCount = pes.count - headerSize
        var output = pes
        switch stream.codec {
        case .h264:
            pesOutput.removeAll()
            pesOutput.append(pes.base, count: headerSize)
            try SampleAESH264Transform.encrypt(payload, count: payloadCount, into: pesOutput, cipher: cipher, segment: segment, pid: stream.pid)
            output = pesOutput
        default:
            let wantsSetup = stream.audioSetup == nil
            try SampleAESAudioTransform.transform(
                payload,
                count: payloadCount,
                codec: stream.codec,
                cipher: cipher,
                segment: segment,
                pid: stream.pid
            ) {
                (header, frame) throws(SegmentCryptoError) in
                guard wantsSetup else { return }
                guard let setup = AudioSetupInformation.derive(codec: stream.codec, header: header, frame: frame) else {
                    // 2.3.2.1: only AAC-LC (with or without implicit SBR/PS) has an audio_type; an AC-3 frame is
                    // always longer than the 10 bytes of its setup data.
                    throw .unsupportedStream(
                        segment: segment,
                        detail:
                            "PID \(TransportStreamText.pid(stream.pid)) carries \(stream.codec.frameName) audio (ADTS profile \(header.adtsProfile)) that SAMPLE-AES defines no audio setup for"
                    )
                }
                stream.audioSetup = setup
            }
        }
        try fixPESPacketLength(output, stream: stream)
        packetize(stream, output)
        stream.end()
        if direction == .encrypt && stream.codec.isAudio { try resolvePendingProgramMaps(final: false) }
    }

    /// How a video PES packet's payload begins, seen in its first transport packet.
    enum PayloadStart {
        /// With a start code: the NAL unit before it ended with the PES packet before.
        case startCode
        /// With bytes of a NAL unit that began in the PES packet before.
        case continuation
        /// Not told by the first packet.
        case unknown
    }

    /// How the PES packet that `packet` (a payload_unit_start) begins: after its header, zero bytes then `01` are a
    /// start code; anything else continues a NAL unit.
    private func payloadStart(_ packet: UnsafePointer<UInt8>, _ header: TransportPacketHeader) -> PayloadStart {
        let p = packet + header.payloadOffset
        let count = TransportPacketHeader.size - header.payloadOffset
        guard count >= 9, p[0] == 0, p[1] == 0, p[2] == 1 else { return .unknown }
        let start = 9 + Int(p[8])
        var index = start
        while index < count && p[index] == 0 { index += 1 }
        guard index < count else { return .unknown }
        return index - start >= 2 && p[index] == 1 ? .startCode : .continuation
    }

    /// Whether the next segment's first PES packet on the stream's PID begins inside a NAL unit (the held one's last).
    private func nextSegmentContinuesNAL(_ stream: ElementaryStreamRewrite, _ next: TransportStreamNeighbour) throws(SegmentCryptoError) -> Bool {
        var continues = false
        _ = try NeighbourPacketScan(neighbour: next, segment: segment).head(of: stream.pid) { (packet) throws(SegmentCryptoError) -> Bool in
            guard NeighbourPacketScan.startsUnit(packet) else { return true }
            try packet.withUnsafeBufferPointer { (bytes) throws(SegmentCryptoError) in
                let header = try TransportPacketHeader(parsing: bytes.baseAddress!, packetIndex: packetIndex, segment: segment)
                continues = payloadStart(bytes.baseAddress!, header) == .continuation
            }
            return false
        }
        return continues
    }

    /// Decryptor: decrypts and writes a collected PES packet, first finishing the held one of its PID with the NAL unit
    /// or audio frame that this one completes. A video PES packet is held in turn until the next one shows that its
    /// last NAL unit ends with it (`nextStart`), an audio one when its last frame goes on.
    private func settleDecrypted(_ stream: ElementaryStreamRewrite, headerSize: Int, nextStart: PayloadStart) throws(SegmentCryptoError) {
        if stream.held != nil { try joinHeld(stream, headerSize: headerSize) }
        let pes = stream.pes
        let payload = pes.base + headerSize
        let payloadCount = pes.count - headerSize
        let clear = stream.clearPrefix
        if stream.codec == .h264 {
            guard nextStart == .startCode else {
                stream.holdCurrent(headerSize: headerSize)
                return
            }
            let decrypted = try SampleAESH264Transform.decrypt(
                payload + clear,
                count: payloadCount - clear,
                cipher: stream.pesCipher ?? cipher,
                emulationPrevention: &emulationPreventionPositions,
                segment: segment,
                pid: stream.pid
            )
            pes.count = headerSize + clear + decrypted
        } else {
            let done = try SampleAESAudioTransform.transform(
                payload + clear,
                count: payloadCount - clear,
                codec: stream.codec,
                cipher: stream.pesCipher ?? cipher,
                segment: segment,
                pid: stream.pid,
                allowIncompleteTail: true
            )
            if clear + done < payloadCount {
                stream.clearPrefix = clear + done
                stream.holdCurrent(headerSize: headerSize)
                return
            }
        }
        try fixPESPacketLength(pes, stream: stream)
        packetizeInPlace(stream.packetization, pid: stream.pid, pes)
        stream.end()
    }

    /// Decryptor: the held PES packet of the stream ends with the start of a NAL unit or audio frame that the collected
    /// one (`headerSize` bytes of header) goes on with, or with a whole one. Decrypts what the held packet holds, the
    /// split NAL unit or frame across both (the collected one's part then counts as clear), and writes the held one.
    private func joinHeld(_ stream: ElementaryStreamRewrite, headerSize: Int) throws(SegmentCryptoError) {
        guard let held = stream.held else { return }
        let pid = TransportStreamText.pid(stream.pid)
        let payload = stream.pes.base + headerSize
        let count = stream.pes.count - headerSize
        let heldCipher = held.cipher ?? cipher
        if stream.codec == .h264 {
            let first = AnnexBScanner.startCode(in: payload, from: 0, end: count)
            let lead = first ?? count
            var continues = false
            for index in 0..<lead where payload[index] != 0 {
                continues = true
                break
            }
            guard continues else {
                try writeHeldDecrypting(stream)
                return
            }
            guard first != nil else {
                throw .unsupportedStream(
                    segment: segment,
                    detail: "a NAL unit on PID \(pid) from the PES packet at packet \(held.firstPacketIndex) runs across more than two PES packets"
                )
            }
            mergeBuffer.removeAll()
            mergeBuffer.append(held.payload + held.clearPrefix, count: held.payloadCount - held.clearPrefix)
            let boundary = mergeBuffer.count
            mergeBuffer.append(payload, count: lead)
            var removed = 0
            let merged = try SampleAESH264Transform.decrypt(
                mergeBuffer.base,
                count: mergeBuffer.count,
                cipher: heldCipher,
                emulationPrevention: &emulationPreventionPositions,
                segment: segment,
                pid: stream.pid,
                boundary: boundary,
                removedBeforeBoundary: &removed
            )
            let split = boundary - removed
            held.pes.count = held.headerSize + held.clearPrefix
            held.pes.append(mergeBuffer.base, count: split)
            // The collected packet's part of the NAL unit, clear and without the bytes removed after the boundary.
            let replacement = merged - split
            TransportStreamBuffer.move(payload + replacement, payload + lead, count - lead)
            payload.update(from: mergeBuffer.base + split, count: replacement)
            stream.pes.count -= lead - replacement
            stream.clearPrefix = replacement
        } else {
            let tail = held.payloadCount - held.clearPrefix
            mergeBuffer.removeAll()
            mergeBuffer.append(held.payload + held.clearPrefix, count: tail)
            mergeBuffer.append(payload, count: min(count, 16))
            guard let header = AudioFrameHeader.parse(mergeBuffer.base, available: mergeBuffer.count, codec: stream.codec) else {
                throw malformed(
                    "PID \(pid): the PES packet at packet \(held.firstPacketIndex) ends with \(tail) bytes that begin no \(stream.codec.frameName) frame"
                )
            }
            let needed = header.frameLength - tail
            guard needed > 0, needed <= count else {
                throw .unsupportedStream(
                    segment: segment,
                    detail:
                        "a \(stream.codec.frameName) frame on PID \(pid) from the PES packet at packet \(held.firstPacketIndex) runs across more than two PES packets"
                )
            }
            mergeBuffer.count = tail
            mergeBuffer.append(payload, count: needed)
            try SampleAESAudioTransform.transform(
                mergeBuffer.base,
                count: mergeBuffer.count,
                codec: stream.codec,
                cipher: heldCipher,
                segment: segment,
                pid: stream.pid
            )
            (held.payload + held.clearPrefix).update(from: mergeBuffer.base, count: tail)
            payload.update(from: mergeBuffer.base + tail, count: needed)
            stream.clearPrefix = needed
        }
        try writeHeld(stream)
    }

    /// Decryptor: decrypts what the held PES packet of the stream still holds (its last NAL unit ends with it; an
    /// audio frame cut short is refused) and writes it.
    private func writeHeldDecrypting(_ stream: ElementaryStreamRewrite) throws(SegmentCryptoError) {
        guard let held = stream.held else { return }
        let remaining = held.payloadCount - held.clearPrefix
        if stream.codec == .h264 {
            let decrypted = try SampleAESH264Transform.decrypt(
                held.payload + held.clearPrefix,
                count: remaining,
                cipher: held.cipher ?? cipher,
                emulationPrevention: &emulationPreventionPositions,
                segment: segment,
                pid: stream.pid
            )
            held.pes.count = held.headerSize + held.clearPrefix + decrypted
        } else if remaining > 0 {
            try SampleAESAudioTransform.transform(
                held.payload + held.clearPrefix,
                count: remaining,
                codec: stream.codec,
                cipher: held.cipher ?? cipher,
                segment: segment,
                pid: stream.pid
            )
        }
        try writeHeld(stream)
    }

    /// Decryptor: writes the held PES packet, all clear now, into its slots.
    private func writeHeld(_ stream: ElementaryStreamRewrite) throws(SegmentCryptoError) {
        guard let held = stream.held else { return }
        try fixPESPacketLength(held.pes, stream: stream)
        packetizeInPlace(held.packetization, pid: stream.pid, held.pes)
        stream.dropHeld()
    }

    /// 2.4.3.7: a bounded PES_packet_length counts the bytes after it; the payload may have shrunk (decryption
    /// removes emulation prevention bytes) or grown (encryption adds them).
    private func fixPESPacketLength(_ output: TransportStreamBuffer, stream: ElementaryStreamRewrite) throws(SegmentCryptoError) {
        let bytes = output.base
        guard bytes[4] != 0 || bytes[5] != 0 else { return }
        var length = output.count - 6
        if length > 0xFFFF {
            guard PESHeader.isVideo(streamID: bytes[3]) else {
                throw .limitExceeded(
                    segment: segment,
                    detail: "the PES packet on PID \(TransportStreamText.pid(stream.pid)) grows past the 65535 bytes PES_packet_length can express"
                )
            }
            length = 0
        }
        bytes[4] = UInt8(length >> 8)
        bytes[5] = UInt8(length & 0xFF)
    }

    /// Cuts a PES packet into transport packets written into the stream's slots, carrying each kept adaptation
    /// field in the packet at the same position as on input; empties the slots left over, or adds packets after
    /// the last slot when more are needed.
    private func packetize(_ stream: ElementaryStreamRewrite, _ output: TransportStreamBuffer) {
        let slots = stream.slots
        let records = stream.adaptationRecords
        let total = output.count
        var offset = 0
        var ordinal = 0
        var recordIndex = 0
        var unitStartPending = true
        while offset < total || recordIndex < records.count {
            var adaptation = UnsafeRawBufferPointer(start: nil, count: 0)
            if recordIndex < records.count && (records[recordIndex].ordinal == ordinal || offset >= total) {
                adaptation = stream.adaptation(records[recordIndex])
                recordIndex += 1
            }
            let payloadCount = min(TransportPacketWriter.payloadCapacity(adaptationCount: adaptation.count), total - offset)
            let isExtra = ordinal >= slots.count
            let destination = isExtra ? extraPacket : queue.slot(slots[ordinal])
            TransportPacketWriter.write(
                into: destination,
                pid: stream.pid,
                unitStart: payloadCount > 0 && unitStartPending,
                continuityCounter: payloadCount > 0 ? stream.takeOutputCounter() : stream.repeatedOutputCounter,
                adaptation: adaptation,
                payload: UnsafeRawBufferPointer(start: output.base + offset, count: payloadCount)
            )
            if payloadCount > 0 { unitStartPending = false }
            if isExtra { queue.appendExtra(after: slots[slots.count - 1], packet: extraPacket) }
            offset += payloadCount
            ordinal += 1
        }
        for index in ordinal..<max(ordinal, slots.count) { queue.markEmpty(slots[index]) }
    }

    /// Decryptor: cuts the clear PES packet (never longer than the encrypted one) into exactly the input's packets:
    /// each input packet that carried payload carries payload again, each adaptation field stays at its position, and
    /// a shortfall becomes adaptation-field stuffing at the end. So the clear segment has the encrypted one's size
    /// and packet positions, and continuity counters come out as they went in: a PES packet split between two
    /// segments, cut here and in the neighbour alike, joins up when a player reads the segments one after the other.
    private func packetizeInPlace(_ packets: PESPacketization, pid: UInt16, _ output: TransportStreamBuffer) {
        let slots = packets.slots
        let records = packets.records
        let payloadless = packets.payloadless
        let counters = packets.counters
        let total = output.count
        var payloadSlotsLeft = slots.count - payloadless.count
        var offset = 0
        var recordIndex = 0
        var payloadlessIndex = 0
        var unitStartPending = true
        for ordinal in 0..<slots.count {
            var adaptation = UnsafeRawBufferPointer(start: nil, count: 0)
            if recordIndex < records.count && records[recordIndex].ordinal == ordinal {
                adaptation = packets.adaptation(records[recordIndex])
                recordIndex += 1
            }
            var payloadCount = 0
            if payloadlessIndex < payloadless.count && payloadless[payloadlessIndex] == ordinal {
                payloadlessIndex += 1
            } else {
                payloadSlotsLeft -= 1
                // At least a byte for every payload packet still to come, when the bytes allow it.
                let reserved = min(payloadSlotsLeft, total - offset - 1)
                payloadCount = min(TransportPacketWriter.payloadCapacity(adaptationCount: adaptation.count), total - offset - max(reserved, 0))
                payloadCount = max(payloadCount, 0)
            }
            let slot = slots[ordinal]
            TransportPacketWriter.write(
                into: slot == ElementaryStreamRewrite.phantomSlot ? extraPacket : queue.slot(slot),
                pid: pid,
                unitStart: payloadCount > 0 && unitStartPending,
                // The input's counter: one packet out for each packet in, so they run on unbroken.
                continuityCounter: counters[ordinal],
                adaptation: adaptation,
                payload: UnsafeRawBufferPointer(start: output.base + offset, count: payloadCount)
            )
            if payloadCount > 0 { unitStartPending = false }
            offset += payloadCount
        }
    }

    private func malformed(_ detail: String) -> SegmentCryptoError {
        .malformedContainer(segment: segment, detail: detail)
    }
}

extension TransportStreamBuffer {
    /// The longest section one packet carries after its pointer_field.
    static let singlePacketSectionCapacity = TransportPacketHeader.size - 5
}
