/// A box tree opened just enough to edit sample entries: the containers on the path
/// `moov/trak/mdia/minf/stbl/stsd/<entry>/sinf/schi` are opened, every other box is kept as raw bytes.
/// Serializing recomputes every opened box's size, so an edit deep inside fixes all its ancestors.
struct EditableBox {
    var type: FourCC
    /// Bytes between the header and the children: version and flags plus entry_count for `stsd`, the fixed fields
    /// of a sample entry.
    var fields: [UInt8] = []
    /// `nil` for a box kept whole in `raw`.
    var children: [EditableBox]?
    /// The whole box, header included, for a box that is not opened.
    var raw: [UInt8] = []

    static func leaf(_ bytes: [UInt8], _ box: MP4Box) -> EditableBox {
        EditableBox(type: box.type, children: nil, raw: Array(bytes[box.start..<box.end]))
    }

    static func container(_ type: FourCC, fields: [UInt8] = [], children: [EditableBox]) -> EditableBox {
        EditableBox(type: type, fields: fields, children: children)
    }

    /// The one child type each opened container opens in turn: the tree's depth is fixed, whatever the bytes nest.
    private static let openedChild: [FourCC: FourCC] = [.moov: .trak, .trak: .mdia, .mdia: .minf, .minf: .stbl, .stbl: .stsd, .sinf: .schi]

    /// Opens `box` (a `moov`, found in `bytes`) and the containers below it on the path to the sample entries.
    static func open(_ bytes: [UInt8], _ box: MP4Box, segment: String) throws(SegmentCryptoError) -> EditableBox {
        try open(bytes, box, handler: FourCC(rawValue: 0), segment: segment)
    }

    private static func open(_ bytes: [UInt8], _ box: MP4Box, handler: FourCC, segment: String) throws(SegmentCryptoError) -> EditableBox {
        guard box.headerSize == 8 || box.headerSize == 16 else { return .leaf(bytes, box) }
        if box.type == .stsd {
            return try openSampleDescriptions(bytes, box, handler: handler, segment: segment)
        }
        let boxes = try MP4Box.children(of: bytes, in: box.payload, context: "'\(box.type)'", segment: segment)
        // The handler decides the sample entry layout; it sits in mdia/hdlr, next to the minf holding stsd.
        var handler = handler
        if box.type == .mdia, let hdlr = boxes.first(where: { $0.type == .hdlr }), hdlr.payload.count >= 12 {
            handler = FourCC(rawValue: bytes.mp4UInt32(at: hdlr.payload.lowerBound + 8))
        }
        var children: [EditableBox] = []
        for child in boxes {
            if openedChild[box.type] == child.type {
                children.append(try open(bytes, child, handler: handler, segment: segment))
            } else {
                children.append(.leaf(bytes, child))
            }
        }
        return .container(box.type, children: children)
    }

    /// stsd (ISO/IEC 14496-12 8.5.2): each sample entry opened past its fixed fields, its sinf opened too.
    private static func openSampleDescriptions(
        _ bytes: [UInt8],
        _ stsd: MP4Box,
        handler: FourCC,
        segment: String
    ) throws(SegmentCryptoError) -> EditableBox {
        var opened: [EditableBox] = []
        for entry in try CBCSInitSection.sampleEntries(bytes, stsd: stsd, segment: segment) {
            guard let length = CBCSInitSection.sampleEntryFieldsLength(bytes, entry: entry, handler: handler), entry.payload.count >= length else {
                opened.append(.leaf(bytes, entry))
                continue
            }
            let fieldsEnd = entry.payload.lowerBound + length
            var children: [EditableBox] = []
            for child in try MP4Box.children(of: bytes, in: fieldsEnd..<entry.end, context: "sample entry", segment: segment) {
                children.append(child.type == .sinf ? try open(bytes, child, handler: handler, segment: segment) : .leaf(bytes, child))
            }
            opened.append(.container(entry.type, fields: Array(bytes[entry.payload.lowerBound..<fieldsEnd]), children: children))
        }
        let fields = Array(bytes[stsd.payload.lowerBound..<(stsd.payload.lowerBound + 8)])
        return .container(.stsd, fields: fields, children: opened)
    }

    /// Calls `body` with every sample entry under this `moov` and its track's handler type.
    mutating func updateSampleEntries(
        handler: FourCC? = nil,
        _ body: (inout EditableBox, FourCC) throws(SegmentCryptoError) -> Void
    ) throws(SegmentCryptoError) {
        guard var children else { return }
        var handler = handler
        if type == .mdia, let hdlr = children.first(where: { $0.type == .hdlr }), hdlr.raw.count >= 20 {
            handler = FourCC(rawValue: hdlr.raw.mp4UInt32(at: 16))
        }
        for index in children.indices {
            if type == .stsd, let handler {
                try body(&children[index], handler)
            } else if children[index].type != .sinf {
                try children[index].updateSampleEntries(handler: handler, body)
            }
        }
        self.children = children
    }

    /// The serialized size.
    var size: Int {
        guard let children else { return raw.count }
        let body = fields.count + children.reduce(0) { $0 + $1.size }
        return body + 8 > Int(UInt32.max) ? body + 16 : body + 8
    }

    func serialize(into output: inout [UInt8]) {
        guard let children else {
            output += raw
            return
        }
        let size = self.size
        if size > Int(UInt32.max) {
            output.appendMP4UInt32(1)
            output += type.bytes
            output.appendMP4UInt64(UInt64(size))
        } else {
            output.appendMP4UInt32(UInt32(size))
            output += type.bytes
        }
        output += fields
        for child in children { child.serialize(into: &output) }
    }

    /// Builds a full box (ISO/IEC 14496-12 4.2) from its payload.
    static func fullBox(_ type: FourCC, version: UInt8 = 0, flags: UInt32 = 0, payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendMP4UInt32(UInt32(12 + payload.count))
        bytes += type.bytes
        bytes.appendMP4UInt32(UInt32(version) << 24 | flags)
        return bytes + payload
    }

    /// Builds a plain box from its payload.
    static func plainBox(_ type: FourCC, payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendMP4UInt32(UInt32(8 + payload.count))
        bytes += type.bytes
        return bytes + payload
    }
}
