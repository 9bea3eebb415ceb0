// libFuzzer entry point for the HLS playlist parser; built and run by scripts/fuzz-hls.sh (see docs/fuzzing.md).
//
// Inputs are parsed with the URL below (for QUERYPARAM) and a few imported variables (for IMPORT).
// For every input the parser accepts it checks:
//   1. write -> parse gives back an equal model (PlaylistWriter's documented contract);
//   2. the same with `omitDefinitions: true`, against the model with its definitions removed
//      (only when no definition is IMPORTed, since those cannot be resolved without the multivariant playlist);
//   3. `resolvedSegments(baseURL:)` and the other derived views of a media playlist do not trap, and every IV
//      the parser accepted decodes to 16 bytes;
//   4. JSON encode -> decode gives back an equal model.
// Rejected inputs must throw a PlaylistError and nothing else (no trap, no sanitizer report).
import Foundation
import HLS

private let baseURL = URL(string: "https://example.com/a/b/master.m3u8?x=1")
/// What a multivariant playlist would hand down for EXT-X-DEFINE IMPORT, so that path is reachable too.
private let importedVariables = ["cdn": "https://cdn.example.com/v1", "token": "abc123", "IV": "00112233"]

private let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
}()
private let decoder = JSONDecoder()

/// Traps with enough context to see what went wrong without re-running under a debugger.
private func violation(_ property: String, input: String, written: String? = nil, _ details: String) -> Never {
    var message = "HLSFuzz property violated: \(property)\n--- input ---\n\(input.debugDescription)\n"
    if let written { message += "--- written ---\n\(written.debugDescription)\n" }
    message += "--- details ---\n\(details)"
    fatalError(message)
}

/// Describes the first difference between two values by their dumps, so long models stay readable.
private func difference(_ expected: some Any, _ actual: some Any) -> String {
    var left = ""
    var right = ""
    dump(expected, to: &left)
    dump(actual, to: &right)
    let leftLines = left.split(separator: "\n", omittingEmptySubsequences: false)
    let rightLines = right.split(separator: "\n", omittingEmptySubsequences: false)
    for index in 0..<max(leftLines.count, rightLines.count) {
        let l = index < leftLines.count ? String(leftLines[index]) : "<end>"
        let r = index < rightLines.count ? String(rightLines[index]) : "<end>"
        if l != r { return "first difference at dump line \(index + 1):\n  expected: \(l)\n  actual:   \(r)" }
    }
    return "dumps are identical (the values differ in a way dump does not show)"
}

private func checkWriteRoundTrip(
    _ playlist: Playlist,
    options: PlaylistWriter.Options,
    expected: Playlist,
    property: String,
    input: String
) {
    let written = PlaylistWriter.write(playlist, options: options)
    let reparsed: ParsedPlaylist
    do {
        reparsed = try PlaylistParser.parse(Array(written.utf8), url: baseURL, importedVariables: importedVariables)
    } catch {
        violation(property, input: input, written: written, "the written playlist does not parse: \(error)")
    }
    if reparsed.playlist != expected {
        violation(property, input: input, written: written, difference(expected, reparsed.playlist))
    }
}

private func withoutDefinitions(_ playlist: Playlist) -> Playlist {
    switch playlist {
    case .multivariant(var multivariant):
        multivariant.definitions = []
        return .multivariant(multivariant)
    case .media(var media):
        media.definitions = []
        return .media(media)
    }
}

/// An IV the parser accepted must decode to the 16 bytes the decrypter uses.
private func checkKeys(_ keys: [EncryptionKey]) {
    for key in keys where key.iv != nil && key.ivBytes?.count != 16 {
        fatalError("HLSFuzz: the parser accepted IV \(key.iv!.debugDescription) but ivBytes is \(String(describing: key.ivBytes))")
    }
}

private func exerciseMedia(_ media: MediaPlaylist) {
    let segments = media.resolvedSegments(baseURL: baseURL)
    guard segments.count == media.segments.count else {
        fatalError("HLSFuzz: resolvedSegments returned \(segments.count) segments for \(media.segments.count)")
    }
    var checksum = 0
    for segment in segments {
        if let range = segment.byteRange { checksum &+= range.httpRangeHeader.utf8.count }
        if let range = segment.initializationSection?.byteRange { checksum &+= range.httpRangeHeader.utf8.count }
        checksum &+= segment.keys.count &+ (segment.method == nil ? 0 : 1)
    }
    for segment in media.segments {
        checkKeys(segment.keyTags)
        checksum &+= segment.programDateTime == nil ? 0 : 1
    }
    checksum &+= media.distinctKeys.count
    checkKeys(media.trailingTags.compactMap { if case .key(let key) = $0 { key } else { nil } })
    if media.totalDuration.isNaN || checksum == Int.min { fatalError("HLSFuzz: unreachable") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let parsed: ParsedPlaylist
    do throws(PlaylistError) {
        parsed = try PlaylistParser.parse(bytes, url: baseURL, importedVariables: importedVariables)
    } catch {
        _ = error.code  // a typed PlaylistError: the only acceptable failure
        return 0
    }
    let playlist = parsed.playlist
    let input = String(decoding: bytes, as: UTF8.self)

    // (b) Writer round trip, with and without EXT-X-DEFINE.
    checkWriteRoundTrip(playlist, options: .init(), expected: playlist, property: "parse(write(p)) == p", input: input)
    let definitions: [VariableDefinition] =
        switch playlist {
        case .multivariant(let multivariant): multivariant.definitions
        case .media(let media): media.definitions
        }
    if !definitions.contains(where: { $0.source == .import }) {
        checkWriteRoundTrip(
            playlist,
            options: .init(omitDefinitions: true),
            expected: withoutDefinitions(playlist),
            property: "parse(write(p, omitDefinitions: true)) == p without definitions",
            input: input
        )
    }

    // (c) Derived views.
    switch playlist {
    case .media(let media): exerciseMedia(media)
    case .multivariant(let multivariant): checkKeys(multivariant.sessionKeys)
    }

    // (d) JSON round trip.
    let json: Data
    do {
        json = try encoder.encode(playlist)
    } catch {
        violation("JSON encode", input: input, "JSONEncoder failed: \(error)")
    }
    let decoded: Playlist
    do {
        decoded = try decoder.decode(Playlist.self, from: json)
    } catch {
        violation("JSON decode(encode(p))", input: input, "JSONDecoder failed: \(error)\njson: \(String(decoding: json, as: UTF8.self))")
    }
    if decoded != playlist {
        violation("JSON decode(encode(p)) == p", input: input, difference(playlist, decoded) + "\njson: \(String(decoding: json, as: UTF8.self))")
    }
    return 0
}
