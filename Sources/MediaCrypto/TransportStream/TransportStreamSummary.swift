/// What ``TransportStreamValidator`` found in a transport stream segment.
public struct TransportStreamSummary: Sendable, Hashable {
    /// A program of the PAT and the PID of its PMT.
    public struct Program: Sendable, Hashable {
        /// program_number.
        public let number: UInt16
        /// The PID carrying the program's PMT.
        public let pmtPID: UInt16
    }

    /// An elementary stream listed in a PMT.
    public struct ElementaryStream: Sendable, Hashable {
        /// The elementary_PID.
        public let pid: UInt16
        /// stream_type (0x1B H.264, 0x0F AAC, 0xDB SAMPLE-AES H.264...).
        public let streamType: UInt8
        /// The program listing it.
        public let programNumber: UInt16
    }

    /// Transport packets in the segment, null packets included.
    public let packetCount: Int
    /// The programs of the PAT.
    public let programs: [Program]
    /// The elementary streams of every program's PMT, in PMT order.
    public let streams: [ElementaryStream]
    /// PES packets started per PID.
    public let pesCount: [UInt16: Int]
    /// Whether any stream has a SAMPLE-AES stream type (0xDB, 0xCF, 0xC1, 0xC2).
    public let isEncrypted: Bool
}
