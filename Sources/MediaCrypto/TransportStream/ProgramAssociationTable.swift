/// A program_association_section (ISO/IEC 13818-1 2.4.4.3): which PID carries each program's PMT.
struct ProgramAssociationTable {
    struct Program: Hashable {
        let number: UInt16
        let pmtPID: UInt16
    }

    /// The programs, without the network PID entry (program_number 0).
    let programs: [Program]

    /// Parses and checks a whole section (CRC included).
    init(section: UnsafeRawBufferPointer, packetIndex: Int, segment: String) throws(SegmentCryptoError) {
        try PSISection.check(section, tableID: 0x00, name: "PAT", minimumLength: 12, packetIndex: packetIndex, segment: segment)
        var programs: [Program] = []
        var offset = 8
        let end = section.count - 4
        guard (end - offset) % 4 == 0 else {
            throw .malformedContainer(segment: segment, detail: "packet \(packetIndex): the PAT's program loop is not a whole number of entries")
        }
        while offset < end {
            let number = UInt16(section[offset]) << 8 | UInt16(section[offset + 1])
            let pid = UInt16(section[offset + 2] & 0x1F) << 8 | UInt16(section[offset + 3])
            if number != 0 { programs.append(Program(number: number, pmtPID: pid)) }
            offset += 4
        }
        self.programs = programs
    }
}

/// Checks common to the long-form PSI sections.
enum PSISection {
    /// Checks table_id, section_syntax_indicator, the length and the CRC_32 of a whole section.
    static func check(
        _ section: UnsafeRawBufferPointer,
        tableID: UInt8,
        name: String,
        minimumLength: Int,
        packetIndex: Int,
        segment: String
    ) throws(SegmentCryptoError) {
        guard section.count >= minimumLength else {
            throw .malformedContainer(segment: segment, detail: "packet \(packetIndex): the \(name) section is only \(section.count) bytes")
        }
        guard section[0] == tableID else {
            throw .malformedContainer(
                segment: segment,
                detail: "packet \(packetIndex): the \(name) PID carries table_id 0x\(TransportStreamText.hex(section[0]))"
            )
        }
        guard section[1] & 0x80 != 0 else {
            throw .malformedContainer(segment: segment, detail: "packet \(packetIndex): the \(name) section has section_syntax_indicator 0")
        }
        // Annex A: the CRC over the whole section, CRC_32 field included, is zero.
        guard MPEG2CRC32.checksum(section) == 0 else {
            throw .malformedContainer(segment: segment, detail: "packet \(packetIndex): the \(name) section's CRC_32 does not match its bytes")
        }
    }
}
