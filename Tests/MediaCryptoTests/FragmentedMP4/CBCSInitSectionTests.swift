import Foundation
import MediaCrypto
import StowageCore
import StowageCrypto
import Testing

/// Parsing init sections, making them clear, and what the decryptor refuses at construction.
struct CBCSInitSectionTests {
    static func mp4ffInit(_ name: String) throws -> [UInt8] {
        FMP4TestSupport.splitAtFirstFragment(try FMP4TestSupport.fixture("Fixtures/golden/mp4ff/\(name)")).initSection
    }

    static func replacing(_ old: String, with new: String, in bytes: [UInt8], after marker: String? = nil) -> [UInt8] {
        var bytes = bytes
        let start = marker.map { marker in (0..<(bytes.count - 4)).first { Array(bytes[$0..<($0 + 4)]) == Array(marker.utf8) }! } ?? 0
        let at = (start..<(bytes.count - 4)).first { Array(bytes[$0..<($0 + 4)]) == Array(old.utf8) }!
        bytes.replaceSubrange(at..<(at + 4), with: Array(new.utf8))
        return bytes
    }

    @Test func mp4ffInitListsProtectedAndClearTracks() throws {
        let initSection = try CBCSInitSection.parse(try Self.mp4ffInit("cbcs.mp4"), segment: "cbcs.mp4")
        #expect(initSection.tracks.count == 2)
        let video = initSection.tracks[0]
        #expect(video.trackID == 1 && video.handler == "vide" && video.originalFormat == "avc1" && video.scheme == "cbcs")
        #expect(video.defaultKID == String(repeating: "0", count: 32))
        #expect(video.constantIV == Hex.decode("cbe3327da85a1e7a74496db552dfe6d0"))
        #expect(video.isProtected && video.perSampleIVSize == 0 && video.cryptByteBlock == 1 && video.skipByteBlock == 9)
        let captions = initSection.tracks[1]
        #expect(captions.trackID == 2 && captions.handler == "clcp" && captions.originalFormat == "c608")
        #expect(captions.scheme == nil && captions.defaultKID == nil && !captions.isProtected)
    }

    /// Our clear init is byte for byte the init of mp4ff's and Shaka Packager's decrypted or clear twins: the sinf and
    /// pssh boxes go, every ancestor's size is fixed, nothing else changes.
    @Test(arguments: [
        ("Fixtures/golden/mp4ff/cbcs.mp4", "Fixtures/golden/mp4ff/cbcsdec.mp4"),
        ("Fixtures/golden/mp4ff/cbcs_audio.mp4", "Fixtures/golden/mp4ff/cbcs_audiodec.mp4"),
        ("Fixtures/media/shaka/fmp4-cbcs/video_init.mp4", "Fixtures/media/shaka/fmp4-clear/video_init.mp4"),
        ("Fixtures/media/shaka/fmp4-cbcs/audio_init.mp4", "Fixtures/media/shaka/fmp4-clear/audio_init.mp4"),
    ])
    func clearInitSectionEqualsTheClearTwins(encrypted: String, clear: String) throws {
        let encryptedInit = FMP4TestSupport.splitAtFirstFragment(try FMP4TestSupport.fixture(encrypted)).initSection
        let clearInit = FMP4TestSupport.splitAtFirstFragment(try FMP4TestSupport.fixture(clear)).initSection
        #expect(try CBCSInitSection.parse(encryptedInit, segment: encrypted).clearInitSection() == clearInit)
    }

