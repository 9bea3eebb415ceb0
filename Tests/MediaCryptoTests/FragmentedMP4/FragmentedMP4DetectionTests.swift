import Foundation
import MediaCrypto
import Testing

/// FragmentedMP4Detection on fMP4 segments and init sections, and on what it must not take for fMP4.
struct FragmentedMP4DetectionTests {
    @Test(arguments: [
        "Fixtures/media/shaka/fmp4-cbcs/video_1.m4s", "Fixtures/media/shaka/fmp4-cbcs/video_init.mp4",
        "Fixtures/media/shaka/fmp4-clear/audio_init.mp4",
        "Fixtures/media/fmp4-clear/init.mp4", "Fixtures/media/fmp4-clear/seg_1.m4s", "Fixtures/golden/mp4ff/cbcs.mp4",
    ])
    func recognizesFragmentedMP4(path: String) throws {
        let bytes = try FMP4TestSupport.fixture(path)
        for length in [64, 512, bytes.count] {
            #expect(FragmentedMP4Detection.looksLikeFragmentedMP4(Array(bytes.prefix(length))), "\(path), \(length) bytes")
        }
    }

    @Test func recognizesABareMoof() throws {
        let segment = try FMP4TestSupport.fixture("Fixtures/golden/mp4ff/cbcs.mp4")
        #expect(FragmentedMP4Detection.looksLikeFragmentedMP4(FMP4TestSupport.splitAtFirstFragment(segment).fragments))
    }

    @Test func rejectsOtherFormats() throws {
        let ts = try FMP4TestSupport.fixture("Fixtures/media/ts-clear/seg_0.ts")
        #expect(!FragmentedMP4Detection.looksLikeFragmentedMP4(Array(ts.prefix(512))))
        #expect(!FragmentedMP4Detection.looksLikeFragmentedMP4([]))
        #expect(!FragmentedMP4Detection.looksLikeFragmentedMP4([0, 0, 0, 24]))
        #expect(!FragmentedMP4Detection.looksLikeFragmentedMP4(Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, 10] + Array(repeating: 0, count: 30)))
        #expect(!FragmentedMP4Detection.looksLikeFragmentedMP4([0xFF, 0xF1, 0x50, 0x80, 0x02, 0x1F, 0xFC] + Array(repeating: 0, count: 40)))
        var generator = FragmentedMP4HostileInputTests.SplitMix64(state: 3)
        for _ in 0..<200 {
            let noise = (0..<64).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(!FragmentedMP4Detection.looksLikeFragmentedMP4(noise))
        }
        // A progressive MP4: ftyp isom, then a moov without mvex, then mdat.
        let progressive = CBCSInitSectionTests.replacing(
            "mvex",
            with: "free",
            in: try FMP4TestSupport.fixture("Fixtures/media/shaka/fmp4-clear/video_init.mp4")
        )
        let isom = CBCSInitSectionTests.replacing("mp41", with: "isom", in: progressive)
        var plain = isom
        for brand in ["iso8", "dash", "cmfc"] where String(decoding: plain.prefix(40), as: UTF8.self).contains(brand) {
            plain = CBCSInitSectionTests.replacing(brand, with: "mp42", in: plain)
        }
        #expect(!FragmentedMP4Detection.looksLikeFragmentedMP4(plain))
    }
}
