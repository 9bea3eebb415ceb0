/// A TS_program_map_section (ISO/IEC 13818-1 2.4.4.8): the elementary streams of one program, their stream types
/// and descriptors. Parsed from a whole section and serialized again after SAMPLE-AES rewrites its entries.
struct ProgramMapTable {
    struct ElementaryStream {
        var streamType: UInt8
        let pid: UInt16
        /// The ES_info descriptor loop, tag-length-value bytes.
        var descriptors: [UInt8]
    }

    /// Bytes 3..<10 of the section: program_number, version_number, current_next_indicator, section_number,
    /// last_section_number and PCR_PID, kept as they were.
    private let fixedFields: [UInt8]
    /// The program_info descriptor loop.
    private let programDescriptors: [UInt8]
    var streams: [ElementaryStream]

    var programNumber: UInt16 { UInt16(fixedFields[0]) << 8 | UInt16(fixedFields[1]) }

    /// Parses and checks a whole section (CRC included).
    init(section: UnsafeRawBufferPointer, packetIndex: Int, segment: String) throws(SegmentCryptoError) {
        try PSISection.check(section, tableID: 0x02, name: "PMT", minimumLength: 16, packetIndex: packetIndex, segment: segment)
        func malformed(_ what: String) -> SegmentCryptoError {
            .malformedContainer(segment: segment, detail: "packet \(packetIndex): the PMT's \(what)")
        }
        let end = section.count - 4
        fixedFields = Array(section[3..<10])
        let programInfoLength = Int(section[10] & 0x0F) << 8 | Int(section[11])
        guard 12 + programInfoLength <= end else { throw malformed("program_info_length runs past the section") }
        programDescriptors = Array(section[12..<(12 + programInfoLength)])
        guard Self.descriptorsAreWellFormed(programDescriptors[...]) else { throw malformed("program descriptors overrun their loop") }
        var streams: [ElementaryStream] = []
        var offset = 12 + programInfoLength
        while offset < end {
            guard offset + 5 <= end else { throw malformed("last elementary stream entry is cut short") }
            let pid = UInt16(section[offset + 1] & 0x1F) << 8 | UInt16(section[offset + 2])
            let infoLength = Int(section[offset + 3] & 0x0F) << 8 | Int(section[offset + 4])
            guard offset + 5 + infoLength <= end else {
                throw malformed("ES_info_length of PID \(TransportStreamText.pid(pid)) runs past the section")
            }
            let descriptors = Array(section[(offset + 5)..<(offset + 5 + infoLength)])
            guard Self.descriptorsAreWellFormed(descriptors[...]) else {
                throw malformed("descriptors of PID \(TransportStreamText.pid(pid)) overrun their loop")
            }
            streams.append(ElementaryStream(streamType: section[offset], pid: pid, descriptors: descriptors))
            offset += 5 + infoLength
        }
        self.streams = streams
    }

    /// The section with a new section_length and CRC_32, ready for a pointer_field.
    func serialized() -> [UInt8] {
        var body: [UInt8] = fixedFields
        body.append(0xF0 | UInt8(programDescriptors.count >> 8))
        body.append(UInt8(programDescriptors.count & 0xFF))
        body.append(contentsOf: programDescriptors)
        for stream in streams {
            body.append(stream.streamType)
            body.append(0xE0 | UInt8(stream.pid >> 8))
            body.append(UInt8(stream.pid & 0xFF))
            body.append(0xF0 | UInt8(stream.descriptors.count >> 8))
            body.append(UInt8(stream.descriptors.count & 0xFF))
            body.append(contentsOf: stream.descriptors)
        }
        let sectionLength = body.count + 4
        var section: [UInt8] = [0x02, 0xB0 | UInt8(sectionLength >> 8), UInt8(sectionLength & 0xFF)]
        section.append(contentsOf: body)
        let crc = section.withUnsafeBytes { MPEG2CRC32.checksum($0) }
        section.append(contentsOf: [UInt8(crc >> 24), UInt8((crc >> 16) & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8(crc & 0xFF)])
        return section
    }

    /// Whether a descriptor loop is a whole number of tag-length-value descriptors.
    static func descriptorsAreWellFormed(_ loop: ArraySlice<UInt8>) -> Bool {
        var index = loop.startIndex
        while index < loop.endIndex {
            guard index + 2 <= loop.endIndex else { return false }
            index += 2 + Int(loop[index + 1])
        }
        return index == loop.endIndex
    }

    /// The descriptors of `loop` for which `keep` returns true (tag, value).
    static func filterDescriptors(_ loop: [UInt8], keep: (UInt8, ArraySlice<UInt8>) -> Bool) -> [UInt8] {
        var result: [UInt8] = []
        var index = 0
        while index + 2 <= loop.count {
            let end = min(loop.count, index + 2 + Int(loop[index + 1]))
            if keep(loop[index], loop[(index + 2)..<end]) { result.append(contentsOf: loop[index..<end]) }
            index = end
        }
        return result
    }
}