    /// The four Common Encryption schemes are decrypted; any other scheme is refused, named.
    @Test(arguments: ["piff", "abcd"])
    func otherSchemesAreUnsupported(scheme: String) throws {
        let bytes = Self.replacing(
            "cbcs",
            with: scheme,
            in: try FMP4TestSupport.fixture("Fixtures/media/shaka/fmp4-cbcs/video_init.mp4"),
            after: "schm"
        )
        let initSection = try CBCSInitSection.parse(bytes, segment: "init.mp4")
        #expect(initSection.tracks[0].scheme == scheme)
        let error = try #require(throws: SegmentCryptoError.self) {
            try CBCSFragmentDecryptor(initSection: initSection, key: SecretBytes(Array(repeating: 1, count: 16)), segment: "seg.m4s")
        }
        #expect(error.code == "unsupported_stream" && error.detail.contains(scheme))
    }

    @Test func keyAndIVLengthsAreChecked() throws {
        let initSection = try CBCSInitSection.parse(try Self.mp4ffInit("cbcs.mp4"), segment: "cbcs.mp4")
        #expect(throws: SegmentCryptoError.invalidKey(segment: "s")) {
            try CBCSFragmentDecryptor(initSection: initSection, key: SecretBytes(Array(repeating: 1, count: 32)), segment: "s")
        }
        #expect(throws: SegmentCryptoError.invalidIV(segment: "s")) {
            try CBCSFragmentDecryptor(initSection: initSection, key: SecretBytes(Array(repeating: 1, count: 16)), iv: [1, 2, 3], segment: "s")
        }
        #expect(throws: SegmentCryptoError.invalidKey(segment: "s")) {
            try CBCSFragmentEncryptor(initSection: initSection, key: SecretBytes(Array(repeating: 1, count: 24)), segment: "s")
        }
    }

    @Test func damagedInitSectionsAreTypedErrors() throws {
        let bytes = try FMP4TestSupport.fixture("Fixtures/media/shaka/fmp4-cbcs/video_init.mp4")
        for cut in stride(from: 0, to: bytes.count, by: 3) {
            let error = try #require(throws: SegmentCryptoError.self) { try CBCSInitSection.parse(Array(bytes[..<cut]), segment: "init.mp4") }
            #expect([.malformedContainer, .unsupportedStream].contains(error.code))
        }
        var generator = FragmentedMP4HostileInputTests.SplitMix64(state: 11)
        for _ in 0..<2000 {
            var damaged = bytes
            for _ in 0..<3 { damaged[Int.random(in: 0..<damaged.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator) }
            do {
                let section = try CBCSInitSection.parse(damaged, segment: "init.mp4")
                _ = try? section.clearInitSection()
            } catch {
                #expect([.malformedContainer, .unsupportedStream].contains(error.code))
            }
        }
    }

    @Test func wrongKindsOfFileAreRefused() throws {
        // A whole file with fragments is not an init section.
        let whole = try #require(throws: SegmentCryptoError.self) {
            try CBCSInitSection.parse(try FMP4TestSupport.fixture("Fixtures/golden/mp4ff/cbcs.mp4"), segment: "cbcs.mp4")
        }
        #expect(whole.code == "malformed_container")
        // Without mvex it is a progressive MP4.
        let progressive = Self.replacing("mvex", with: "free", in: try FMP4TestSupport.fixture("Fixtures/media/shaka/fmp4-clear/video_init.mp4"))
        let notFragmented = try #require(throws: SegmentCryptoError.self) { try CBCSInitSection.parse(progressive, segment: "init.mp4") }
        #expect(notFragmented.code == "unsupported_stream")
        // An encrypted entry of a track that is neither video nor audio cannot be read: the decryptor refuses it.
        var text = Self.replacing(
            "vide",
            with: "text",
            in: try FMP4TestSupport.fixture("Fixtures/media/shaka/fmp4-cbcs/video_init.mp4"),
            after: "hdlr"
        )
        text = Self.replacing("encv", with: "enct", in: text)
        let opaque = try CBCSInitSection.parse(text, segment: "init.mp4")
        let refused = try #require(throws: SegmentCryptoError.self) {
            try CBCSFragmentDecryptor(initSection: opaque, key: SecretBytes(Array(repeating: 1, count: 16)), segment: "s")
        }
        #expect(refused.code == "unsupported_stream")
    }
}
