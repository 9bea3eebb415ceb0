import Foundation
import MediaCrypto
import StowageCore
import StowageCrypto
import Testing

/// Layouts the public fixtures do not exercise, on hand-built segments encrypted by a reference written in the tests
/// with `openssl enc` (see ``SyntheticCBCSSegment``): explicit and implicit data bases, several trun boxes, tfhd and trex
/// default sizes, auxiliary information through saiz/saio only, per-sample IVs, seig sample groups, pattern edges.
struct CBCSSyntheticLayoutTests {
    static let key = Array(Hex.decode("000102030405060708090a0b0c0d0e0f")!)

    static func videoInit(ivSize: UInt8? = nil, constantIVSize: UInt8? = nil, trexDefaultSize: UInt32? = nil) throws -> (CBCSInitSection, [UInt8]) {
        let bytes = SyntheticCBCSSegment.patchedInit(
            try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.encryptedDirectory)/video_init.mp4"),
            ivSize: ivSize,
            constantIVSize: constantIVSize,
            trexDefaultSize: trexDefaultSize
        )
        let section = try CBCSInitSection.parse(bytes, segment: "synthetic_init.mp4")
        return (section, section.tracks[0].constantIV ?? [])
    }

    static func bytes(_ count: Int, seed: UInt8) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) } }

    /// Subsamples with the edges of the pattern: a tail partial block, a protected range of exactly one block (which
    /// cbcs encrypts), one of 15 bytes (clear), one of 0, and a range long enough for several 1:9 periods.
    static let edgeSamples = [
        SyntheticCBCSSegment.Sample(clear: bytes(5 + 16 * 21 + 7, seed: 1), subsamples: [(5, 16 * 21 + 7)]),
        SyntheticCBCSSegment.Sample(clear: bytes(16, seed: 2), subsamples: [(0, 16)]),
        SyntheticCBCSSegment.Sample(clear: bytes(2 + 15 + 100, seed: 3), subsamples: [(2, 15), (100, 0)]),
        SyntheticCBCSSegment.Sample(clear: bytes(3 + 320 + 4 + 161, seed: 4), subsamples: [(3, 320), (4, 161)]),
    ]

    static func decrypt(_ segment: [UInt8], _ initSection: CBCSInitSection, iv: [UInt8]? = nil, chunkSize: Int = 4096) throws -> [UInt8] {
        let decryptor = try CBCSFragmentDecryptor(initSection: initSection, key: SecretBytes(key), iv: iv, segment: "synthetic.m4s")
        return try FMP4TestSupport.run(decryptor, segment, chunkSize: chunkSize)
    }

    /// Decrypts and checks: same length, the mdat payload is the clear twin's, no encryption box left in the moof.
    static func check(_ synthetic: SyntheticCBCSSegment, initSection: CBCSInitSection, constantIV: [UInt8], iv: [UInt8]? = nil) async throws {
        let (segment, clearPayload, encryptedPayload) = try await synthetic.build(key: key, constantIV: constantIV)
        #expect(encryptedPayload != clearPayload)
        for chunkSize in [1, 5, 4096] {
            let output = try decrypt(segment, initSection, iv: iv, chunkSize: chunkSize)
            #expect(output.count == segment.count)
            #expect(Array(output.suffix(clearPayload.count)) == clearPayload)
            let moof = FMP4SampleReader.boxes(output, 0..<output.count).first { $0.type == "moof" }!
            let traf = FMP4SampleReader.boxes(output, moof.payloadStart..<moof.end).first { $0.type == "traf" }!
            let types = Set(FMP4SampleReader.boxes(output, traf.payloadStart..<traf.end).map(\.type))
            #expect(types.isDisjoint(with: ["senc", "saiz", "saio", "sbgp", "sgpd"]))
        }
        let summary = try FragmentedMP4Validator.validate(segment, initSection: initSection, segment: "synthetic.m4s")
        #expect(summary.sampleCount == synthetic.samples.count && summary.isEncrypted)
    }

    @Test(arguments: [SyntheticCBCSSegment.Base.defaultBaseIsMoof, .explicitBaseDataOffset, .implicitFirstTraf], [1, 3])
    func dataBasesAndRuns(base: SyntheticCBCSSegment.Base, runs: Int) async throws {
        let (initSection, iv) = try Self.videoInit()
        try await Self.check(SyntheticCBCSSegment(samples: Self.edgeSamples, base: base, runs: runs), initSection: initSection, constantIV: iv)
    }

    @Test func auxiliaryInformationThroughSaizAndSaioOnly() async throws {
        let (initSection, iv) = try Self.videoInit()
        try await Self.check(
            SyntheticCBCSSegment(samples: Self.edgeSamples, auxiliaryInformation: .saizSaio, runs: 2),
            initSection: initSection,
            constantIV: iv
        )
    }

    @Test(arguments: [SyntheticCBCSSegment.Sizes.tfhdDefault, .trexDefault])
    func defaultSampleSizes(sizes: SyntheticCBCSSegment.Sizes) async throws {
        let (initSection, iv) = try Self.videoInit(trexDefaultSize: sizes == .trexDefault ? 200 : nil)
        let samples = (0..<5).map { SyntheticCBCSSegment.Sample(clear: Self.bytes(200, seed: UInt8($0)), subsamples: [(7, 193)]) }
        try await Self.check(SyntheticCBCSSegment(samples: samples, sizes: sizes), initSection: initSection, constantIV: iv)
    }

    @Test(arguments: [16, 8])
    func perSampleIVs(size: Int) async throws {
        let (initSection, _) = try Self.videoInit(ivSize: UInt8(size))
        #expect(initSection.tracks[0].perSampleIVSize == size)
        var samples = Self.edgeSamples
        for index in samples.indices { samples[index].iv = Self.bytes(size, seed: UInt8(40 + index)) }
        try await Self.check(SyntheticCBCSSegment(samples: samples), initSection: initSection, constantIV: [])
        try await Self.check(SyntheticCBCSSegment(samples: samples, auxiliaryInformation: .saizSaio), initSection: initSection, constantIV: [])
    }

    @Test func wholeSampleEncryptionWithAPattern() async throws {
        let (initSection, iv) = try Self.videoInit()
        let samples = [
            SyntheticCBCSSegment.Sample(clear: Self.bytes(16 * 30 + 3, seed: 9)), SyntheticCBCSSegment.Sample(clear: Self.bytes(16, seed: 8)),
        ]
        try await Self.check(SyntheticCBCSSegment(samples: samples), initSection: initSection, constantIV: iv)
    }

    @Test func audioPatternZeroZeroEncryptsEveryWholeBlock() async throws {
        let bytes = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.encryptedDirectory)/audio_init.mp4")
        let initSection = try CBCSInitSection.parse(bytes, segment: "audio_init.mp4")
        let samples = [
            SyntheticCBCSSegment.Sample(clear: Self.bytes(16 * 12 + 9, seed: 1)), SyntheticCBCSSegment.Sample(clear: Self.bytes(32, seed: 2)),
        ]
        try await Self.check(
            SyntheticCBCSSegment(samples: samples, pattern: (0, 0)),
            initSection: initSection,
            constantIV: initSection.tracks[0].constantIV!
        )
    }

    /// tenc with constant_IV_size 0: the IV comes from the caller (an EXT-X-KEY IV attribute), else invalid_iv.
    @Test func fallbackIVWhenNeitherSencNorTencHasOne() async throws {
        let (initSection, _) = try Self.videoInit(constantIVSize: 0)
        #expect(initSection.tracks[0].constantIV == nil)
        let iv = Self.bytes(16, seed: 77)
        try await Self.check(SyntheticCBCSSegment(samples: Self.edgeSamples), initSection: initSection, constantIV: iv, iv: iv)
        let (segment, _, _) = try await SyntheticCBCSSegment(samples: Self.edgeSamples).build(key: Self.key, constantIV: iv)
        #expect(throws: SegmentCryptoError.invalidIV(segment: "synthetic.m4s")) { try Self.decrypt(segment, initSection) }
    }

    @Test func seigGroupLeavesSamplesClear() async throws {
        let (initSection, iv) = try Self.videoInit()
        var samples = Self.edgeSamples
        samples[1].clearByGroup = true
        samples[3].clearByGroup = true
        try await Self.check(SyntheticCBCSSegment(samples: samples), initSection: initSection, constantIV: iv)
    }

    @Test func seigGroupWithAnotherProtectedKeyIsUnsupported() async throws {
        let (initSection, iv) = try Self.videoInit()
        var samples = Self.edgeSamples
        samples[1].clearByGroup = true
        var synthetic = SyntheticCBCSSegment(samples: samples)
        synthetic.groupKeyID = Array(repeating: 0xAB, count: 16)
        var (segment, _, _) = try await synthetic.build(key: Self.key, constantIV: iv)
        // Make the group entry protected (isProtected 1, constant IV size 0 follows nowhere: IV size 16 per sample).
        let seig = (0..<(segment.count - 4)).first { Array(segment[$0..<($0 + 4)]) == Array("seig".utf8) }!
        let entry = seig + 4 + 8
        segment[entry + 2] = 1
        segment[entry + 3] = 16
        let error = try #require(throws: SegmentCryptoError.self) { try Self.decrypt(segment, initSection) }
        #expect(error.code == "unsupported_stream")
    }

    /// A clear lead: tfhd selects the clear second sample entry, so the samples pass untouched; the first entry's
    /// samples in the same init are decrypted.
    @Test func clearLeadSampleEntryIsLeftAlone() async throws {
        let bytes = SyntheticCBCSSegment.initWithClearEntry(
            encrypted: try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.encryptedDirectory)/video_init.mp4"),
            clear: try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/video_init.mp4")
        )
        let initSection = try CBCSInitSection.parse(bytes, segment: "init")
        let iv = try #require(initSection.tracks[0].constantIV)
        var lead = SyntheticCBCSSegment(samples: Self.edgeSamples, auxiliaryInformation: .none)
        lead.sampleDescriptionIndex = 2
        let (segment, clearPayload, _) = try await lead.build(key: Self.key, constantIV: iv)
        #expect(try Self.decrypt(segment, initSection) == segment)
        #expect(Array(segment.suffix(clearPayload.count)) == clearPayload)
        var protected = SyntheticCBCSSegment(samples: Self.edgeSamples)
        protected.sampleDescriptionIndex = 1
        try await Self.check(protected, initSection: initSection, constantIV: iv)
        // Both entries become avc1 in the clear init section.
        let clearInit = try CBCSInitSection.parse(try initSection.clearInitSection(), segment: "clear")
        #expect(clearInit.tracks[0].scheme == nil)
        var outOfRange = SyntheticCBCSSegment(samples: Self.edgeSamples)
        outOfRange.sampleDescriptionIndex = 3
        let (bad, _, _) = try await outOfRange.build(key: Self.key, constantIV: iv)
        #expect(throws: SegmentCryptoError.self) { try Self.decrypt(bad, initSection) }
    }
}
