import Foundation
import HLS

/// A local playlist as the playback server hands it to the player: the same playlist with every EXT-X-KEY and
/// EXT-X-SESSION-KEY removed, since the server sends the segments clear. URIs are already relative (the package's
/// playlists only ever name files of the package), so the player fetches everything under the session path.
enum PlaylistForPlayback {
    /// Why a local playlist cannot be served.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The playlist text without key tags; with `sessionPrefix` (`/TOKEN/`), every URI of a multivariant playlist is made
    /// an absolute path under it, so a multivariant playlist served from the one-time entry URL sends the player to the
    /// session token only it has seen.
    static func clearText(of bytes: [UInt8], url: URL, sessionPrefix: String? = nil) throws -> String {
        let parsed: ParsedPlaylist
        do {
            parsed = try PlaylistParser.parse(bytes, url: url)
        } catch {
            throw Failure(description: "\(url.lastPathComponent) is not a valid playlist: \(error)")
        }
        switch parsed.playlist {
        case .multivariant(var multivariant):
            multivariant.sessionKeys = []
            if let prefix = sessionPrefix {
                // Package playlists name package files by safe relative paths only (PackageDirectory), so prefixing
                // keeps them inside the session.
                for index in multivariant.variants.indices { multivariant.variants[index].uri = prefix + multivariant.variants[index].uri }
                for index in multivariant.iFrameVariants.indices {
                    multivariant.iFrameVariants[index].uri = prefix + multivariant.iFrameVariants[index].uri
                }
                for index in multivariant.renditions.indices {
                    multivariant.renditions[index].uri = multivariant.renditions[index].uri.map { prefix + $0 }
                }
            }
            return PlaylistWriter.write(.multivariant(multivariant))
        case .media(var media):
            for index in media.segments.indices {
                media.segments[index].tags.removeAll { if case .key = $0 { true } else { false } }
            }
            media.trailingTags.removeAll { if case .key = $0 { true } else { false } }
            return PlaylistWriter.write(.media(media))
        }
    }
}
