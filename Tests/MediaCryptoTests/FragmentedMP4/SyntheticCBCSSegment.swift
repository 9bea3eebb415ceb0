import Foundation
import StowageCrypto
import StowageTestSupport

/// A hand-built cbcs media segment with a known clear twin, for layouts the public fixtures do not use. The box
/// writer and the reference encryption here are the tests' own (ISO/IEC 14496-12 8.8, ISO/IEC 23001-7 7 and 10.4), and
/// the AES-CBC comes from the `openssl enc` command line, not from the module under test.
struct SyntheticCBCSSegment {
    struct Sample {
        var clear: [UInt8]
        /// (clear, protected) pairs; empty for whole-sample encryption.
        var subsamples: [(clear: Int, protected: Int)] = []
        /// A per-sample IV of 8 or 16 bytes; `nil` with a constant IV.
        var iv: [UInt8]?
        /// Left clear through a `seig` sample group with isProtected 0.
        var clearByGroup = false
    }

    enum Base {
        case defaultBaseIsMoof
        case explicitBaseDataOffset
        case implicitFirstTraf
    }

    enum Sizes {
        case inTrun
        case tfhdDefault
        /// trex's default_sample_size, which the init section must carry.
        case trexDefault
    }

    enum AuxiliaryInformation {
        case senc
        case saizSaio
        /// None: the clear lead of a packager, samples of a clear sample entry chosen by tfhd.
        case none
    }

