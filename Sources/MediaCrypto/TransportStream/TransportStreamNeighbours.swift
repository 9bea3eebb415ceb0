public import StowageCrypto

/// A segment beside the one being decrypted, read on demand: segmenters that cut a transport stream by byte count or
/// at any packet (VLC's livehttp, some live encoders) leave PES packets, and the NAL units and audio frames in them,
/// split between consecutive segments. SAMPLE-AES decrypts whole NAL units and frames, so a split PES packet is
/// decrypted from its parts in both segments, with the key and IV of the segment where it begins.
public struct TransportStreamNeighbour: Sendable {
    /// The segment's name, used in errors.
    public var name: String
    /// Its key and IV (RFC 8216bis 5.2: the IV attribute, or its media sequence number).
    public var key: SecretBytes
    public var iv: [UInt8]
    /// Its length in bytes.
    public var size: Int
    /// Reads `count` bytes at `offset` from the segment's start (fewer only at its end).
    public var read: @Sendable (_ offset: Int, _ count: Int) throws -> [UInt8]

    public init(name: String, key: SecretBytes, iv: [UInt8], size: Int, read: @escaping @Sendable (_ offset: Int, _ count: Int) throws -> [UInt8]) {
        self.name = name
        self.key = key
        self.iv = iv
        self.size = size
        self.read = read
    }
}

/// The segments before and after one MPEG-TS segment of a rendition, when they continue it (no discontinuity between
/// them): what ``SampleAESTransportStreamDecryptor`` reads when a PES packet begins before the segment or ends after
/// it. Without them such a segment is refused as `malformed_container`, as a truncated one is.
public struct TransportStreamNeighbours: Sendable {
    public var previous: TransportStreamNeighbour?
    public var next: TransportStreamNeighbour?
    /// A previous segment exists but is not at hand yet (still downloading): packets that continue one of its PES
    /// packets wait for it (``SampleAESTransportStreamDecryptor/supplyPrevious(_:)``), or the segment is refused
    /// (`neighbour_segment_pending`) at its end.
    public var previousPending: Bool
    /// A next segment exists but is not at hand yet (still downloading): a PES packet left open at the end, which
    /// may go on in it, is refused (`neighbour_segment_pending`) rather than decrypted as if it ended with the segment.
    public var nextPending: Bool

    public init(
        previous: TransportStreamNeighbour? = nil,
        next: TransportStreamNeighbour? = nil,
        previousPending: Bool = false,
        nextPending: Bool = false
    ) {
        self.previous = previous
        self.next = next
        self.previousPending = previousPending
        self.nextPending = nextPending
    }

    /// No neighbours: every PES packet must begin and end inside the segment.
    public static let none = TransportStreamNeighbours()
}

/// The packets of one PID in a neighbouring segment, found without parsing anything else: the tail of a PES packet
/// that began in the previous segment, or the head of one that ends in the next.
struct NeighbourPacketScan {
    private static let chunkPackets = 512

    let neighbour: TransportStreamNeighbour
    let segment: String

    /// The packets of `pid` from its last payload_unit_start in the previous segment to that segment's end; nil when
    /// the PID has no PES start there (the PES packet began even earlier).
    func tail(of pid: UInt16, maximumBytes: Int) throws(SegmentCryptoError) -> [[UInt8]]? {
        let count = try packetCount()
        var collected: [[UInt8]] = []
        var bytes = 0
        var end = count
        while end > 0 {
            let start = max(0, end - Self.chunkPackets)
            let chunk = try read(packets: start..<end)
            for index in stride(from: end - start - 1, through: 0, by: -1) {
                let packet = Array(chunk[(index * TransportPacketHeader.size)..<((index + 1) * TransportPacketHeader.size)])
                try checkSync(packet, index: start + index)
                guard Self.pid(packet) == pid else { continue }
                collected.append(packet)
                bytes += TransportPacketHeader.size
                guard bytes <= maximumBytes else {
                    throw .limitExceeded(
                        segment: segment,
                        detail:
                            "the PES packet on PID \(TransportStreamText.pid(pid)) that \(neighbour.name) leaves open exceeds \(maximumBytes >> 20) MiB"
                    )
                }
                if Self.startsUnit(packet) { return collected.reversed() }
            }
            end = start
        }
        return nil
    }

    /// Calls `body` with each packet of `pid` in the next segment, from its start, until `body` returns false;
    /// returns whether `body` asked to stop (false when the segment ended first).
    func head(of pid: UInt16, _ body: ([UInt8]) throws(SegmentCryptoError) -> Bool) throws(SegmentCryptoError) -> Bool {
        let count = try packetCount()
        var start = 0
        while start < count {
            let end = min(count, start + Self.chunkPackets)
            let chunk = try read(packets: start..<end)
            for index in 0..<(end - start) {
                let packet = Array(chunk[(index * TransportPacketHeader.size)..<((index + 1) * TransportPacketHeader.size)])
                try checkSync(packet, index: start + index)
                guard Self.pid(packet) == pid else { continue }
                if try !body(packet) { return true }
            }
            start = end
        }
        return false
    }

    static func pid(_ packet: [UInt8]) -> UInt16 { (UInt16(packet[1] & 0x1F) << 8) | UInt16(packet[2]) }

    /// payload_unit_start_indicator on a packet that carries a payload.
    static func startsUnit(_ packet: [UInt8]) -> Bool { packet[1] & 0x40 != 0 && packet[3] & 0x10 != 0 }

    private func packetCount() throws(SegmentCryptoError) -> Int {
        guard neighbour.size % TransportPacketHeader.size == 0 else {
            throw .malformedContainer(
                segment: segment,
                detail: "its neighbour \(neighbour.name), which a PES packet spans into, is \(neighbour.size) bytes: not whole 188-byte packets"
            )
        }
        return neighbour.size / TransportPacketHeader.size
    }

    private func read(packets range: Range<Int>) throws(SegmentCryptoError) -> [UInt8] {
        let wanted = range.count * TransportPacketHeader.size
        let bytes: [UInt8]
        do {
            bytes = try neighbour.read(range.lowerBound * TransportPacketHeader.size, wanted)
        } catch {
            throw .malformedContainer(
                segment: segment,
                detail: "its neighbour \(neighbour.name), which a PES packet spans into, cannot be read: \(error)"
            )
        }
        guard bytes.count == wanted else {
            throw .malformedContainer(segment: segment, detail: "its neighbour \(neighbour.name) ended early while being read")
        }
        return bytes
    }

    private func checkSync(_ packet: [UInt8], index: Int) throws(SegmentCryptoError) {
        guard packet[0] == TransportPacketHeader.syncByte else {
            throw .malformedContainer(
                segment: segment,
                detail: "packet \(index) of its neighbour \(neighbour.name), which a PES packet spans into, has no sync byte"
            )
        }
    }
}
