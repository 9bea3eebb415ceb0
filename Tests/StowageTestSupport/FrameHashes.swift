public import Foundation

/// ffmpeg as an independent client, shared by the test targets: the packets of a playlist or file as
/// `ffmpeg -c copy -f framemd5` lists them (stream, timestamps, size, MD5), comment lines dropped.
public enum FrameHashes {
    /// Why ffmpeg could not give the hashes.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// - Parameters:
    ///   - input: a playlist (local key files are allowed) or a media file.
    ///   - map: ffmpeg's `-map` argument: `0` for every stream, `0:v:0` for the first video stream.
    /// - Throws: ``Failure`` when ffmpeg is missing (scripts/test.sh installs it) or fails on the input.
    public static func of(_ input: URL, map: String = "0") throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "ffmpeg", "-nostdin", "-v", "error", "-allowed_extensions", "ALL", "-i", input.path, "-map", map, "-c", "copy",
            "-f", "framemd5", "-",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "ffmpeg failed on \(input.path) (status \(process.terminationStatus)); scripts/test.sh installs ffmpeg")
        }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
    }
}
