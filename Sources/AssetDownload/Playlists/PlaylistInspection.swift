public import Foundation
public import HLS

/// What `stowage inspect` reports: a parsed playlist, its warnings, its resolved segments and, for a deep
/// inspection of a multivariant playlist, every media playlist it names.
///
/// The JSON form (``JSONEncoder`` with sorted keys) is documented in docs/inspect-json.md; its field names are stable.
public struct PlaylistInspection: Sendable, Codable {
    public var url: URL
    public var playlist: Playlist
    public var warnings: [PlaylistWarning]
    /// For a media playlist: its segments with URIs, keys and IVs resolved.
    public var resolvedSegments: [ResolvedSegment]?
    /// For a deep inspection of a multivariant playlist: each media playlist it names, in playlist order.
    public var mediaPlaylists: [MediaPlaylistInspection]?
}

/// One media playlist named by a multivariant playlist, inspected.
public struct MediaPlaylistInspection: Sendable, Codable {
    /// `variant`, `iframe`, or the rendition type in lowercase (`audio`, `video`, `subtitles`).
    public var role: String
    /// The variant's bandwidth, or the rendition's group, name and language, for display.
    public var label: String
    /// The URI as written in the multivariant playlist.
    public var uri: String
    public var url: URL?
    public var playlist: MediaPlaylist?
    public var warnings: [PlaylistWarning]
    public var resolvedSegments: [ResolvedSegment]?
    /// Why it could not be loaded, when it could not.
    public var error: String?
}

extension PlaylistLoader {
    /// Loads, parses and resolves a playlist; with `deep`, also every media playlist a multivariant playlist names.
    ///
    /// A media playlist that fails to load in a deep inspection is reported with its error rather than failing the
    /// whole inspection, so one broken rendition does not hide the others.
    public func inspect(_ location: String, deep: Bool = false) async throws(PlaylistLoadError) -> PlaylistInspection {
        let loaded = try await load(location)
        var inspection = PlaylistInspection(
            url: loaded.url,
            playlist: loaded.parsed.playlist,
            warnings: loaded.parsed.warnings
        )
        switch loaded.parsed.playlist {
        case .media(let media):
            inspection.resolvedSegments = media.resolvedSegments(baseURL: loaded.url)
        case .multivariant(let multivariant):
            guard deep else { break }
            var seen: Set<String> = []
            var results: [MediaPlaylistInspection] = []
            var targets: [(role: String, label: String, uri: String)] = []
            for variant in multivariant.variants {
                targets.append(("variant", "\(variant.bandwidth) bit/s", variant.uri))
            }
            for rendition in multivariant.renditions {
                guard let uri = rendition.uri else { continue }
                let language = rendition.language.map { " (\($0))" } ?? ""
                targets.append((rendition.type.rawValue.lowercased(), "\(rendition.groupID): \(rendition.name)\(language)", uri))
            }
            for variant in multivariant.iFrameVariants {
                targets.append(("iframe", "\(variant.bandwidth) bit/s", variant.uri))
            }
            let variables = loaded.parsed.playlist.variables
            for target in targets where seen.insert(target.uri).inserted {
                let url = PlaylistURI.resolve(target.uri, against: loaded.url)
                var result = MediaPlaylistInspection(
                    role: target.role,
                    label: target.label,
                    uri: target.uri,
                    url: url,
                    warnings: []
                )
                do throws(PlaylistLoadError) {
                    guard let url else { throw .unreadable(url: loaded.url, reason: "cannot resolve \(target.uri)") }
                    let media = try await load(url, importedVariables: variables, referrer: loaded.url)
                    result.url = media.url
                    result.warnings = media.parsed.warnings
                    if case .media(let playlist) = media.parsed.playlist {
                        result.playlist = playlist
                        result.resolvedSegments = playlist.resolvedSegments(baseURL: media.url)
                    } else {
                        result.error = "expected a media playlist, found a multivariant playlist"
                    }
                } catch {
                    result.error = error.description
                }
                results.append(result)
            }
            inspection.mediaPlaylists = results
        }
        return inspection
    }
}
