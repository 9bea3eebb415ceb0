import Foundation
import HLS
import Synchronization

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

/// The clear text of each playlist a session served, kept with the bytes it was made from: a player asks for the same
/// playlists again and again (a live or growing one every target duration), and parsing one took most of a request's
/// time. A playlist whose bytes changed (a download or recording still running) is made clear again. At most one entry
/// per playlist of the package, so memory is bounded by the package's playlists.
final class ClearPlaylistCache: Sendable {
    private let entries = Mutex<[String: (source: [UInt8], sessionPrefix: String?, text: String)]>([:])

    /// ``PlaylistForPlayback/clearText(of:url:sessionPrefix:)``, from the cache when `bytes` are the ones it was made from.
    func clearText(of bytes: [UInt8], path: String, url: URL, sessionPrefix: String?) throws -> String {
        if let entry = entries.withLock({ $0[path] }), entry.source == bytes, entry.sessionPrefix == sessionPrefix {
            return entry.text
        }
        let text = try PlaylistForPlayback.clearText(of: bytes, url: url, sessionPrefix: sessionPrefix)
        entries.withLock { $0[path] = (bytes, sessionPrefix, text) }
        return text
    }
}
