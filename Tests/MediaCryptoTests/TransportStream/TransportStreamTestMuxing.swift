import Foundation

/// A minimal transport stream muxer and demuxer written for the tests, independent of the code under test: builds
/// synthetic segments (PAT, PMT, PES packets) and takes segments apart into PMT entries and PES packets.
enum TransportStreamTestMuxing {
    struct StreamEntry: Equatable {
        var pid: UInt16
        var streamType: UInt8
        var descriptors: [UInt8] = []
    }

    static let pmtPID: UInt16 = 0x1000

    // MARK: Muxing

    /// A segment: PAT, PMT, then each PES packet cut into packets on its PID (PCR on the first packet of the
    /// first stream's PES packets), continuity counters from 0.
    static func segment(streams: [StreamEntry], pes: [(pid: UInt16, bytes: [UInt8])], pmtVersion: UInt8 = 0) -> [UInt8] {
        var counters: [UInt16: UInt8] = [:]
        var output = section(pid: 0, counters: &counters, body: pat())
        output += section(pid: pmtPID, counters: &counters, body: pmt(streams, version: pmtVersion))
        for (pid, bytes) in pes {
            output += packets(pid: pid, pes: bytes, counters: &counters, pcr: pid == streams.first?.pid ? 0 : nil)
        }
        return output
    }

    static func pat() -> [UInt8] {
        longSection(tableID: 0x00, idExtension: 1, body: [0x00, 0x01, 0xE0 | UInt8(pmtPID >> 8), UInt8(pmtPID & 0xFF)])
    }

    static func pmt(_ streams: [StreamEntry], version: UInt8 = 0) -> [UInt8] {
        var body: [UInt8] = [0xE0 | UInt8(streams[0].pid >> 8), UInt8(streams[0].pid & 0xFF), 0xF0, 0x00]
        for stream in streams {
            body += [stream.streamType, 0xE0 | UInt8(stream.pid >> 8), UInt8(stream.pid & 0xFF)]
            body += [0xF0 | UInt8(stream.descriptors.count >> 8), UInt8(stream.descriptors.count & 0xFF)] + stream.descriptors
        }
        return longSection(tableID: 0x02, idExtension: 1, body: body, version: version)
    }

