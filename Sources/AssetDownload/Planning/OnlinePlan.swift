import Foundation
import HLS
import OfflinePackage

extension DownloadPlanner {
    /// The most online media playlists loaded for one play session.
    static let maximumOnlinePlaylists = 32

    /// Plans the source's variants and renditions that `manifest` does not hold, for streaming beside the package.
    ///
    /// Loads the source's multivariant playlist again (its URL is in the manifest) and every media playlist the
    /// package lacks; one that fails to load or cannot be planned (live, unsupported URIs) is left out, and so is
    /// the whole plan when the source is a lone media playlist (nothing else is on offer).
    ///
    /// - Throws: ``DownloadError`` when the source's multivariant playlist cannot be loaded (offline).
    func planOnline(existing manifest: PackageManifest) async throws -> OnlinePlan? {
        guard let sourceURL = URL(string: manifest.sourceURL) else { return nil }
        let top = try await loader.load(sourceURL)
        guard case .multivariant(let multivariant) = top.parsed.playlist else { return nil }
        let variables = top.parsed.playlist.variables
        func held(_ url: URL) -> PackageRendition? { manifest.renditions.first { $0.sourceURL == url.absoluteString } }
        let storedVideo = manifest.renditions.first { $0.kind == .video }
        let storedVariant =
            multivariant.variants.first { variant in
                PlaylistURI.resolve(variant.uri, against: top.url).map { held($0)?.kind == .video } ?? false
            } ?? multivariant.variants.first { $0.bandwidth == storedVideo?.bandwidth }

        let wanted = Self.onlineOffers(multivariant, url: top.url, storedVariant: storedVariant, held: held)

        // Load them side by side; a playlist that does not load is not offered.
        let loaded = await withTaskGroup(of: (Int, LoadedPlaylist?).self) { group in
            for (index, item) in wanted.enumerated() {
                group.addTask { (index, try? await loader.load(item.url, importedVariables: variables, referrer: top.url)) }
            }
            var results = [LoadedPlaylist?](repeating: nil, count: wanted.count)
            for await (index, playlist) in group { results[index] = playlist }
            return results
        }

        var builder = PlanBuilder(manifest: manifest)
        var onlinePaths: [URL: String] = [:]
        for (index, item) in wanted.enumerated() {
            guard let playlist = loaded[index], case .media(let media) = playlist.parsed.playlist else { continue }
            var candidate = builder
            do {
                switch item.offer {
                case .variant(let variant):
                    try candidate.addRendition(
                        id: candidate.uniqueID(PackageSourceRendition(kind: .video, name: "video", bandwidth: variant.bandwidth).onlineId),
                        kind: .video,
                        name: "video",
                        attributes: nil,
                        bandwidth: variant.bandwidth,
                        codecs: variant.codecs,
                        resolution: variant.resolution.map { "\($0.width)x\($0.height)" },
                        media: media,
                        url: playlist.url
                    )
                case .rendition(let rendition, let kind):
                    try candidate.addRendition(
                        id: candidate.uniqueID(PackageSourceRendition(kind: kind, name: rendition.name, language: rendition.language).onlineId),
                        kind: kind,
                        name: rendition.name,
                        attributes: rendition,
                        bandwidth: kind == .audio ? 128_000 : 2_000,
                        media: media,
                        url: playlist.url
                    )
                }
            } catch {
                continue  // live, too long, or a URI no download could fetch: not offered
            }
            builder = candidate
            onlinePaths[item.url] = builder.manifest.renditions.last?.playlist
        }
        let online = Array(builder.manifest.renditions.dropFirst(manifest.renditions.count))
        guard !online.isEmpty else { return nil }

        var served = Self.servedMultivariant(multivariant, url: top.url, manifest: manifest, storedVariant: storedVariant, onlinePaths: onlinePaths)
        served.sessionData.append(SessionData(dataID: OnlinePlan.sessionDataID, value: online.map(\.id).joined(separator: ",")))
        let newKeys = builder.manifest.keys.filter { key in !manifest.keys.contains { $0.keyId == key.keyId } }
        var playlists: [String: String] = [:]
        for rendition in online { playlists[rendition.playlist] = builder.playlists[rendition.playlist] }
        return OnlinePlan(
            renditions: online,
            keys: newKeys,
            playlists: playlists,
            multivariantPlaylist: PlaylistWriter.write(.multivariant(served), options: .init(omitDefinitions: true)),
            inlineKeys: builder.inlineKeys.filter { reference, _ in newKeys.contains { $0.uri == reference } }
        )
    }

