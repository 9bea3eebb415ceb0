/// The `Content-Type` the origin sends for a file, chosen by its extension.
enum MediaType {
    /// The media type for `fileName`; `application/octet-stream` for anything not listed.
    static func forFile(named fileName: String) -> String {
        guard let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex else { return "application/octet-stream" }
        switch fileName[fileName.index(after: dot)...].lowercased() {
        // RFC 8216 section 4: playlists are application/vnd.apple.mpegurl.
        case "m3u8": return "application/vnd.apple.mpegurl"
        case "ts": return "video/mp2t"
        case "mp4", "m4s", "m4a", "m4v": return "video/mp4"
        case "aac": return "audio/aac"
        case "vtt": return "text/vtt"
        default: return "application/octet-stream"
        }
    }
}
