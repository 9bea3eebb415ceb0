import Foundation
import MediaCrypto
import StowageCrypto
import Testing

/// The committed SAMPLE-AES transport stream fixtures (`Fixtures/media/shaka/`, made by Shaka Packager, see
/// `Fixtures/media/README.md`) with their clear twins, keys and IVs (`Keys/media-fixtures.test.json`).
enum TransportStreamFixtures {
    /// One segment of a fixture: where the encrypted and clear files are and how the segment is encrypted.
    struct Segment: CustomStringConvertible, Sendable {
        let fixture: String
        /// `video_1.ts`, `audio_3.ts`...
        let file: String
        let encrypted: URL
        let clear: URL
        let key: [UInt8]
        let iv: [UInt8]

        var isVideo: Bool { file.hasPrefix("video") }
        var description: String { "\(fixture)/\(file)" }
    }

    /// A SAMPLE-AES fixture directory and its clear twin.
    struct Fixture: CustomStringConvertible, Sendable {
        /// `aac`, `ac3`, `eac3`, `multislice`, `aac-rotation`.
        let name: String
        let segments: [Segment]
        var description: String { "ts-sample-aes-\(name)" }

        /// The segments of one playlist (`video` or `audio`), in order.
        func segments(of kind: String) -> [Segment] { segments.filter { $0.file.hasPrefix(kind) } }
    }

    static let names = ["aac", "ac3", "eac3", "multislice"]
    /// Key and IV change every segment.
    static let rotation = "aac-rotation"

    /// The repository root: the first ancestor of this file (symlinks resolved) that has `Fixtures/media`.
    static let root: URL = {
        for start in [URL(fileURLWithPath: #filePath), URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()] {
            var directory = start.deletingLastPathComponent()
            while directory.path != "/" {
                if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Fixtures/media/README.md").path) {
                    return directory
                }
                directory = directory.deletingLastPathComponent()
            }
        }
        fatalError("cannot find Fixtures/media above \(#filePath)")
    }()

    static let media = root.appendingPathComponent("Fixtures/media")

    private static func keys() -> [String: Any] {
        let url = root.appendingPathComponent("Keys/media-fixtures.test.json")
        let object = try! JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
        return object["fixtures"] as! [String: Any]
    }

    /// The fixture `shaka/ts-sample-aes-<name>`, twin `shaka/ts-clear-<codec>`.
    static func fixture(_ name: String) -> Fixture {
        let entry = keys()["shaka/ts-sample-aes-\(name)"] as! [String: Any]
        let twin = name == rotation ? "aac" : name
        let encryptedDirectory = media.appendingPathComponent("shaka/ts-sample-aes-\(name)")
        let clearDirectory = media.appendingPathComponent("shaka/ts-clear-\(twin)")
        var segments: [Segment] = []
        for kind in ["video", "audio"] {
            for number in 1...3 {
                let file = "\(kind)_\(number).ts"
                var key = entry["key"] as? String
                var iv = entry["iv"] as? String
                if name == rotation {
                    // Key rotation: each segment's key and IV are in the derived part.
                    let derived = entry["derived"] as! [String: Any]
                    let playlists = derived["playlists"] as! [String: [[String: Any]]]
                    let item = playlists["\(kind).m3u8"]!.first { $0["segment"] as? String == file }!
                    key = item["key"] as? String
                    iv = item["iv"] as? String
                }
                segments.append(
                    Segment(
                        fixture: "ts-sample-aes-\(name)",
                        file: file,
                        encrypted: encryptedDirectory.appendingPathComponent(file),
                        clear: clearDirectory.appendingPathComponent(file),
                        key: bytes(hex: key!),
                        iv: bytes(hex: iv!)
                    )
                )
            }
        }
        return Fixture(name: name, segments: segments)
    }

    static var all: [Fixture] { (names + [rotation]).map(fixture) }
    static var allSegments: [Segment] { all.flatMap(\.segments) }

    /// `packet-counts.json`: packets per stream of each playlist as ffprobe demuxes it.
    static func packetCount(directory: String, playlist: String, stream: String) -> Int {
        let url = media.appendingPathComponent("packet-counts.json")
        let object = try! JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
        let entry = object[directory] as! [String: [String: Int]]
        return entry[playlist]![stream]!
    }

    static func read(_ url: URL) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: url))
    }

    static func bytes(hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            result.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return result
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// Runs `transform` over `input` fed in chunks of `chunkSize` bytes (the whole input when nil).
    static func run(_ transform: any SegmentTransform, _ input: [UInt8], chunkSize: Int? = nil) throws -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(input.count + 4096)
        let size = max(1, chunkSize ?? input.count)
        try input.withUnsafeBytes { all in
            var offset = 0
            while offset < all.count {
                let end = min(all.count, offset + size)
                try transform.process(UnsafeRawBufferPointer(rebasing: all[offset..<end])) { output.append(contentsOf: $0) }
                offset = end
            }
        }
        try transform.finish { output.append(contentsOf: $0) }
        return output
    }

    static func decrypt(_ input: [UInt8], key: [UInt8], iv: [UInt8], chunkSize: Int? = nil) throws -> [UInt8] {
        try run(SampleAESTransportStreamDecryptor(key: SecretBytes(key), iv: iv, segment: "test.ts"), input, chunkSize: chunkSize)
    }

    static func encrypt(_ input: [UInt8], key: [UInt8], iv: [UInt8], chunkSize: Int? = nil) throws -> [UInt8] {
        try run(SampleAESTransportStreamEncryptor(key: SecretBytes(key), iv: iv, segment: "test.ts"), input, chunkSize: chunkSize)
    }

    /// Where `needle` first occurs in `haystack`.
    static func firstIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        return (0...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// Runs the validator over a whole segment.
    static func validate(_ input: [UInt8], segment: String = "test.ts") throws(SegmentCryptoError) -> TransportStreamSummary {
        let validator = TransportStreamValidator(segment: segment)
        var failure: SegmentCryptoError?
        input.withUnsafeBytes { bytes in
            do throws(SegmentCryptoError) { try validator.process(bytes) } catch { failure = error }
        }
        if let failure { throw failure }
        return try validator.finish()
    }

    /// A fresh temporary directory for one test.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-ts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
