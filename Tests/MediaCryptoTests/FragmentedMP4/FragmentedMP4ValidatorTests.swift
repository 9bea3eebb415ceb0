import Foundation
import MediaCrypto
import StowageCore
import StowageCrypto
import Testing

/// FragmentedMP4Validator on real segments and on segments whose samples do not fill their mdat.
struct FragmentedMP4ValidatorTests {
    @Test func summarizesAShakaSegment() throws {
        let initSection = try CBCSInitSection.parse(
            try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.encryptedDirectory)/video_init.mp4"),
            segment: "init"
        )
        let segment = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.encryptedDirectory)/video_2.m4s")
        let summary = try FragmentedMP4Validator.validate(segment, initSection: initSection, segment: "video_2.m4s")
        #expect(summary.topLevelBoxes == ["styp": 1, "sidx": 1, "moof": 1, "mdat": 1])
        #expect(summary.fragmentCount == 1 && summary.trackIDs == [1] && summary.sequenceNumbers == [2])
        #expect(summary.sampleCount == 48)
        let mdat = FMP4SampleReader.boxes(segment, 0..<segment.count).first { $0.type == "mdat" }!
        #expect(summary.sampleBytes == mdat.end - mdat.payloadStart && summary.mediaDataBytes == summary.sampleBytes)
        #expect(summary.isEncrypted)
        // Without the init section the tfhd and trun say enough.
        let bare = try FragmentedMP4Validator.validate(segment, segment: "video_2.m4s")
        #expect(bare.sampleBytes == summary.sampleBytes)
    }

    @Test func decryptedOutputCarriesNoEncryptionBoxes() throws {
        let decrypted = try CBCSShakaFixtureTests.decrypted("video_1.m4s")
        let (clearInit, segment) = FMP4TestSupport.splitAtFirstFragment(decrypted)
        let summary = try FragmentedMP4Validator.validate(segment, initSection: try CBCSInitSection.parse(clearInit, segment: "clear"), segment: "s")
        #expect(!summary.isEncrypted && summary.fragmentCount == 1)
        let twin = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/video_1.m4s")
        #expect(try !FragmentedMP4Validator.validate(twin, segment: "twin").isEncrypted)
    }

    @Test func samplesNotFillingTheMdatAreMalformed() throws {
        let segment = try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/video_1.m4s")
        let topLevel = FMP4SampleReader.boxes(segment, 0..<segment.count)
        let moof = topLevel.first { $0.type == "moof" }!
        let traf = FMP4SampleReader.boxes(segment, moof.payloadStart..<moof.end).first { $0.type == "traf" }!
        let trun = FMP4SampleReader.boxes(segment, traf.payloadStart..<traf.end).first { $0.type == "trun" }!
        // trun flags 0xe01 (Shaka): data_offset, then per sample size, flags and composition offset.
        #expect(FMP4TestSupport.readUInt32(segment, trun.payloadStart) == 0xE01)
        let firstSize = trun.payloadStart + 12
        var shorter = segment
        shorter[firstSize + 3] &-= 1
        let error = try #require(throws: SegmentCryptoError.self) { try FragmentedMP4Validator.validate(shorter, segment: "s") }
        #expect(error.code == "malformed_container" && error.detail.contains("add up"))
        // An mdat one byte longer than its samples.
        let mdat = topLevel.first { $0.type == "mdat" }!
        var longer = segment + [0]
        FragmentedMP4HostileInputTests.put32(&longer, mdat.start, UInt32(mdat.end - mdat.start + 1))
        #expect(throws: SegmentCryptoError.self) { try FragmentedMP4Validator.validate(longer, segment: "s") }
    }

    @Test func segmentsWithoutFragmentsAreMalformed() throws {
        #expect(throws: SegmentCryptoError.self) { try FragmentedMP4Validator.validate([], segment: "s") }
        let styp = Array(try FMP4TestSupport.fixture("\(CBCSShakaFixtureTests.clearDirectory)/video_1.m4s").prefix(40))
        let error = try #require(throws: SegmentCryptoError.self) { try FragmentedMP4Validator.validate(styp, segment: "s") }
        #expect(error.detail.contains("no moof"))
        let stream = FragmentedMP4Validator.Stream(initSection: nil, segment: "s")
        var header: [UInt8] = [0x7F, 0, 0, 0] + Array("moof".utf8)
        header[0] = 0x7F
        #expect(throws: SegmentCryptoError.self) { try stream.process(header) }
    }
}
