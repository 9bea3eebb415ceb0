import Foundation
import Testing

@testable import HLS

/// EXT-X-KEY and EXT-X-SESSION-KEY: attributes, KEYFORMATs, rotation, METHOD=NONE and IVs.
@Suite("Encryption keys")
struct EncryptionKeyTests {
    @Test("every attribute of EXT-X-KEY, with client attributes kept")
    func attributes() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="skd://k1",IV=0X00112233445566778899AABBCCDDEEFF,KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1/2",X-VENDOR="v""#,
                "#EXTINF:10,",
                "a.mp4"
            )
        )
        #expect(
            playlist.segments[0].keyTags == [
                EncryptionKey(
                    method: .sampleAESCTR,
                    uri: "skd://k1",
                    iv: "00112233445566778899AABBCCDDEEFF",
                    keyFormat: "com.apple.streamingkeydelivery",
                    keyFormatVersions: "1/2",
                    otherAttributes: [Attribute(name: "X-VENDOR", value: "v", isQuoted: true)]
                )
            ]
        )
        #expect(
            playlist.segments[0].keyTags[0].ivBytes == [
                0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF,
            ]
        )
    }

    @Test("a method this model does not name is kept as written")
    func unknownMethod() throws {
        let playlist = try parseMedia(
            m3u8("#EXTM3U", "#EXT-X-TARGETDURATION:10", #"#EXT-X-KEY:METHOD=AES-512-XTS,URI="k""#, "#EXTINF:10,", "a.ts")
        )
        #expect(playlist.segments[0].keyTags[0].method == EncryptionMethod(rawValue: "AES-512-XTS"))
        #expect(playlist.resolvedSegments(baseURL: nil)[0].method?.rawValue == "AES-512-XTS")
    }

    @Test("KEYFORMAT defaults to identity")
    func identity() {
        #expect(EncryptionKey(method: .aes128, uri: "k").effectiveKeyFormat == "identity")
        #expect(EncryptionKey(method: .aes128, uri: "k", keyFormat: "identity").effectiveKeyFormat == "identity")
        #expect(EncryptionKey(method: .aes128, uri: "k", keyFormat: "x").effectiveKeyFormat == "x")
    }

    @Test("several KEYFORMATs at once, each replaced only by a key of its own KEYFORMAT")
    func severalKeyFormats() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://fairplay-1",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1""#,
                #"#EXT-X-KEY:METHOD=SAMPLE-AES,URI="data:text/plain;base64,AAAA",KEYFORMAT="urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed""#,
                #"#EXT-X-KEY:METHOD=SAMPLE-AES,URI="https://keys.example.com/clear-1""#,
                "#EXTINF:10,",
                "a.mp4",
                #"#EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://fairplay-2",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1""#,
                "#EXTINF:10,",
                "b.mp4"
            )
        )
        let resolved = playlist.resolvedSegments(baseURL: nil)
        #expect(
            resolved[0].keys.map(\.keyFormat) == [
                "com.apple.streamingkeydelivery", "urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed", "identity",
            ]
        )
        #expect(resolved[0].key(forKeyFormat: "com.apple.streamingkeydelivery")?.uri == "skd://fairplay-1")
        #expect(resolved[0].key(forKeyFormat: "identity")?.uri == "https://keys.example.com/clear-1")
        #expect(resolved[0].key(forKeyFormat: "com.example.none") == nil)
        #expect(resolved[0].method == .sampleAES)
        // Rotation of one KEYFORMAT keeps the others and their order.
        #expect(
            resolved[1].keys.map(\.uri) == [
                "skd://fairplay-2", "data:text/plain;base64,AAAA", "https://keys.example.com/clear-1",
            ]
        )
        #expect(resolved[1].keys[0].keyFormatVersions == "1")
        #expect(
            playlist.distinctKeys.map(\.uri) == [
                "skd://fairplay-1", "data:text/plain;base64,AAAA", "https://keys.example.com/clear-1", "skd://fairplay-2",
            ]
        )
    }

    @Test("key rotation: each EXT-X-KEY applies from its segment on")
    func rotation() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k1""#,
                "#EXTINF:10,",
                "a.ts",
                "#EXTINF:10,",
                "b.ts",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k2""#,
                "#EXTINF:10,",
                "c.ts",
                "#EXTINF:10,",
                "d.ts"
            )
        )
        #expect(playlist.resolvedSegments(baseURL: nil).map { $0.keys.map(\.uri) } == [["k1"], ["k1"], ["k2"], ["k2"]])
        // The same key written twice is one distinct key.
        let repeated = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k1""#,
                "#EXTINF:10,",
                "a.ts",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k1",IV=0x1"#,
                "#EXTINF:10,",
                "b.ts"
            )
        )
        #expect(repeated.distinctKeys == [EncryptionKey(method: .aes128, uri: "k1")])
    }

    @Test("METHOD=NONE clears every key in effect, of every KEYFORMAT")
    func methodNone() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://1",KEYFORMAT="com.apple.streamingkeydelivery""#,
                #"#EXT-X-KEY:METHOD=SAMPLE-AES,URI="k1""#,
                "#EXTINF:10,",
                "a.ts",
                "#EXT-X-KEY:METHOD=NONE",
                "#EXTINF:10,",
                "b.ts",
                "#EXTINF:10,",
                "c.ts",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k2""#,
                "#EXTINF:10,",
                "d.ts"
            )
        )
        #expect(playlist.segments[1].keyTags == [EncryptionKey(method: .none)])
        let resolved = playlist.resolvedSegments(baseURL: nil)
        #expect(resolved.map(\.keys.count) == [2, 0, 0, 1])
        #expect(resolved.map(\.method) == [.sampleAES, nil, nil, .aes128])
        #expect(!playlist.distinctKeys.contains { $0.method == .none })
    }

    @Test("an explicit IV is used as is")
    func explicitIV() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                "#EXT-X-MEDIA-SEQUENCE:9",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x0102030405060708090a0b0c0d0e0f10"#,
                "#EXTINF:10,",
                "a.ts",
                "#EXTINF:10,",
                "b.ts"
            )
        )
        let resolved = playlist.resolvedSegments(baseURL: nil)
        for segment in resolved {
            #expect(segment.keys[0].iv == Array(1...16))
            #expect(segment.keys[0].ivIsExplicit)
        }
    }

    @Test("without IV the media sequence number is the IV, as a 128-bit big-endian integer (RFC 8216 5.2)")
    func derivedIV() throws {
        let playlist = try parseMedia(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                "#EXT-X-MEDIA-SEQUENCE:4294967295",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k""#,
                "#EXTINF:10,",
                "a.ts",
                "#EXTINF:10,",
                "b.ts"
            )
        )
        let resolved = playlist.resolvedSegments(baseURL: nil)
        #expect(resolved[0].keys[0].iv == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(resolved[1].keys[0].iv == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0])
        #expect(resolved.allSatisfy { !$0.keys[0].ivIsExplicit })
    }

    @Test(
        "EncryptionKey.iv(forMediaSequence:) known answers",
        arguments: [
            (0, [UInt8](repeating: 0, count: 16)),
            (1, [UInt8](repeating: 0, count: 15) + [1]),
            (7794, [UInt8](repeating: 0, count: 14) + [0x1E, 0x72]),
            (0x0102_0304_0506_0708, [UInt8](repeating: 0, count: 8) + [1, 2, 3, 4, 5, 6, 7, 8]),
            (Int.max, [UInt8](repeating: 0, count: 8) + [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
        ]
    )
    func ivForSequence(sequence: Int, iv: [UInt8]) {
        #expect(EncryptionKey.iv(forMediaSequence: sequence) == iv)
    }

    @Test("a short IV is read as leading bytes followed by zeros, with a warning")
    func shortIV() throws {
        let parsed = try PlaylistParser.parse(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                "#EXT-X-MEDIA-SEQUENCE:5",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x3334353637383930"#,
                "#EXTINF:10,",
                "a.ts"
            )
        )
        let playlist = try #require(parsed.playlist.media)
        let expected: [UInt8] = [0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x30, 0, 0, 0, 0, 0, 0, 0, 0]
        #expect(playlist.segments[0].keyTags[0].iv == "3334353637383930")
        #expect(playlist.segments[0].keyTags[0].ivBytes == expected)
        let key = try #require(playlist.resolvedSegments(baseURL: nil).first?.keys.first)
        #expect(key.iv == expected)
        #expect(key.ivIsExplicit)
        #expect(parsed.warnings.count == 1)
        #expect(parsed.warnings.first?.line == 4)
        #expect(parsed.warnings.first?.message.contains("16 hex digits") == true)
    }

    @Test("a full-length IV raises no warning")
    func fullIVNoWarning() throws {
        let parsed = try PlaylistParser.parse(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x00000000000000000000000000000001"#,
                "#EXTINF:10,",
                "a.ts"
            )
        )
        #expect(parsed.warnings == [])
    }

    @Test("ivBytes: case, odd digit counts and the 32-digit limit")
    func ivBytes() {
        #expect(EncryptionKey(method: .aes128, uri: "k", iv: "aBcD").ivBytes == [0xAB, 0xCD] + [UInt8](repeating: 0, count: 14))
        #expect(EncryptionKey(method: .aes128, uri: "k", iv: "abc").ivBytes == [0x0A, 0xBC] + [UInt8](repeating: 0, count: 14))
        #expect(EncryptionKey(method: .aes128, uri: "k", iv: String(repeating: "f", count: 32)).ivBytes == [UInt8](repeating: 0xFF, count: 16))
        #expect(EncryptionKey(method: .aes128, uri: "k", iv: String(repeating: "f", count: 33)).ivBytes == nil)
        #expect(EncryptionKey(method: .aes128, uri: "k", iv: "zz").ivBytes == nil)
        #expect(EncryptionKey(method: .aes128, uri: "k", iv: "").ivBytes == nil)
        #expect(EncryptionKey(method: .aes128, uri: "k").ivBytes == nil)
    }

    @Test("an EXT-X-MAP under AES-128 without an IV is accepted with a warning (RFC 8216bis 4.4.4.5)")
    func mapWithoutIV() throws {
        let parsed = try PlaylistParser.parse(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k""#,
                #"#EXT-X-MAP:URI="init.mp4""#,
                "#EXTINF:10,",
                "a.mp4"
            )
        )
        #expect(parsed.warnings.map(\.line) == [4])
        let withIV = try PlaylistParser.parse(
            m3u8(
                "#EXTM3U",
                "#EXT-X-TARGETDURATION:10",
                #"#EXT-X-KEY:METHOD=AES-128,URI="k",IV=0x00000000000000000000000000000001"#,
                #"#EXT-X-MAP:URI="init.mp4""#,
                "#EXTINF:10,",
                "a.mp4"
            )
        )
        #expect(withIV.warnings == [])
    }

    @Test("EXT-X-SESSION-KEY in a multivariant playlist")
    func sessionKey() throws {
        let playlist = try parseMultivariant(
            m3u8(
                "#EXTM3U",
                #"#EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI="skd://asset-1",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1""#,
                #"#EXT-X-SESSION-KEY:METHOD=AES-128,URI="https://k.example.com/1",IV=0x0A"#,
                "#EXT-X-STREAM-INF:BANDWIDTH=1",
                "v.m3u8"
            )
        )
        #expect(
            playlist.sessionKeys == [
                EncryptionKey(
                    method: .sampleAES,
                    uri: "skd://asset-1",
                    keyFormat: "com.apple.streamingkeydelivery",
                    keyFormatVersions: "1"
                ),
                EncryptionKey(method: .aes128, uri: "https://k.example.com/1", iv: "0A"),
            ]
        )
    }
}