    var samples: [Sample]
    var base = Base.defaultBaseIsMoof
    var sizes = Sizes.inTrun
    var auxiliaryInformation = AuxiliaryInformation.senc
    var runs = 1
    var pattern = (crypt: 1, skip: 9)
    var trackID: UInt32 = 1
    /// A `seig` group entry for samples with `clearByGroup`; its KID, when they must fail.
    var groupKeyID: [UInt8] = Array(repeating: 0, count: 16)
    /// tfhd's sample_description_index, when present.
    var sampleDescriptionIndex: UInt32?

    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        be32(UInt32(8 + payload.count)) + Array(type.utf8) + payload
    }

    static func be32(_ value: UInt32) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> UInt32($0)) } }
    static func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    static func be64(_ value: Int) -> [UInt8] { be32(UInt32(value >> 32)) + be32(UInt32(truncatingIfNeeded: value)) }

    /// AES-128-CBC without padding from the openssl command line.
    static func openssl(_ input: [UInt8], key: [UInt8], iv: [UInt8]) async throws -> [UInt8] {
        let directory = try FMP4TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let inputURL = directory.appendingPathComponent("in")
        let outputURL = directory.appendingPathComponent("out")
        try Data(input).write(to: inputURL)
        let result = try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/openssl"),
            ["enc", "-aes-128-cbc", "-nopad", "-K", Hex.encode(key), "-iv", Hex.encode(iv), "-in", inputURL.path, "-out", outputURL.path]
        )
        guard result.status == 0 else { throw FMP4TestSupport.FixtureError("openssl enc failed") }
        return Array(try Data(contentsOf: outputURL))
    }

    /// The reference cbcs encryption of one sample: per protected range, the pattern's blocks gathered into one CBC
    /// chain from the IV; a partial last block stays clear.
    func encrypt(_ sample: Sample, key: [UInt8], constantIV: [UInt8]) async throws -> [UInt8] {
        guard !sample.clearByGroup else { return sample.clear }
        var bytes = sample.clear
        let iv = sample.iv.map { $0 + [UInt8](repeating: 0, count: 16 - $0.count) } ?? constantIV
        let ranges = sample.subsamples.isEmpty ? [(0, sample.clear.count)] : sample.subsamples.map { ($0.clear, $0.protected) }
        var position = 0
        for (clear, protected) in ranges {
            let start = position + clear
            position = start + protected
            var blocks: [Int] = []
            for block in 0..<(protected / 16) where pattern.skip == 0 || block % (pattern.crypt + pattern.skip) < pattern.crypt {
                blocks.append(start + block * 16)
            }
            guard !blocks.isEmpty else { continue }
            let gathered = blocks.flatMap { bytes[$0..<($0 + 16)] }
            let encrypted = try await Self.openssl(gathered, key: key, iv: iv)
            for (index, offset) in blocks.enumerated() {
                bytes.replaceSubrange(offset..<(offset + 16), with: encrypted[(index * 16)..<(index * 16 + 16)])
            }
        }
        return bytes
    }

    /// The encrypted segment (styp, moof, mdat) and its clear twin's mdat payload.
    func build(key: [UInt8], constantIV: [UInt8]) async throws -> (segment: [UInt8], clearPayload: [UInt8], encryptedPayload: [UInt8]) {
        let styp = Self.box("styp", Array("msdh".utf8) + [0, 0, 0, 0] + Array("msdhmsix".utf8))
        let clearPayload = samples.flatMap(\.clear)
        var encryptedPayload = clearPayload
        if auxiliaryInformation != .none {
            encryptedPayload = []
            for sample in samples { encryptedPayload += try await encrypt(sample, key: key, constantIV: constantIV) }
        }
        let mfhd = Self.box("mfhd", [0, 0, 0, 0] + Self.be32(7))
        let hasSubsamples = samples.contains { !$0.subsamples.isEmpty }
        let ivSize = samples.first?.iv?.count ?? 0
        let entries: [[UInt8]] = samples.map { sample in
            var entry = sample.iv ?? []
            if hasSubsamples {
                entry += Self.be16(sample.subsamples.count)
                for subsample in sample.subsamples { entry += Self.be16(subsample.clear) + Self.be32(UInt32(subsample.protected)) }
            }
            return entry
        }
        let usesGroups = samples.contains { $0.clearByGroup }
        _ = ivSize

        // Pass 1 with zero offsets to learn the layout, pass 2 with the real ones.
        func moof(dataOffset: Int, explicitBase: Int, auxiliaryOffset: Int) -> (bytes: [UInt8], auxiliaryStartInMoof: Int) {
            var tfhdFlags: UInt32 = 0
            var tfhdPayload = Self.be32(trackID)
            switch base {
            case .defaultBaseIsMoof: tfhdFlags |= 0x02_0000
            case .explicitBaseDataOffset:
                tfhdFlags |= 0x01
                tfhdPayload += Self.be64(explicitBase)
            case .implicitFirstTraf: break
            }
            if let sampleDescriptionIndex {
                tfhdFlags |= 0x02
                tfhdPayload += Self.be32(sampleDescriptionIndex)
            }
            if sizes == .tfhdDefault {
                tfhdFlags |= 0x10
                tfhdPayload += Self.be32(UInt32(samples[0].clear.count))
            }
            let tfhd = Self.box("tfhd", Self.be32(tfhdFlags) + tfhdPayload)
            let tfdt = Self.box("tfdt", [1, 0, 0, 0] + Self.be64(90_000))
            var truns: [UInt8] = []
            let perRun = (samples.count + runs - 1) / runs
            for run in 0..<runs {
                let slice = samples[min(samples.count, run * perRun)..<min(samples.count, (run + 1) * perRun)]
                // Later runs have no data_offset: they continue where the previous run ended (8.8.8.1).
                var flags: UInt32 = sizes == .inTrun ? 0x200 : 0
                if run == 0 { flags |= 0x01 }
                var payload = Self.be32(flags) + Self.be32(UInt32(slice.count))
                if run == 0 { payload += Self.be32(UInt32(bitPattern: Int32(dataOffset))) }
                if sizes == .inTrun { for sample in slice { payload += Self.be32(UInt32(sample.clear.count)) } }
                truns += Self.box("trun", payload)
            }
            var groups: [UInt8] = []
            if usesGroups {
                // sgpd 'seig' version 1 with one entry: isProtected 0 (ISO/IEC 23001-7 6.1).
                let entry: [UInt8] = [0, 0, 0, 0] + groupKeyID
                groups += Self.box("sgpd", [1, 0, 0, 0] + Array("seig".utf8) + Self.be32(UInt32(entry.count)) + Self.be32(1) + entry)
                var mapping: [UInt8] = []
                for sample in samples { mapping += Self.be32(1) + Self.be32(sample.clearByGroup ? 0x10001 : 0) }
                groups += Self.box("sbgp", [0, 0, 0, 0] + Array("seig".utf8) + Self.be32(UInt32(samples.count)) + mapping)
            }
            let infoSizes = entries.map(\.count)
            var auxiliary: [UInt8] = []
            var auxiliaryStart = 0
            switch auxiliaryInformation {
            case .senc:
                let senc = Self.box("senc", Self.be32(hasSubsamples ? 2 : 0) + Self.be32(UInt32(samples.count)) + entries.flatMap { $0 })
                auxiliary = senc
                auxiliaryStart = 16
            case .saizSaio:
                // The auxiliary information in a free box of the traf, found only through saiz and saio.
                let saiz = Self.box("saiz", [0, 0, 0, 0, 0] + Self.be32(UInt32(samples.count)) + infoSizes.map { UInt8($0) })
                let saio = Self.box("saio", [0, 0, 0, 0] + Self.be32(1) + Self.be32(UInt32(auxiliaryOffset)))
                auxiliary = saiz + saio + Self.box("free", entries.flatMap { $0 })
                auxiliaryStart = saiz.count + saio.count + 8
            case .none:
                break
            }
            let trafPayload = tfhd + tfdt + truns + groups + auxiliary
            let traf = Self.box("traf", trafPayload)
            let moof = Self.box("moof", mfhd + traf)
            let auxiliaryInMoof = 8 + mfhd.count + 8 + trafPayload.count - auxiliary.count + auxiliaryStart
            return (moof, auxiliaryInMoof)
        }
        let moofStart = styp.count
        let draft = moof(dataOffset: 0, explicitBase: 0, auxiliaryOffset: 0)
        let payloadStart = moofStart + draft.bytes.count + 8
        let dataBase = moofStart
        let final = moof(dataOffset: payloadStart - dataBase, explicitBase: moofStart, auxiliaryOffset: draft.auxiliaryStartInMoof)
        return (styp + final.bytes + Self.box("mdat", encryptedPayload), clearPayload, encryptedPayload)
    }

    /// The encrypted init with a second, clear sample entry (the clear twin's), as Shaka Packager writes for a clear
    /// lead: stsd's entry_count and the sizes of stsd and its ancestors grow.
    static func initWithClearEntry(encrypted: [UInt8], clear: [UInt8]) -> [UInt8] {
        func path(_ bytes: [UInt8]) -> [FMP4SampleReader.Box] {
            var boxes: [FMP4SampleReader.Box] = []
            var range = 0..<bytes.count
            for type in ["moov", "trak", "mdia", "minf", "stbl", "stsd"] {
                let box = FMP4SampleReader.boxes(bytes, range).first { $0.type == type }!
                boxes.append(box)
                range = box.payloadStart..<box.end
            }
            return boxes
        }
        let clearStsd = path(clear).last!
        let entry = Array(clear[(clearStsd.payloadStart + 8)..<clearStsd.end])
        var bytes = encrypted
        let ancestors = path(bytes)
        let stsd = ancestors.last!
        bytes.insert(contentsOf: entry, at: stsd.end)
        for box in ancestors {
            let size = FMP4TestSupport.readUInt32(bytes, box.start)
            bytes.replaceSubrange(box.start..<(box.start + 4), with: be32(size + UInt32(entry.count)))
        }
        let count = FMP4TestSupport.readUInt32(bytes, stsd.payloadStart + 4)
        bytes.replaceSubrange((stsd.payloadStart + 4)..<(stsd.payloadStart + 8), with: be32(count + 1))
        return bytes
    }

    /// An init section with its tenc or trex patched (per-sample IV size, constant IV size, trex default size).
    static func patchedInit(_ initBytes: [UInt8], ivSize: UInt8? = nil, constantIVSize: UInt8? = nil, trexDefaultSize: UInt32? = nil) -> [UInt8] {
        var bytes = initBytes
        func find(_ type: String) -> Int {
            let pattern = Array(type.utf8)
            return (0..<(bytes.count - 4)).first { Array(bytes[$0..<($0 + 4)]) == pattern }! + 4
        }
        let tenc = find("tenc")
        // tenc payload: version/flags(4) reserved(1) pattern(1) isProtected(1) IV size(1) KID(16) constant IV size(1).
        if let ivSize { bytes[tenc + 7] = ivSize }
        if let constantIVSize { bytes[tenc + 24] = constantIVSize }
        if let trexDefaultSize {
            let trex = find("trex")
            let value = be32(trexDefaultSize)
            bytes.replaceSubrange((trex + 16)..<(trex + 20), with: value)
        }
        return bytes
    }
}
