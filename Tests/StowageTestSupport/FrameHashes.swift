public import Foundation

/// ffmpeg as an independent client, shared by the test targets: the packets of a playlist or file as
/// `ffmpeg -c copy -f framemd5` lists them (stream, timestamps, size, MD5), comment lines dropped.
public enum FrameHashes {
    /// Why ffmpeg could not give the hashes.
    /// A test's setup step that could not be done (a tool missing or failing).
    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    /// - Parameters:
    ///   - input: a playlist (local key files are allowed) or a media file, on disk or served over HTTP.
    ///   - map: ffmpeg's `-map` argument: `0` for every stream, `0:v:0` for the first video stream.
    /// - Throws: ``Failure`` when ffmpeg is missing (scripts/test.sh installs it) or fails on the input.
    public static func of(_ input: URL, map: String = "0") async throws -> [String] {
        // `-allowed_extensions` is the HLS demuxer's option (local key files); other demuxers refuse it.
        let hls = input.pathExtension.lowercased() == "m3u8" ? ["-allowed_extensions", "ALL"] : []
        let result = try await ProcessRunner.run(
            program: "ffmpeg",
            ["-nostdin", "-v", "error"] + hls + [
                "-i", input.isFileURL ? input.path : input.absoluteString, "-map", map, "-c", "copy", "-f", "framemd5", "-",
            ]
        )
        guard result.status == 0 else {
            throw Failure(description: "ffmpeg failed on \(input.path) (status \(result.status)); scripts/test.sh installs ffmpeg")
        }
        let data = result.standardOutput
        return String(decoding: data, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
    }
}