    static func longSection(tableID: UInt8, idExtension: UInt16, body: [UInt8], version: UInt8 = 0) -> [UInt8] {
        let length = 5 + body.count + 4
        var section: [UInt8] = [tableID, 0xB0 | UInt8(length >> 8), UInt8(length & 0xFF)]
        section += [UInt8(idExtension >> 8), UInt8(idExtension & 0xFF), 0xC1 | (version & 0x1F) << 1, 0x00, 0x00]
        section += body
        let crc = crc32(section)
        return section + [UInt8(crc >> 24), UInt8((crc >> 16) & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8(crc & 0xFF)]
    }

    /// One packet holding a section after a pointer_field, 0xFF-stuffed.
    static func section(pid: UInt16, counters: inout [UInt16: UInt8], body: [UInt8]) -> [UInt8] {
        var packet = header(pid: pid, unitStart: true, counter: next(&counters, pid), control: 0x10)
        packet += [0x00] + body
        packet += [UInt8](repeating: 0xFF, count: 188 - packet.count)
        return packet
    }

    /// A PES packet cut into packets, the last one padded with adaptation-field stuffing.
    static func packets(pid: UInt16, pes: [UInt8], counters: inout [UInt16: UInt8], pcr: UInt64? = nil) -> [UInt8] {
        var output: [UInt8] = []
        var offset = 0
        var first = true
        while offset < pes.count {
            // The adaptation field's flags and fields (a PCR on the first packet), then the stuffing it needs.
            var fields: [UInt8] = []
            if first, let pcr {
                fields = [
                    0x10, UInt8((pcr >> 25) & 0xFF), UInt8((pcr >> 17) & 0xFF), UInt8((pcr >> 9) & 0xFF), UInt8((pcr >> 1) & 0xFF),
                    UInt8((pcr & 1) << 7 | 0x7E), 0x00,
                ]
            }
            let capacity = fields.isEmpty ? 184 : 183 - fields.count
            let count = min(capacity, pes.count - offset)
            let stuffing = capacity - count
            var adaptation: [UInt8]?
            if !fields.isEmpty {
                adaptation = [UInt8(fields.count + stuffing)] + fields + [UInt8](repeating: 0xFF, count: stuffing)
            } else if stuffing > 0 {
                adaptation = stuffing == 1 ? [0] : [UInt8(stuffing - 1), 0x00] + [UInt8](repeating: 0xFF, count: stuffing - 2)
            }
            var packet = header(pid: pid, unitStart: first, counter: next(&counters, pid), control: adaptation == nil ? 0x10 : 0x30)
            packet += (adaptation ?? []) + pes[offset..<(offset + count)]
            precondition(packet.count == 188, "test muxer wrote \(packet.count) bytes")
            output += packet
            offset += count
            first = false
        }
        return output
    }

    /// A PES packet: PTS only, PES_packet_length set unless `bounded` is false.
    static func pes(streamID: UInt8, pts: UInt64 = 90_000, payload: [UInt8], bounded: Bool = true) -> [UInt8] {
        let ptsBytes: [UInt8] = [
            0x21 | UInt8((pts >> 29) & 0x0E), UInt8((pts >> 22) & 0xFF), UInt8((pts >> 14) & 0xFE) | 1,
            UInt8((pts >> 7) & 0xFF), UInt8((pts << 1) & 0xFE) | 1,
        ]
        let length = bounded ? 3 + ptsBytes.count + payload.count : 0
        return [0, 0, 1, streamID, UInt8(length >> 8), UInt8(length & 0xFF), 0x80, 0x80, UInt8(ptsBytes.count)] + ptsBytes + payload
    }

    private static func header(pid: UInt16, unitStart: Bool, counter: UInt8, control: UInt8) -> [UInt8] {
        [0x47, (unitStart ? 0x40 : 0) | UInt8(pid >> 8), UInt8(pid & 0xFF), control | counter]
    }

    private static func next(_ counters: inout [UInt16: UInt8], _ pid: UInt16) -> UInt8 {
        let value = counters[pid, default: 0]
        counters[pid] = (value + 1) & 0x0F
        return value
    }

    /// CRC-32/MPEG-2, bit by bit.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte) << 24
            for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04C1_1DB7 : crc << 1 }
        }
        return crc
    }

    // MARK: Demuxing

    /// The 188-byte packets of a segment.
    static func packets(_ segment: [UInt8]) -> [ArraySlice<UInt8>] {
        stride(from: 0, to: segment.count - 187, by: 188).map { segment[$0..<($0 + 188)] }
    }

    static func pid(_ packet: ArraySlice<UInt8>) -> UInt16 {
        UInt16(packet[packet.startIndex + 1] & 0x1F) << 8 | UInt16(packet[packet.startIndex + 2])
    }

    static func payload(_ packet: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let start = packet.startIndex
        let control = (packet[start + 3] >> 4) & 3
        guard control & 1 != 0 else { return [] }
        let offset = control & 2 != 0 ? 5 + Int(packet[start + 4]) : 4
        return packet[(start + offset)...]
    }

    /// The entries of the first PMT on `pmtPID` (one-packet section).
    static func programMap(_ segment: [UInt8], pmtPID: UInt16) -> [StreamEntry] {
        guard let packet = packets(segment).first(where: { pid($0) == pmtPID }) else { return [] }
        let body = Array(payload(packet))
        let section = Array(body[(1 + Int(body[0]))...])
        let length = Int(section[1] & 0x0F) << 8 | Int(section[2])
        let end = 3 + length - 4
        var offset = 12 + (Int(section[10] & 0x0F) << 8 | Int(section[11]))
        var entries: [StreamEntry] = []
        while offset < end {
            let info = Int(section[offset + 3] & 0x0F) << 8 | Int(section[offset + 4])
            entries.append(
                StreamEntry(
                    pid: UInt16(section[offset + 1] & 0x1F) << 8 | UInt16(section[offset + 2]),
                    streamType: section[offset],
                    descriptors: Array(section[(offset + 5)..<(offset + 5 + info)])
                )
            )
            offset += 5 + info
        }
        return entries
    }

    /// The PMT PID of the first program of the PAT.
    static func pmtPID(_ segment: [UInt8]) -> UInt16 {
        let packet = packets(segment).first { pid($0) == 0 }!
        let body = Array(payload(packet))
        let section = Array(body[(1 + Int(body[0]))...])
        return UInt16(section[10] & 0x1F) << 8 | UInt16(section[11])
    }

    /// Every PES packet per PID, whole (header included), in order.
    static func pesPackets(_ segment: [UInt8]) -> [UInt16: [[UInt8]]] {
        var result: [UInt16: [[UInt8]]] = [:]
        var current: [UInt16: [UInt8]] = [:]
        let programMapPID = pmtPID(segment)
        for packet in packets(segment) {
            let pid = pid(packet)
            guard pid >= 0x20, pid != 0x1FFF, pid != programMapPID else { continue }
            let data = payload(packet)
            if packet[packet.startIndex + 1] & 0x40 != 0 {
                if let previous = current[pid] { result[pid, default: []].append(previous) }
                current[pid] = Array(data)
            } else if current[pid] != nil {
                current[pid]! += data
            }
        }
        for (pid, pes) in current { result[pid, default: []].append(pes) }
        return result
    }

    /// The payload of a whole PES packet (after its header).
    static func pesPayload(_ pes: [UInt8]) -> [UInt8] {
        Array(pes[(9 + Int(pes[8]))...])
    }

    /// Annex B NAL units (start codes and trailing zeros excluded).
    static func nalUnits(_ payload: [UInt8]) -> [[UInt8]] {
        var starts: [Int] = []
        var index = 0
        while index + 2 < payload.count {
            if payload[index] == 0 && payload[index + 1] == 0 && payload[index + 2] == 1 {
                starts.append(index + 3)
                index += 3
            } else {
                index += 1
            }
        }
        return starts.enumerated().map { position, start in
            var end = position + 1 < starts.count ? starts[position + 1] - 3 : payload.count
            while end > start && payload[end - 1] == 0 { end -= 1 }
            return Array(payload[start..<end])
        }
    }
}

/// SplitMix64: deterministic pseudo-random numbers for reproducible tests.
struct TransportStreamTestRandom: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
