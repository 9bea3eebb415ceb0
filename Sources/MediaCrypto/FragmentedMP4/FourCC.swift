/// A four-character code naming a box, a sample entry format or a protection scheme (ISO/IEC 14496-12 4.2),
/// held as its big-endian 32-bit value so comparisons cost one integer compare.
struct FourCC: Hashable, Sendable, CustomStringConvertible {
    let rawValue: UInt32

    init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// `text` must be four ASCII characters (every call site passes a literal).
    init(_ text: String) {
        let bytes = Array(text.utf8)
        precondition(bytes.count == 4, "a four-character code has four ASCII characters")
        rawValue = bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The code as text when it is printable ASCII, `0x...` otherwise, so hostile bytes stay readable in errors.
    var description: String {
        let bytes = [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: rawValue >> $0) }
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            return "0x" + String(rawValue, radix: 16)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    var bytes: [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: rawValue >> $0) } }

    // Structure (ISO/IEC 14496-12).
    static let ftyp = FourCC("ftyp")
    static let styp = FourCC("styp")
    static let moov = FourCC("moov")
    static let trak = FourCC("trak")
    static let tkhd = FourCC("tkhd")
    static let mdia = FourCC("mdia")
    static let hdlr = FourCC("hdlr")
    static let minf = FourCC("minf")
    static let stbl = FourCC("stbl")
    static let stsd = FourCC("stsd")
    static let mvex = FourCC("mvex")
    static let trex = FourCC("trex")
    static let moof = FourCC("moof")
    static let mfhd = FourCC("mfhd")
    static let traf = FourCC("traf")
    static let tfhd = FourCC("tfhd")
    static let tfdt = FourCC("tfdt")
    static let trun = FourCC("trun")
    static let mdat = FourCC("mdat")
    static let sidx = FourCC("sidx")
    static let emsg = FourCC("emsg")
    static let prft = FourCC("prft")
    static let free = FourCC("free")
    static let skip = FourCC("skip")
    static let uuid = FourCC("uuid")
    static let saiz = FourCC("saiz")
    static let saio = FourCC("saio")
    static let sbgp = FourCC("sbgp")
    static let sgpd = FourCC("sgpd")

    // Protection (ISO/IEC 14496-12 8.12, ISO/IEC 23001-7).
    static let sinf = FourCC("sinf")
    static let frma = FourCC("frma")
    static let schm = FourCC("schm")
    static let schi = FourCC("schi")
    static let tenc = FourCC("tenc")
    static let senc = FourCC("senc")
    static let pssh = FourCC("pssh")
    static let seig = FourCC("seig")
    static let encv = FourCC("encv")
    static let enca = FourCC("enca")

    // Schemes (ISO/IEC 23001-7 4.2).
    static let cbcs = FourCC("cbcs")
    static let cenc = FourCC("cenc")
    static let cbc1 = FourCC("cbc1")
    static let cens = FourCC("cens")

    // Handlers and codecs.
    static let vide = FourCC("vide")
    static let soun = FourCC("soun")
    static let avc1 = FourCC("avc1")
    static let avc3 = FourCC("avc3")
    static let avcC = FourCC("avcC")
}
