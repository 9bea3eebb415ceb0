import ArgumentParser
import Foundation
import StowageLibrary

/// `stowage export ASSET --out FILE.mp4|.mkv`
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Remux a downloaded asset into one MP4 or Matroska file (ffmpeg, no re-encoding).",
        discussion: """
            Every downloaded video, audio and subtitle rendition goes into the file, decrypted through the playback
            gate, so the lease rules apply as for `stowage play` (an export is a first play). Packages whose keys are
            identity keys (AES-128 key URLs, data: URIs) or that are clear export freely; packages with keys leased
            from a key server (skd) export only when the asset's policy allows it (`exportAllowed`), and are refused
            with export_not_allowed otherwise. WebVTT subtitles become mov_text in MP4; Matroska keeps them as WebVTT.
            Needs ffmpeg on PATH.
            Example:
              stowage export demo-1 --out ~/Videos/demo.mkv
              stowage export lecture-3 --out lecture-3.mp4 --overwrite --json
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @Option(help: ArgumentHelp("The file to write: .mp4, .m4v or .mkv.", valueName: "file"))
    var out: String

    @Flag(help: "Replace the file if it exists.")
    var overwrite = false

    @Flag(help: "Print the result, or the error, as JSON.")
    var json = false

    func run() async throws {
        do {
            let result = try await Library.with { try await $0.export(assetId: assetId, to: out, overwrite: overwrite) }
            print(json ? Library.line(result) : "exported \(result.assetId) to \(result.path) (\(Library.megabytes(result.bytes)), \(result.format))")
        } catch {
            Library.fail(error, json: json)
        }
    }
}
