import Foundation
import MediaCrypto
import StowageCore
import StowageCrypto
import Testing

/// Damaged and lying input: every outcome is a clean result or a typed ``SegmentCryptoError``, never a crash, a hang
/// or an unbounded allocation.
struct FragmentedMP4HostileInputTests {
    /// A deterministic generator, so a failure reproduces.
    struct SplitMix64: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    enum Outcome: Equatable {
        case success
        case failure(ErrorCode)
        /// An error that is not a ``SegmentCryptoError``.
        case untyped
    }

    static let key = SecretBytes(Hex.decode("22bdb0063805260307ee5045c0f3835a")!)

    /// Runs a transform, turning a SegmentCryptoError into its code; any other error fails the test.
    static func outcome(_ body: () throws -> Void) -> Outcome {
        do {
            try body()
            return .success
        } catch let error as SegmentCryptoError {
            #expect(!error.description.isEmpty)
            return .failure(error.code)
        } catch {
            Issue.record("untyped error \(error)")
            return .untyped
        }
    }

    static func decrypt(_ bytes: [UInt8], _ initSection: CBCSInitSection, chunkSize: Int = 4096) -> Outcome {
        outcome {
            _ = try FMP4TestSupport.run(
                CBCSFragmentDecryptor(initSection: initSection, key: key, segment: "hostile.m4s"),
                bytes,
                chunkSize: chunkSize
            )
        }
    }

    static func validate(_ bytes: [UInt8], _ initSection: CBCSInitSection?) -> Outcome {
        outcome { _ = try FragmentedMP4Validator.validate(bytes, initSection: initSection, segment: "hostile.m4s") }
    }

