import Foundation
import StowageCore
import Testing

@testable import HLS

/// The playlist files in `Playlists/` and how each is loaded (its URL and the variables its parent would pass).
enum Fixtures {
    /// RFC 8216 section 8 examples.
    static let rfc8216 = [
        "rfc8216-8.1-simple-media", "rfc8216-8.2-live-https", "rfc8216-8.3-encrypted", "rfc8216-8.4-multivariant",
        "rfc8216-8.5-iframes", "rfc8216-8.6-alternative-audio", "rfc8216-8.7-video-renditions",
    ]
    /// Examples from draft-pantos-hls-rfc8216bis (low latency, delta update, content steering, variables).
    static let rfc8216bis = [
        "rfc8216bis-low-latency", "rfc8216bis-delta-update", "rfc8216bis-content-steering",
        "rfc8216bis-variables-multivariant", "rfc8216bis-variables-media",
    ]
    /// Playlists written for this suite to exercise every tag.
    static let ours = ["media-all-tags", "multivariant-all-tags"]
    static let all = rfc8216 + rfc8216bis + ours

    /// The URL the variable examples are loaded from: `token` is a QUERYPARAM.
    static let variablesMultivariantURL = URL(string: "https://example.com/content/master.m3u8?token=abc%2F123&x=1")!
    /// What the variable multivariant example defines, passed to its media playlist for IMPORT.
    static let importedVariables = [
        "cdn": "https://cdn.example.com/content", "codecs": "avc1.64001f,mp4a.40.2", "token": "abc/123",
    ]

    /// Where a fixture is loaded from: the URL of the example origin, so relative URIs resolve somewhere real.
    static func loadURL(_ name: String) -> URL {
        switch name {
        case "rfc8216bis-variables-multivariant": variablesMultivariantURL
        case "rfc8216bis-low-latency", "rfc8216bis-delta-update": URL(string: "https://example.com/2M/waitForMSN.php?_HLS_msn=273")!
        default: URL(string: "https://example.com/content/\(name).m3u8")!
        }
    }

    static func importedVariables(_ name: String) -> [String: String] {
        name == "rfc8216bis-variables-media" ? importedVariables : [:]
    }

    static func data(_ name: String) throws -> Data {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: "m3u8", subdirectory: "Playlists"))
        return try Data(contentsOf: url)
    }

    static func text(_ name: String) throws -> String {
        try #require(String(data: try data(name), encoding: .utf8))
    }

    /// Parses a fixture with its URL and imported variables.
    static func parse(_ name: String) throws -> ParsedPlaylist {
        try PlaylistParser.parse(try data(name), url: loadURL(name), importedVariables: importedVariables(name))
    }
}

extension Playlist {
    var media: MediaPlaylist? { if case .media(let playlist) = self { playlist } else { nil } }
    var multivariant: MultivariantPlaylist? { if case .multivariant(let playlist) = self { playlist } else { nil } }
}

/// Parses text that must be a media playlist.
func parseMedia(
    _ text: String,
    url: URL? = nil,
    importedVariables: [String: String] = [:],
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> MediaPlaylist {
    let parsed = try PlaylistParser.parse(text, url: url, importedVariables: importedVariables)
    return try #require(parsed.playlist.media, "expected a media playlist", sourceLocation: sourceLocation)
}

/// Parses text that must be a multivariant playlist.
func parseMultivariant(
    _ text: String,
    url: URL? = nil,
    importedVariables: [String: String] = [:],
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> MultivariantPlaylist {
    let parsed = try PlaylistParser.parse(text, url: url, importedVariables: importedVariables)
    return try #require(parsed.playlist.multivariant, "expected a multivariant playlist", sourceLocation: sourceLocation)
}

/// Expects the parse to fail with this code on this line; returns the error for further checks.
@discardableResult
func expectPlaylistError(
    _ text: String,
    code: String,
    line: Int,
    url: URL? = nil,
    importedVariables: [String: String] = [:],
    strict: Bool = true,
    sourceLocation: SourceLocation = #_sourceLocation
) -> PlaylistError? {
    do {
        let parsed = try PlaylistParser.parse(text, url: url, importedVariables: importedVariables, strict: strict)
        Issue.record("expected \(code) at line \(line), but it parsed: \(parsed.playlist)", sourceLocation: sourceLocation)
        return nil
    } catch {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.line == line, "\(error)", sourceLocation: sourceLocation)
        return error
    }
}

/// Writes the playlist, parses the text again and expects an equal model.
func expectRoundTrip(
    _ playlist: Playlist,
    url: URL? = nil,
    importedVariables: [String: String] = [:],
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let text = PlaylistWriter.write(playlist)
    let reparsed = try PlaylistParser.parse(text, url: url, importedVariables: importedVariables)
    #expect(reparsed.playlist == playlist, "written as:\n\(text)", sourceLocation: sourceLocation)
}

/// Lines joined with LF and a final newline, so a test can count lines as it reads them.
func m3u8(_ lines: String...) -> String { m3u8(lines) }

/// Lines joined with LF and a final newline.
func m3u8(_ lines: [String]) -> String {
    lines.joined(separator: "\n") + "\n"
}

/// Whether two lists of seconds agree to within rounding error.
func isClose(_ lhs: [Double], _ rhs: [Double], tolerance: Double = 1e-9) -> Bool {
    lhs.count == rhs.count && zip(lhs, rhs).allSatisfy { abs($0 - $1) <= tolerance }
}

/// A date from ISO 8601 text with optional fractional seconds, for expectations.
func date(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.date(from: text)
}