    /// The source's media playlists `held` does not name, at most ``maximumOnlinePlaylists``: every variant but the
    /// stored one, and the audio and subtitle renditions of the variants' groups.
    private static func onlineOffers(
        _ multivariant: MultivariantPlaylist,
        url: URL,
        storedVariant: VariantStream?,
        held: (URL) -> PackageRendition?
    ) -> [(url: URL, offer: OnlineOffer)] {
        var wanted: [(url: URL, offer: OnlineOffer)] = []
        func want(_ url: URL, _ offer: OnlineOffer) {
            guard held(url) == nil, !wanted.contains(where: { $0.url == url }), wanted.count < Self.maximumOnlinePlaylists else { return }
            wanted.append((url, offer))
        }
        for variant in multivariant.variants where variant.uri != storedVariant?.uri {
            if let url = PlaylistURI.resolve(variant.uri, against: url) { want(url, .variant(variant)) }
        }
        let groups = Set(multivariant.variants.flatMap { [$0.audio, $0.subtitles].compactMap { $0 } })
        for rendition in multivariant.renditions where groups.contains(rendition.groupID) {
            let kind: PackageRendition.Kind
            switch rendition.type {
            case .audio: kind = .audio
            case .subtitles: kind = .subtitles
            default: continue
            }
            if let uri = rendition.uri, let url = PlaylistURI.resolve(uri, against: url) { want(url, .rendition(rendition, kind)) }
        }
        return wanted
    }

    /// The multivariant playlist a play session serves: stored entries at the package's playlists, online ones at
    /// `onlinePaths`, the stored variant first and the stored renditions the defaults of their groups.
    private static func servedMultivariant(
        _ multivariant: MultivariantPlaylist,
        url: URL,
        manifest: PackageManifest,
        storedVariant: VariantStream?,
        onlinePaths: [URL: String]
    ) -> MultivariantPlaylist {
        // The multivariant playlist: stored entries at the package's playlists, online ones at theirs.
        func held(_ url: URL) -> PackageRendition? { manifest.renditions.first { $0.sourceURL == url.absoluteString } }
        let storedVideo = manifest.renditions.first { $0.kind == .video }
        func localURI(of uri: String) -> String? {
            guard let url = PlaylistURI.resolve(uri, against: url) else { return nil }
            return held(url)?.playlist ?? onlinePaths[url]
        }
        var served = multivariant
        served.definitions = []
        served.contentSteering = nil
        served.iFrameVariants = []
        served.sessionKeys = []
        served.sessionData.removeAll { $0.dataID == Self.keyServerDataID || $0.dataID == OnlinePlan.sessionDataID }
        served.renditions = multivariant.renditions.compactMap { rendition in
            guard let uri = rendition.uri else { return rendition }
            guard let local = localURI(of: uri) else { return nil }
            var copy = rendition
            copy.uri = local
            return copy
        }
        served.variants = multivariant.variants.compactMap { variant in
            var copy = variant
            copy.pathwayID = nil
            if variant.uri == storedVariant?.uri, let storedVideo {
                copy.uri = storedVideo.playlist
            } else if let local = localURI(of: variant.uri) {
                copy.uri = local
            } else {
                return nil
            }
            // A group with nothing left in it is not referenced (a variant naming an empty group is invalid).
            if let group = copy.audio, !served.renditions.contains(where: { $0.type == .audio && $0.groupID == group }) { copy.audio = nil }
            if let group = copy.subtitles, !served.renditions.contains(where: { $0.type == .subtitles && $0.groupID == group }) {
                copy.subtitles = nil
            }
            return copy
        }
        // The stored variant first (players start with the first listed), and in each group the stored rendition is the
        // default: what plays offline plays unless the viewer picks otherwise.
        if let first = served.variants.firstIndex(where: { $0.uri == storedVideo?.playlist }) {
            served.variants.insert(served.variants.remove(at: first), at: 0)
        }
        let heldPaths = Set(manifest.renditions.map(\.playlist))
        func isHeld(_ rendition: Rendition) -> Bool { rendition.uri.map(heldPaths.contains) ?? false }
        for index in served.renditions.indices where served.renditions[index].uri != nil {
            let rendition = served.renditions[index]
            let firstHeld = served.renditions.first { $0.groupID == rendition.groupID && $0.type == rendition.type && isHeld($0) }
            guard let firstHeld else { continue }  // a group held nowhere keeps the source's defaults
            let isDefault = firstHeld.uri == rendition.uri
            served.renditions[index].isDefault = isDefault
            if isDefault { served.renditions[index].autoselect = true }
            if !isHeld(rendition) { served.renditions[index].autoselect = false }
        }
        return served
    }
}

/// A media playlist the source offers beside the package, and the tag that names it.
private enum OnlineOffer {
    case variant(VariantStream)
    case rendition(Rendition, PackageRendition.Kind)
}
