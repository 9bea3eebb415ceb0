import ArgumentParser
import Foundation
import KeyDelivery
import OfflinePackage
import StowageCrypto

/// `stowage decrypt PLAYLIST [--key - | --key-file FILE] --out DIR`
struct DecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt a local HLS media playlist and its segments into a clear HLS copy.",
        discussion: """
            File names are kept; EXT-X-KEY tags are dropped; encrypted EXT-X-MAP init sections are decrypted too.
            Keys come from --key / --key-file (one key for every EXT-X-KEY), or else from the playlist's own key URIs
            when they name local files (as with key rotation).
            Example:
              stowage decrypt Fixtures/media/fmp4-aes128-openssl/index.m3u8 --out /tmp/clear
            """
    )

    @Argument(help: "A media playlist on disk.")
    var playlist: String

    /// The key for every EXT-X-KEY (16 or 32 bytes).
    @OptionGroup var key: KeyOptions

    @Option(help: "The output directory (created if needed).")
    var out: String

    @Flag(help: "Flush each written file to disk before renaming it into place (slower).")
    var sync = false

    @Flag(help: "Print the report (or the error) as JSON.")
    var json = false

    func run() throws {
        let secret = key.isGiven ? key.resolve(lengths: [16, 32], json: json) : nil
        let report: PlaylistDecryption.Report
        do {
            report = try PlaylistDecryption(key: secret, durable: sync).decrypt(
                playlistAt: URL(fileURLWithPath: playlist),
                to: URL(fileURLWithPath: out, isDirectory: true)
            )
        } catch {
            CommandOutput.fail(error, json: json)
        }
        do {
            if json {
                let object: [String: Any] = [
                    "playlist": report.playlist.path, "segments": report.segments,
                    "initializationSections": report.initializationSections, "bytesRead": report.bytesRead,
                    "bytesWritten": report.bytesWritten,
                ]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            } else {
                print("decrypted \(report.segments) segment(s) and \(report.initializationSections) init section(s) into \(report.playlist.path)")
            }
        }
    }
}
