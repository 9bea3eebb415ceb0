import ArgumentParser
import Foundation
import KeyServer
import Packaging
import StowageCore

/// `stowage package CLEAR_PLAYLIST --asset-id ID --method sample-aes|aes-128 --out DIR --keyserver-data-dir DIR
/// [--keyserver-database URL]`
struct PackageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "package",
        abstract: "Encrypt a clear HLS asset with fresh keys, write skd:// playlists and register the keys with a key server.",
        discussion: """
            The playlist is a media playlist or a multivariant playlist (every variant and rendition is packaged).
            SAMPLE-AES: Apple sample encryption for MPEG-TS, cbcs for fMP4. AES-128: whole segments (and EXT-X-MAP).
            Keys are sealed into the key server's store (as `stowage keyserver add-asset` does) and never written
            anywhere else; the summary lists key IDs only.
            """
    )

    @Argument(help: "The clear playlist (media or multivariant) on disk.")
    var clearPlaylist: String

    @Option(help: "The asset ID, [A-Za-z0-9._-]{1,128}.")
    var assetId: String

    @Option(help: "sample-aes or aes-128.")
    var method: String

    @Option(help: "The output directory (created if needed).")
    var out: String

    @Option(help: "The key server's data directory (from `stowage keyserver init`).")
    var keyserverDataDir: String

    @Option(
        help: ArgumentHelp(
            "The key server's PostgreSQL database, for a fleet (postgres://USER@HOST[:PORT]/DATABASE).",
            discussion: "Defaults to STOWAGE_KEYSERVER_DATABASE; without either, keyserver.sqlite in --keyserver-data-dir."
        )
    )
    var keyserverDatabase: String?

    @Option(help: "Rotate to a new key every N segments (not with SAMPLE-AES fMP4).")
    var rotateEvery: Int?

    @Option(help: "The key server URL, advertised with EXT-X-SESSION-DATA com.stowage.key-server.")
    var keyServerUrl: String?

    func run() async throws {
        guard let method = ContentPackager.Method(rawValue: method.lowercased()) else {
            CommandOutput.fail(
                ArgumentsError(message: "--method must be sample-aes or aes-128, not \"\(method)\"", command: "stowage package"),
                json: false,
                status: 2
            )
        }
        let database = keyserverDatabase ?? ProcessInfo.processInfo.environment["STOWAGE_KEYSERVER_DATABASE"]
        let directory = KeyServerDataDirectory(path: keyserverDataDir, database: database?.isEmpty == false ? database : nil)
        guard FileManager.default.fileExists(atPath: directory.path(of: KeyServerDataDirectory.configurationFile)) else {
            CommandOutput.fail(
                code: .missingDataDir,
                message: "\(keyserverDataDir) is not a key server data directory; run `stowage keyserver init --data-dir DIR` first",
                json: false
            )
        }
        let packager = ContentPackager(
            assetID: assetId,
            method: method,
            outputDirectory: URL(fileURLWithPath: out),
            rotationPeriod: rotateEvery,
            keyServerURL: keyServerUrl,
            registrar: KeyRegistrar(directory.register)
        )
        do {
            let report = try await packager.package(playlistAt: URL(fileURLWithPath: clearPlaylist))
            print("packaged \(assetId) (\(method.rawValue)) into \(report.playlist.path)")
            for rendition in report.renditions {
                let keys = rendition.keyIDs.isEmpty ? "clear" : "keys \(rendition.keyIDs.joined(separator: ","))"
                print("  \(rendition.playlist): \(rendition.container), \(rendition.segments) segments, \(keys)")
            }
            print("registered \(report.keyIDs.count) key(s): \(report.keyIDs.joined(separator: " "))")
        } catch {
            CommandOutput.fail(error, json: false)
        }
    }
}
