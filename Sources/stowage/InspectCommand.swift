import ArgumentParser
import AssetDownload
import Foundation
import HLS
import KeyDelivery
import StowageLibrary

/// `stowage inspect PLAYLIST_PATH_OR_URL [--deep] [--json]`
struct InspectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Summarize an HLS playlist: variants, renditions, keys, segments, encryption and warnings.",
        discussion: """
            Playlists are read as players read them: a deviation from RFC 8216bis that ffmpeg, hls.js or AVPlayer
            accept (no EXT-X-TARGETDURATION, BANDWIDTH written as a decimal, an IV without 0x, ...) is listed under
            Warnings with its line; --strict refuses the first one instead, as a validator does.
            Examples:
              stowage inspect Fixtures/playlists/multivariant.m3u8 --deep
              stowage inspect http://127.0.0.1:8080/master.m3u8 --json
              stowage inspect Fixtures/playlists/lenient/no-target-duration.m3u8 --strict
            Exit status: 0 when the playlist parsed, 1 when it is invalid (under --strict: not valid RFC 8216bis) or
            cannot be fetched.
            The JSON form is documented in docs/inspect-json.md.
            """
    )

    @Argument(help: "A playlist file, or an http(s) URL.")
    var playlist: String

    @Flag(help: "For a multivariant playlist, also fetch and summarize every media playlist it names.")
    var deep = false

    @Flag(help: "Print the full parsed model as JSON instead of a summary.")
    var json = false

    @Flag(help: "Refuse any deviation from RFC 8216bis instead of reading it as players do with a warning.")
    var strict = false

    @OptionGroup var tls: TLSOptions

    @OptionGroup var proxy: ProxyOptions

    @OptionGroup var browser: BrowserOptions

    @OptionGroup var header: HeaderOptions

    func run() async throws {
        let headerPairs = header.resolve(json: json)
        let result: Result<PlaylistInspection, any Error>
        do {
            result = .success(
                try await OfflineLibrary.inspect(
                    playlist,
                    headers: headerPairs,
                    browser: try browser.headers(),
                    proxy: try proxy.settings(),
                    deep: deep,
                    trust: tls.trust,
                    strict: strict
                )
            )
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let inspection):
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                // A data: key URI is the key itself: the JSON names it without its data, as the summary does.
                print(InlineKeyRedaction.apply(String(decoding: try encoder.encode(inspection), as: UTF8.self)))
            } else {
                print(InspectionSummary(inspection).render(), terminator: "")
            }
        case .failure(let error):
            CommandOutput.fail(error, json: json)
        }
    }
}