    static func put32(_ bytes: inout [UInt8], _ offset: Int, _ value: UInt32) {
        for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (24 - 8 * index)) }
    }

    /// Every box inside the first moof, depth first.
    static func boxesOfFirstMovieFragment(_ bytes: [UInt8]) -> [FMP4SampleReader.Box] {
        let containers: Set<String> = ["moof", "traf"]
        func walk(_ range: Range<Int>) -> [FMP4SampleReader.Box] {
            FMP4SampleReader.boxes(bytes, range).flatMap { box in [box] + (containers.contains(box.type) ? walk(box.payloadStart..<box.end) : []) }
        }
        let moof = FMP4SampleReader.boxes(bytes, 0..<bytes.count).first { $0.type == "moof" }!
        return [moof] + walk(moof.payloadStart..<moof.end)
    }

    @Test func truncationsAreCleanBoundariesOrMalformed() throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let topLevel = FMP4SampleReader.boxes(fragments, 0..<fragments.count)
        // The segment may end after any complete moof + mdat pair.
        let validCuts = Set([0] + topLevel.filter { $0.type == "mdat" }.map(\.end))
        var cuts = Array(stride(from: 0, to: fragments.count, by: 53))
        for box in topLevel + Self.boxesOfFirstMovieFragment(fragments) {
            cuts += [box.start - 1, box.start, box.start + 1, box.start + 7, box.start + 8, box.end - 1, box.end, box.end + 1]
        }
        for cut in Set(cuts) where cut >= 0 && cut <= fragments.count {
            let outcome = Self.decrypt(Array(fragments[..<cut]), initSection, chunkSize: 1000)
            if validCuts.contains(cut) {
                #expect(outcome == .success, "cut at \(cut)")
            } else {
                #expect(outcome == .failure(.malformedContainer), "cut at \(cut)")
            }
            #expect(
                Self.validate(Array(fragments[..<cut]), initSection)
                    == (validCuts.contains(cut) && cut > 0 ? .success : .failure(.malformedContainer))
            )
        }
    }

    @Test func lyingBoxSizesAreTypedErrors() throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        for box in Self.boxesOfFirstMovieFragment(fragments) {
            let size = box.end - box.start
            for lie in [0, 1, 7, 8, size - 1, size + 1, size * 2, 0x7FFF_FFFF, 0xFFFF_FFFF] {
                var bytes = fragments
                Self.put32(&bytes, box.start, UInt32(truncatingIfNeeded: lie))
                let outcome = Self.decrypt(bytes, initSection)
                #expect(outcome != .untyped, "\(box.type) claiming \(lie) bytes")
                if box.type == "moof" || box.type == "traf" || box.type == "trun" || box.type == "senc" {
                    #expect(outcome != .success, "\(box.type) at \(box.start) claiming \(lie) bytes instead of \(size)")
                }
            }
        }
    }

    @Test(arguments: [UInt32(0), 1, 13, 0x10_0000, 0x7FFF_FFFF, 0xFFFF_FFFF])
    func absurdSampleCountsAreRefused(count: UInt32) throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let trun = Self.boxesOfFirstMovieFragment(fragments).first { $0.type == "trun" }!
        var bytes = fragments
        Self.put32(&bytes, trun.payloadStart + 4, count)
        let outcome = Self.decrypt(bytes, initSection)
        #expect(outcome == .failure(.malformedContainer) || outcome == .failure(.limitExceeded))
    }

    /// A trun with no per-sample fields may claim 2^32 samples in 20 bytes: the sample limit refuses it before any
    /// allocation.
    @Test func defaultSizedSampleFloodIsALimit() throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let trun = Self.boxesOfFirstMovieFragment(fragments).first { $0.type == "trun" }!
        var bytes = fragments
        Self.put32(&bytes, trun.payloadStart, 0x0000_0001)  // data offset only: sizes from tfhd's default
        Self.put32(&bytes, trun.payloadStart + 4, 0xFFFF_FFFF)
        #expect(Self.decrypt(bytes, initSection) == .failure(.limitExceeded))
    }

    @Test(arguments: [-1, 1, 1000])
    func wrongSencCountIsMalformed(delta: Int) throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let senc = Self.boxesOfFirstMovieFragment(fragments).first { $0.type == "senc" }!
        var bytes = fragments
        let count = Int(FMP4TestSupport.readUInt32(bytes, senc.payloadStart + 4))
        Self.put32(&bytes, senc.payloadStart + 4, UInt32(count + delta))
        #expect(Self.decrypt(bytes, initSection) == .failure(.malformedContainer))
    }

    @Test(arguments: [UInt16(0xFFFF), 2, 0])
    func wrongSubsampleCountIsMalformed(count: UInt16) throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let senc = Self.boxesOfFirstMovieFragment(fragments).first { $0.type == "senc" }!
        var bytes = fragments
        // The first entry: no IV (constant IV), subsample_count(16) at payload + 8.
        bytes[senc.payloadStart + 8] = UInt8(count >> 8)
        bytes[senc.payloadStart + 9] = UInt8(count & 0xFF)
        let outcome = Self.decrypt(bytes, initSection)
        #expect(outcome == .failure(.malformedContainer))
    }

    @Test func subsamplesNotAddingUpAreMalformed() throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let senc = Self.boxesOfFirstMovieFragment(fragments).first { $0.type == "senc" }!
        var bytes = fragments
        // First entry's first subsample: clear(16) at payload + 10, protected(32) at + 12.
        bytes[senc.payloadStart + 15] &+= 1
        #expect(Self.decrypt(bytes, initSection) == .failure(.malformedContainer))
    }

    @Test(arguments: [Int32(100_000), -5000, 1, -1])
    func dataOffsetsOutsideTheMdatAreMalformed(shift: Int32) throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let trun = Self.boxesOfFirstMovieFragment(fragments).first { $0.type == "trun" }!
        var bytes = fragments
        let offset = Int32(bitPattern: FMP4TestSupport.readUInt32(bytes, trun.payloadStart + 8))
        Self.put32(&bytes, trun.payloadStart + 8, UInt32(bitPattern: offset &+ shift))
        let outcome = Self.decrypt(bytes, initSection)
        // Shifting by one byte makes samples overlap or leave the mdat.
        #expect(outcome == .failure(.malformedContainer))
    }

    @Test func hugeMovieFragmentIsRefusedBeforeBuffering() throws {
        let (initSection, _) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        var header: [UInt8] = [0, 0, 0, 0] + Array("moof".utf8)
        Self.put32(&header, 0, 0x7FFF_FFF0)
        let decryptor = try CBCSFragmentDecryptor(initSection: initSection, key: Self.key, segment: "huge.m4s")
        #expect(Self.outcome { try decryptor.process(header) { _ in } } == .failure(.limitExceeded))
        var large: [UInt8] = [0, 0, 0, 1] + Array("moof".utf8) + [0, 0, 0, 1, 0, 0, 0, 0]
        large.replaceSubrange(0..<4, with: [0, 0, 0, 1])
        #expect(Self.decrypt(large, initSection) == .failure(.limitExceeded))
    }

    @Test func mediaDataClaimingMoreThanArrivesIsMalformed() throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let mdat = FMP4SampleReader.boxes(fragments, 0..<fragments.count).first { $0.type == "mdat" }!
        var bytes = Array(fragments[..<mdat.end])
        Self.put32(&bytes, mdat.start, 0xFFFF_FFFF)
        #expect(Self.decrypt(bytes, initSection) == .failure(.malformedContainer))
        // A 64-bit size near 2^62 streams, then fails for the missing bytes instead of allocating.
        var wide = Array(fragments[..<mdat.start]) + [0, 0, 0, 1] + Array("mdat".utf8) + [0x3F, 0xFF, 0, 0, 0, 0, 0, 0]
        wide += fragments[(mdat.start + 8)..<mdat.end]
        #expect(Self.decrypt(wide, initSection) == .failure(.malformedContainer))
    }

    @Test func boxesOutOfPlaceAreMalformed() throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let topLevel = FMP4SampleReader.boxes(fragments, 0..<fragments.count)
        let moof = Array(fragments[topLevel[0].start..<topLevel[0].end])
        let mdat = Array(fragments[topLevel[1].start..<topLevel[1].end])
        #expect(Self.decrypt(mdat, initSection) == .failure(.malformedContainer))
        #expect(Self.decrypt(moof, initSection) == .failure(.malformedContainer))
        #expect(Self.decrypt(moof + moof + mdat, initSection) == .failure(.malformedContainer))
        #expect(Self.decrypt(Array(try FMP4TestSupport.fixture("Fixtures/golden/mp4ff/cbcs.mp4")), initSection) == .failure(.malformedContainer))
        #expect(Self.decrypt(Array(repeating: 0x47, count: 376), initSection) == .failure(.malformedContainer))
    }

    /// Random byte damage in the moofs and box headers: thousands of variants, each a clean result or a typed error.
    @Test func randomDamageNeverCrashes() throws {
        let (initSection, fragments) = try FragmentedMP4ChunkingTests.mp4ffFragments()
        let moofs = FMP4SampleReader.boxes(fragments, 0..<fragments.count).filter { $0.type == "moof" }
        var generator = SplitMix64(state: 0x5EED)
        var outcomes: [Outcome: Int] = [:]
        for _ in 0..<1200 {
            var bytes = fragments
            let moof = moofs[Int.random(in: 0..<moofs.count, using: &generator)]
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let position = Int.random(in: moof.start..<(moof.end + 16), using: &generator)
                bytes[position] = UInt8.random(in: 0...255, using: &generator)
            }
            let chunk = [13, 4096, 100_000][Int.random(in: 0..<3, using: &generator)]
            let outcome = Self.decrypt(bytes, initSection, chunkSize: chunk)
            outcomes[outcome, default: 0] += 1
            _ = Self.validate(bytes, initSection)
        }
        #expect(outcomes[.untyped] == nil)
        #expect((outcomes[.failure(.malformedContainer)] ?? 0) > 100)
    }

    @Test func encryptorSurvivesRandomDamage() throws {
        let keys = try FMP4TestSupport.shakaKeys()
        let clearInit = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/video_init.mp4")
        let initSection = try CBCSInitSection.encrypting(clearInit: clearInit, keyID: keys.keyID, constantIV: keys.iv, segment: "init")
        let clear = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/video_1.m4s")
        var generator = SplitMix64(state: 0xC1EA2)
        for round in 0..<600 {
            var bytes = clear
            // Half the damage in box headers and the moof, half in the H.264 data the slice header parser reads.
            let upper = round % 2 == 0 ? min(bytes.count, 900) : bytes.count
            for _ in 0..<Int.random(in: 1...6, using: &generator) {
                bytes[Int.random(in: 0..<upper, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            let outcome = Self.outcome {
                _ = try FMP4TestSupport.run(
                    CBCSFragmentEncryptor(initSection: initSection, key: SecretBytes(keys.key), segment: "e"),
                    bytes,
                    chunkSize: 4096
                )
            }
            #expect(outcome != .untyped)
        }
    }

    /// Boxes nested a hundred thousand deep: parsing and clearing an init section follow a fixed path, so the
    /// depth costs no stack.
    @Test func deeplyNestedInitSectionDoesNotRecurse() throws {
        let depth = 100_000
        var nested: [UInt8] = []
        nested.reserveCapacity(depth * 8 + 200)
        // A chain of minf boxes beside the tracks: the parser ignores it, and the editor must not descend into it.
        for level in 0..<depth { nested += SyntheticCBCSSegment.be32(UInt32((depth - level) * 8)) + Array("minf".utf8) }
        let mvex = SyntheticCBCSSegment.box("mvex", [])
        let moov = SyntheticCBCSSegment.box("moov", nested + mvex)
        let section = try CBCSInitSection.parse(moov, segment: "deep.mp4")
        #expect(try section.clearInitSection() == moov)
    }

    /// A sample of 66 000 slice NAL units would need more subsamples than senc can count: a limit, not a trap.
    @Test func tooManySubsamplesIsALimit() async throws {
        let keys = try FMP4TestSupport.shakaKeys()
        let clearInit = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/video_init.mp4")
        let initSection = try CBCSInitSection.encrypting(clearInit: clearInit, keyID: keys.keyID, constantIV: keys.iv, segment: "init")
        // A small P slice from the clear fixture: the smallest NAL unit of type 1.
        let clear = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/video_2.m4s")
        let samples = FMP4SampleReader.samples(try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/video_init.mp4") + clear)[1]!
        var slice: [UInt8]?
        for sample in samples {
            var position = 0
            while position + 4 <= sample.count {
                let length = Int(FMP4TestSupport.readUInt32(sample, position))
                let nal = Array(sample[(position + 4)..<min(sample.count, position + 4 + length)])
                if nal.first.map({ $0 & 0x1F == 1 }) == true, nal.count > 20, nal.count < (slice?.count ?? Int.max) { slice = nal }
                position += 4 + length
            }
        }
        let nal = try #require(slice)
        let sample = [UInt8]((0..<66_000).map { _ in SyntheticCBCSSegment.be32(UInt32(nal.count)) + nal }.joined())
        var synthetic = SyntheticCBCSSegment(samples: [SyntheticCBCSSegment.Sample(clear: sample)], auxiliaryInformation: .none)
        synthetic.sampleDescriptionIndex = 1
        let (segment, _, _) = try await synthetic.build(key: keys.key, constantIV: keys.iv)
        let outcome = Self.outcome {
            _ = try CBCSFragmentEncryptor(initSection: initSection, key: SecretBytes(keys.key), segment: "many.m4s").transform(segment)
        }
        #expect(outcome == .failure(.limitExceeded))
    }
}

extension FragmentedMP4HostileInputTests.Outcome: Hashable {}
