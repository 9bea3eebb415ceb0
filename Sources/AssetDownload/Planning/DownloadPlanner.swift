import Foundation
import HLS
import KeyDelivery
import OfflinePackage
import StowageCore
import StowageCrypto

/// What a download will fetch: the package manifest with every file listed (sizes unknown), the local playlists to
/// write, and the key entries to obtain before any segment.
struct DownloadPlan: Sendable {
    var manifest: PackageManifest
    /// Local playlist text by path relative to the package.
    var playlists: [String: String]
    /// Keys the playlists carry inline (`data:` URIs), by the reference the manifest names them with: to be stored
    /// sealed before the manifest is written.
    var inlineKeys: [String: SecretBytes]
    /// The key server advertised by EXT-X-SESSION-DATA `com.stowage.key-server`, if any.
    var advertisedKeyServer: URL?
    /// For a live recording, the recorded playlist of each live rendition, by rendition ID.
    var recordedPlaylists: [String: RecordedPlaylist] = [:]
}

/// Turns a playlist URL and media selection options into a ``DownloadPlan``: loads the multivariant playlist, picks a
/// variant and renditions, loads their media playlists, and names every local file.
struct DownloadPlanner: Sendable {
    static let maximumSegments = 200_000
    static let keyServerDataID = "com.stowage.key-server"

    let loader: PlaylistFetcher

    func plan(
        url: URL,
        assetId: String,
        title: String?,
        options: MediaSelectionOptions,
        now: Int64,
        existing: PackageManifest? = nil,
        recording: RecordingLimits = RecordingLimits()
    ) async throws -> DownloadPlan {
        let top = try await loader.load(url)
        var manifest = existing ?? PackageManifest(assetId: assetId, title: title, sourceURL: top.url.absoluteString, createdAt: now)
        var builder = PlanBuilder(manifest: manifest)
        if existing == nil {
            builder.recordingTemplate = PackageRecording(
                playlistType: "live",
                startedAt: now,
                maximumDuration: recording.maximumDuration,
                until: recording.until
            )
        }
        builder.noteWarnings(of: top)
        var localMultivariant: MultivariantPlaylist
        var advertised: URL?

        switch top.parsed.playlist {
        case .media(let media):
            if existing == nil {
                try builder.addRendition(
                    id: "video",
                    kind: .video,
                    name: "video",
                    attributes: nil,
                    bandwidth: nil,
                    media: media,
                    url: top.url
                )
            }
            let bandwidth = builder.estimatedBandwidth(of: "video")
            localMultivariant = MultivariantPlaylist(variants: [VariantStream(uri: "video/index.m3u8", bandwidth: bandwidth)])
        case .multivariant(let multivariant):
            advertised = multivariant.sessionData.first { $0.dataID == Self.keyServerDataID }?.value.flatMap(URL.init(string:))
            localMultivariant = try await planMultivariant(multivariant, top: top, options: options, isNew: existing == nil, into: &builder)
        }
        manifest = builder.manifest
        manifest.updatedAt = now
        var playlists = builder.playlists
        playlists[manifest.multivariantPlaylist] = PlaylistWriter.write(.multivariant(localMultivariant), options: .init(omitDefinitions: true))
        return DownloadPlan(
            manifest: manifest,
            playlists: playlists,
            inlineKeys: builder.inlineKeys,
            advertisedKeyServer: advertised,
            recordedPlaylists: builder.recordedPlaylists
        )
    }

    /// Plans the chosen variant and renditions of a multivariant playlist into `builder` (the variant only when the
    /// package is new: more media keeps the stored one), notes what else the source offers, and returns the local
    /// multivariant playlist.
    private func planMultivariant(
        _ multivariant: MultivariantPlaylist,
        top: LoadedPlaylist,
        options: MediaSelectionOptions,
        isNew: Bool,
        into builder: inout PlanBuilder
    ) async throws -> MultivariantPlaylist {
        let variant = try Self.chooseVariant(multivariant.variants, options.variant, url: top.url)
        let variables = top.parsed.playlist.variables
        var chosenRenditions: [(Rendition, PackageRendition.Kind, String)] = []
        var audioLanguage: String?
        if let group = variant.audio {
            let candidates = multivariant.renditions(ofType: .audio, inGroup: group).filter { $0.uri != nil }
            let audio = try Self.choose(candidates, options.audio, kind: .audio, audioLanguage: nil)
            audioLanguage = audio.first?.rendition.language
            chosenRenditions += audio.map { ($0.rendition, .audio, $0.reason) }
        }
        if let group = variant.subtitles {
            let candidates = multivariant.renditions(ofType: .subtitles, inGroup: group).filter { $0.uri != nil }
            chosenRenditions += try Self.choose(candidates, options.subtitles, kind: .subtitles, audioLanguage: audioLanguage).map {
                ($0.rendition, .subtitles, $0.reason)
            }
        }
        if isNew {
            guard let variantURL = PlaylistURI.resolve(variant.uri, against: top.url) else { throw DownloadError.unsupportedURI(variant.uri) }
            let loaded = try await loader.load(variantURL, importedVariables: variables, referrer: top.url)
            builder.noteWarnings(of: loaded)
            guard case .media(let media) = loaded.parsed.playlist else {
                throw DownloadError.playlist(code: .notAMediaPlaylist, message: "\(variantURL) is not a media playlist")
            }
            try builder.addRendition(
                id: "video",
                kind: .video,
                name: "video",
                attributes: nil,
                bandwidth: variant.bandwidth,
                codecs: variant.codecs,
                resolution: variant.resolution.map { "\($0.width)x\($0.height)" },
                media: media,
                url: loaded.url
            )
        }
        for (rendition, kind, reason) in chosenRenditions {
            guard let uri = rendition.uri, let renditionURL = PlaylistURI.resolve(uri, against: top.url) else { continue }
            if builder.manifest.renditions.contains(where: { $0.sourceURL == renditionURL.absoluteString }) { continue }
            let loaded = try await loader.load(renditionURL, importedVariables: variables, referrer: top.url)
            builder.noteWarnings(of: loaded)
            guard case .media(let media) = loaded.parsed.playlist else {
                throw DownloadError.playlist(code: .notAMediaPlaylist, message: "\(renditionURL) is not a media playlist")
            }
            let id = builder.uniqueID(kind.rawValue + "-" + Self.slug(rendition.language ?? rendition.name))
            try builder.addRendition(
                id: id,
                kind: kind,
                name: rendition.name,
                attributes: rendition,
                bandwidth: kind == .audio ? 128_000 : 2_000,
                media: media,
                url: loaded.url,
                selectedBecause: reason
            )
        }
        builder.manifest.availableRenditions = Self.available(in: multivariant, beside: variant, url: top.url, held: builder.manifest)
        return Self.localMultivariant(multivariant, variant: variant, url: top.url, builder: &builder)
    }

    /// What the source offers beyond the package: other variants, renditions of the variant's groups not held.
    static func available(
        in multivariant: MultivariantPlaylist,
        beside variant: VariantStream,
        url: URL,
        held manifest: PackageManifest
    ) -> [PackageSourceRendition] {
        var available: [PackageSourceRendition] = []
        for other in multivariant.variants where other.uri != variant.uri {
            let resolution = other.resolution.map { "\($0.width)x\($0.height)" }
            available.append(
                PackageSourceRendition(kind: .video, name: "video", bandwidth: other.bandwidth, resolution: resolution, codecs: other.codecs)
            )
        }
        for (type, kind, group) in [(MediaType.audio, PackageRendition.Kind.audio, variant.audio), (.subtitles, .subtitles, variant.subtitles)] {
            guard let group else { continue }
            for rendition in multivariant.renditions(ofType: type, inGroup: group) {
                guard let uri = rendition.uri, let absolute = PlaylistURI.resolve(uri, against: url)?.absoluteString,
                    !manifest.renditions.contains(where: { $0.sourceURL == absolute })
                else { continue }
                available.append(PackageSourceRendition(kind: kind, name: rendition.name, language: rendition.language, groupId: group))
            }
        }
        return available
    }

    /// The local multivariant playlist: the one variant, and the renditions this package holds (their session keys
    /// noted in `builder`).
    static func localMultivariant(
        _ multivariant: MultivariantPlaylist,
        variant: VariantStream,
        url: URL,
        builder: inout PlanBuilder
    ) -> MultivariantPlaylist {
        var localMultivariant = multivariant
        localMultivariant.definitions = []
        localMultivariant.contentSteering = nil
        localMultivariant.iFrameVariants = []
        var local = variant
        local.uri = "video/index.m3u8"
        local.pathwayID = nil
        localMultivariant.variants = [local]
        var renditions: [Rendition] = []
        for rendition in multivariant.renditions {
            guard let uri = rendition.uri else {
                // Renditions without URI (muxed in the variant, closed captions) stay as they are.
                if rendition.type == .closedCaptions || rendition.groupID == variant.audio { renditions.append(rendition) }
                continue
            }
            guard let absolute = PlaylistURI.resolve(uri, against: url)?.absoluteString,
                let held = builder.manifest.renditions.first(where: { $0.sourceURL == absolute })
            else { continue }
            var copy = rendition
            copy.uri = held.playlist
            renditions.append(copy)
        }
        localMultivariant.renditions = renditions
        // A group the package holds nothing of is not referenced (a variant naming an empty group is invalid).
        if let group = local.subtitles, !renditions.contains(where: { $0.type == .subtitles && $0.groupID == group }) {
            localMultivariant.variants[0].subtitles = nil
        }
        if let group = local.audio, !renditions.contains(where: { $0.type == .audio && $0.groupID == group }) {
            localMultivariant.variants[0].audio = nil
        }
        localMultivariant.sessionKeys = multivariant.sessionKeys.map { key in
            var key = key
            if let uri = key.uri, let absolute = PlaylistURI.resolve(uri, against: url) { key.uri = absolute.absoluteString }
            return key
        }
        localMultivariant.sessionKeys = localMultivariant.sessionKeys.compactMap { builder.localKey($0) }
        return localMultivariant
    }

    // MARK: - Selection

    static func chooseVariant(_ variants: [VariantStream], _ choice: MediaSelectionOptions.Variant, url: URL) throws -> VariantStream {
        let sorted = variants.sorted { $0.bandwidth < $1.bandwidth }
        guard let highest = sorted.last, let lowest = sorted.first else { throw DownloadError.noVariant(url: url.absoluteString) }
        switch choice {
        case .highest:
            return highest
        case .bitrate(let minimum, let maximum):
            let allowed = sorted.filter { maximum == nil || $0.bandwidth <= maximum! }
            if let minimum {
                return allowed.first { $0.bandwidth >= minimum } ?? allowed.last ?? lowest
            }
            return allowed.last ?? lowest
        }
    }

    /// The renditions of one group to take, each with why.
    ///
    /// - Parameters:
    ///   - kind: `.audio` or `.subtitles`; audio always takes one rendition when the group has any (the first when
    ///     none is DEFAULT=YES), subtitles may take none.
    ///   - audioLanguage: for subtitles, the language of the audio chosen (automatic selection takes subtitles in the
    ///     user's language only when the audio is not in it, and forced subtitles in the audio's).
    static func choose(
        _ candidates: [Rendition],
        _ choice: MediaSelectionOptions.Renditions,
        kind: PackageRendition.Kind,
        audioLanguage: String?
    ) throws -> [(rendition: Rendition, reason: String)] {
        func defaults() -> [(rendition: Rendition, reason: String)] {
            let defaults = candidates.filter { $0.isDefault == true }
            if defaults.isEmpty, kind == .audio, let first = candidates.first { return [(first, "the first of its group (none is DEFAULT=YES)")] }
            return defaults.map { ($0, "the playlist's default (DEFAULT=YES)") }
        }
        switch choice {
        case .none: return []
        case .all: return candidates.map { ($0, "all \(kind.rawValue) asked for") }
        case .defaults: return defaults()
        case .languages(let tags):
            var chosen: [Rendition] = []
            // One rule for asked-for and automatic languages: `en` takes `en-US`, and `en-US` takes `en`.
            for tag in tags {
                for rendition in candidates where MediaSelectionOptions.language(rendition.language, matches: tag) {
                    if !chosen.contains(rendition) { chosen.append(rendition) }
                }
            }
            if chosen.isEmpty, !tags.isEmpty {
                throw DownloadError.noMatchingRendition(kind: kind.rawValue, requested: tags, available: candidates.compactMap(\.language))
            }
            return chosen.map { ($0, "asked for (\(tags.joined(separator: ",")))") }
        case .automatic(let languages):
            let your = languages.isEmpty ? "" : " (\(languages.joined(separator: ", ")))"
            /// The rendition in the first of the user's languages `pool` offers (an exact tag before a looser match).
            func preferred(_ pool: [Rendition]) -> (Rendition, String)? {
                for wanted in languages {
                    let matching = pool.filter { MediaSelectionOptions.language($0.language, matches: wanted) }
                    if let best = matching.first(where: { $0.language?.lowercased() == wanted.lowercased() }) ?? matching.first {
                        return (best, wanted)
                    }
                }
                return nil
            }
            if kind == .audio {
                if let (rendition, wanted) = preferred(candidates) {
                    return [(rendition, "your language (\(wanted), from the locale\(languages.count > 1 ? your : ""))")]
                }
                let fallback = defaults()
                let note = languages.isEmpty ? "no language set in LANGUAGE, LC_ALL, LC_MESSAGES or LANG" : "none in your languages\(your)"
                return fallback.map { ($0.rendition, "\($0.reason); \(note)") }
            }
            var chosen: [(rendition: Rendition, reason: String)] = []
            let audioInYourLanguage =
                audioLanguage.map { audio in languages.contains { MediaSelectionOptions.language(audio, matches: $0) } } ?? false
            if languages.isEmpty {
                chosen = defaults()
            } else if !audioInYourLanguage {
                if let (rendition, wanted) = preferred(candidates.filter { $0.forced != true }) {
                    chosen.append((rendition, "your language (\(wanted)); the audio is in \(audioLanguage ?? "an unnamed language")"))
                }
            }
            if let audioLanguage {
                for rendition in candidates
                where rendition.forced == true && MediaSelectionOptions.language(rendition.language, matches: audioLanguage) {
                    if !chosen.contains(where: { $0.rendition == rendition }) {
                        chosen.append((rendition, "forced subtitles in the audio's language (\(audioLanguage))"))
                    }
                }
            }
            return chosen
        }
    }

    /// A folder-safe form of a language tag or name.
    static func slug(_ text: String) -> String { PackageSourceRendition.slug(text) }
}

/// Builds renditions, local file names and local media playlists.
struct PlanBuilder {
    var manifest: PackageManifest
    var playlists: [String: String] = [:]
    /// Keys the playlists carry inline (`data:` URIs), by the reference the manifest names them with.
    var inlineKeys: [String: SecretBytes] = [:]
    /// The recorded playlist of each rendition of a live recording, by rendition ID.
    var recordedPlaylists: [String: RecordedPlaylist] = [:]
    /// What a new package records when a playlist turns out to be live; nil refuses live playlists (`live_playlist`).
    var recordingTemplate: PackageRecording?

    init(manifest: PackageManifest) {
        self.manifest = manifest
    }

    /// Records a loaded playlist's warnings in the manifest, once per playlist (a replan of the same source adds none).
    mutating func noteWarnings(of loaded: LoadedPlaylist) {
        let playlist = loaded.url.absoluteString
        var warnings = manifest.playlistWarnings ?? []
        guard !loaded.parsed.warnings.isEmpty, !warnings.contains(where: { $0.playlist == playlist }) else { return }
        warnings += loaded.parsed.warnings.map { PackagePlaylistWarning(playlist: playlist, line: $0.line, message: $0.message) }
        manifest.playlistWarnings = warnings
    }

    func uniqueID(_ base: String) -> String {
        var candidate = base
        var n = 2
        while manifest.renditions.contains(where: { $0.id == candidate }) {
            candidate = "\(base)-\(n)"
            n += 1
        }
        return candidate
    }

    func estimatedBandwidth(of id: String) -> Int {
        guard let rendition = manifest.rendition(id: id), rendition.duration > 0 else { return 1_000_000 }
        return Int(Double(rendition.expectedBytes) * 8 / rendition.duration)
    }

    /// The local form of a key line: its URI becomes `stowage-key://KEY_ID`, its key recorded in the manifest.
    /// Nil for entries whose key format Stowage does not use (dropped from local playlists).
    mutating func localKey(_ key: EncryptionKey) -> EncryptionKey? {
        guard key.method != .none else { return key }
        // Keys of segments were checked when the rendition was added; a session key that is not usable is left out.
        guard let uri = key.uri, let packageKey = try? packageKey(for: key, uri: uri) else { return nil }
        if manifest.key(id: packageKey.keyId) == nil { manifest.keys.append(packageKey) }
        var local = key
        local.uri = packageKey.localURI
        return local
    }

    /// The package's entry for a key line: skd keys by their key ID, identity keys by a digest of their URI. A key
    /// written into the playlist as a `data:` URI is decoded here and kept in ``inlineKeys`` (memory only, stored
    /// sealed by the download); the manifest names it by its ``InlineKeyURI/reference(for:)``. Nil for key formats
    /// Stowage does not use.
    ///
    /// - Throws: ``DownloadError`` `invalid_inline_key` for a `data:` URI that is not a key of the method's length.
    mutating func packageKey(for key: EncryptionKey, uri: String) throws(DownloadError) -> PackageKey? {
        let length = key.method.keyLength
        switch key.effectiveKeyFormat {
        case PlaylistKeySelection.skdKeyFormat:
            guard let (_, keyId) = try? PlaylistKeySelection.parseSKD(uri) else { return nil }
            return PackageKey(keyId: keyId, kind: .skd, uri: uri, keyFormat: key.effectiveKeyFormat, keyLength: length == 16 ? nil : length)
        case EncryptionKey.identityKeyFormat:
            var name = uri
            if InlineKeyURI.isInline(uri) {
                let bytes: SecretBytes
                do {
                    bytes = try InlineKeyURI.decode(uri, allowedLengths: [length])
                } catch {
                    throw DownloadError.keys(code: error.code, message: error.message, subject: error.subject)
                }
                name = InlineKeyURI.reference(for: bytes, assetId: manifest.assetId)
                inlineKeys[name] = bytes
            }
            return PackageKey(
                keyId: PackageKeyring.identityKeyID(uri: name),
                kind: .identity,
                uri: name,
                keyFormat: key.effectiveKeyFormat,
                keyLength: length == 16 ? nil : length
            )
        default:
            return nil
        }
    }

    /// The key of a resolved segment Stowage will use: skd first, else identity.
    static func chosenKey(_ keys: [ResolvedKey]) -> ResolvedKey? {
        let live = keys.filter { $0.method != .none }
        return live.first { $0.keyFormat == PlaylistKeySelection.skdKeyFormat }
            ?? live.first { $0.keyFormat == EncryptionKey.identityKeyFormat }
    }

    static func fileExtension(of url: URL?, fallback: String) -> String {
        let ext = (url?.pathExtension ?? "").lowercased()
        guard (1...5).contains(ext.count), ext.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else { return fallback }
        return ext
    }

    mutating func addRendition(
        id: String,
        kind: PackageRendition.Kind,
        name: String,
        attributes: Rendition?,
        bandwidth: Int?,
        codecs: String? = nil,
        resolution: String? = nil,
        media: MediaPlaylist,
        url: URL,
        selectedBecause: String? = nil
    ) throws {
        var rendition = PackageRendition(
            id: id,
            kind: kind,
            name: name,
            language: attributes?.language,
            groupId: attributes?.groupID,
            isDefault: attributes?.isDefault ?? (kind == .video),
            bandwidth: bandwidth,
            codecs: codecs,
            resolution: resolution,
            sourceURL: url.absoluteString,
            playlist: "\(id)/index.m3u8",
            duration: media.totalDuration
        )
        rendition.selectedBecause = selectedBecause
        if media.isComplete {
            try fill(&rendition, media: media, url: url, ended: true)
        } else {
            // A live or EVENT playlist: recorded from what it holds now (docs/live-recording.md).
            if manifest.recording == nil, var template = recordingTemplate {
                template.playlistType = media.playlistType == .event ? "event" : "live"
                manifest.recording = template
            }
            guard let recording = manifest.recording, !recording.hasEnded else { throw DownloadError.livePlaylist(url: url.absoluteString) }
            var recorded = RecordedPlaylist(targetDuration: media.targetDuration, version: media.version)
            let merge = try recorded.merge(try referencingInlineKeys(media), url: url, renditionId: id, limit: recording.maximumDuration)
            if let gap = merge.gap { manifest.recording?.gaps.append(gap) }
            recordedPlaylists[id] = recorded
            try fill(&rendition, media: recorded.playlist, url: url, ended: false)
        }
        manifest.renditions.append(rendition)
    }

    /// `media` with each key written inline (`data:` URI) replaced by its ``InlineKeyURI/reference(for:assetId:)``,
    /// the key kept in ``inlineKeys`` to be sealed: a recorded playlist is written to disk, and no key may be there in
    /// the clear.
    mutating func referencingInlineKeys(_ media: MediaPlaylist) throws(DownloadError) -> MediaPlaylist {
        var media = media
        for s in media.segments.indices {
            for t in media.segments[s].tags.indices {
                guard case .key(var key) = media.segments[s].tags[t], let uri = key.uri, InlineKeyURI.isInline(uri) else { continue }
                let bytes: SecretBytes
                do {
                    bytes = try InlineKeyURI.decode(uri, allowedLengths: [key.method.keyLength])
                } catch {
                    throw DownloadError.keys(code: error.code, message: error.message, subject: error.subject)
                }
                let reference = InlineKeyURI.reference(for: bytes, assetId: manifest.assetId)
                inlineKeys[reference] = bytes
                key.uri = reference
                media.segments[s].tags[t] = .key(key)
            }
        }
        return media
    }

    /// Rebuilds a recorded rendition from its recorded playlist (after a reload added segments, or once recording
    /// ended): the segment list, init sections, duration and local playlist; file names stay, since the recorded
    /// playlist only grows.
    mutating func refresh(renditionId: String, ended: Bool) throws {
        guard let index = manifest.renditions.firstIndex(where: { $0.id == renditionId }), let recorded = recordedPlaylists[renditionId],
            let url = URL(string: manifest.renditions[index].sourceURL)
        else { return }
        var rendition = manifest.renditions[index]
        rendition.initSections = []
        rendition.segments = []
        var media = recorded.playlist
        if ended { media.endList = true }
        try fill(&rendition, media: media, url: url, ended: ended)
        manifest.renditions[index] = rendition
    }

    /// Lists `media`'s segments and init sections in `rendition` and writes its local playlist: complete when `ended`,
    /// else an EVENT playlist without EXT-X-ENDLIST that grows as the recording does.
    mutating func fill(_ rendition: inout PackageRendition, media: MediaPlaylist, url: URL, ended: Bool) throws {
        guard media.segments.count <= DownloadPlanner.maximumSegments else {
            throw DownloadError.tooManySegments(url: url.absoluteString, count: media.segments.count)
        }
        let id = rendition.id
        rendition.duration = media.totalDuration
        let resolved = media.resolvedSegments(baseURL: url)
        var date: Double?
        var initIndex: [String: Int] = [:]
        var initNames: [Int: String] = [:]
        var segmentNames: [String] = []
        let allowFile = url.isFileURL
        func check(_ fileURL: URL?, _ uri: String) throws -> URL {
            guard let fileURL, let scheme = fileURL.scheme?.lowercased(),
                scheme == "http" || scheme == "https" || (scheme == "file" && allowFile)
            else { throw DownloadError.unsupportedURI(uri) }
            return fileURL
        }
        for segment in resolved {
            var initPosition: Int?
            if let map = segment.initializationSection {
                let mapURL = try check(map.url, map.uri)
                let identity = "\(mapURL.absoluteString)#\(map.byteRange.map { "\($0.offset)-\($0.length)" } ?? "")"
                if let known = initIndex[identity] {
                    initPosition = known
                } else {
                    let position = rendition.initSections.count
                    let name = "init-\(position).\(Self.fileExtension(of: mapURL, fallback: "mp4"))"
                    var key: PackageSegmentKey?
                    if let chosen = Self.chosenKey(map.keys), Self.isWholeFile(chosen.method),
                        let uri = chosen.url?.absoluteString ?? Optional(chosen.uri),
                        let packageKey = try packageKey(for: EncryptionKey(method: chosen.method, uri: uri, keyFormat: chosen.keyFormat), uri: uri)
                    {
                        key = PackageSegmentKey(method: chosen.method.rawValue, keyId: packageKey.keyId, iv: Hex.encode(chosen.iv))
                    }
                    rendition.initSections.append(
                        PackageFile(
                            path: "\(id)/\(name)",
                            sourceURL: mapURL.absoluteString,
                            byteRange: map.byteRange.map { PackageByteRange(offset: Int64($0.offset), length: Int64($0.length)) },
                            key: key
                        )
                    )
                    initIndex[identity] = position
                    initNames[position] = name
                    initPosition = position
                }
            }
            var file: PackageFile?
            let name = String(format: "%05d.%@", segment.index, Self.fileExtension(of: segment.url, fallback: "seg"))
            segmentNames.append(name)
            if !segment.isGap {
                let segmentURL = try check(segment.url, segment.uri)
                var key: PackageSegmentKey?
                if let chosen = Self.chosenKey(segment.keys) {
                    let uri = chosen.url?.absoluteString ?? chosen.uri
                    if let packageKey = try packageKey(for: EncryptionKey(method: chosen.method, uri: uri, keyFormat: chosen.keyFormat), uri: uri) {
                        key = PackageSegmentKey(method: chosen.method.rawValue, keyId: packageKey.keyId, iv: Hex.encode(chosen.iv))
                    }
                }
                file = PackageFile(
                    path: "\(id)/\(name)",
                    sourceURL: segmentURL.absoluteString,
                    byteRange: segment.byteRange.map { PackageByteRange(offset: Int64($0.offset), length: Int64($0.length)) },
                    key: key
                )
            }
            var packageSegment = PackageSegment(
                index: segment.index,
                duration: segment.duration,
                mediaSequence: segment.mediaSequence,
                discontinuitySequence: segment.discontinuitySequence,
                isGap: segment.isGap,
                initSection: initPosition,
                file: file
            )
            date = segment.programDateTime?.timeIntervalSince1970 ?? date
            packageSegment.programDateTime = date
            date = date.map { $0 + segment.duration }
            rendition.segments.append(packageSegment)
        }
        playlists[rendition.playlist] = localMediaPlaylist(
            media,
            url: url,
            segmentNames: segmentNames,
            initNames: initNames,
            initIndex: initIndex,
            ended: ended
        )
    }

    static func isWholeFile(_ method: EncryptionMethod) -> Bool {
        method == .aes128 || method == .aes256 || method == .aes256CTR
    }

    /// The media playlist as the package holds it: relative file names, no byte ranges, key URIs rewritten, no
    /// low-latency parts, SKIP, preload hints or rendition reports; GAP and DISCONTINUITY kept.
    mutating func localMediaPlaylist(
        _ media: MediaPlaylist,
        url: URL,
        segmentNames: [String],
        initNames: [Int: String],
        initIndex: [String: Int],
        ended: Bool = true
    ) -> String {
        var local = media
        local.definitions = []
        local.serverControl = nil
        local.partTarget = nil
        local.skip = nil
        local.preloadHints = []
        local.renditionReports = []
        local.endList = ended
        if !ended {
            local.playlistType = .event
        } else if manifest.recording != nil {
            local.playlistType = .vod
        }
        local.trailingTags = media.trailingTags.filter {
            if case .part = $0 { return false }
            return true
        }
        for (position, segment) in media.segments.enumerated() {
            var tags: [SegmentTag] = []
            for tag in segment.tags {
                switch tag {
                case .byteRange, .part:
                    continue
                case .key(let key):
                    var absolute = key
                    if let uri = key.uri, let resolvedURL = PlaylistURI.resolve(uri, against: url) { absolute.uri = resolvedURL.absoluteString }
                    if let localKey = localKey(absolute) { tags.append(.key(localKey)) }
                case .map(let map):
                    let mapURL = PlaylistURI.resolve(map.uri, against: url)?.absoluteString ?? map.uri
                    let offset = map.byteRange.map { $0.offset ?? 0 }
                    let identity = "\(mapURL)#\(map.byteRange.map { "\(offset ?? 0)-\($0.length)" } ?? "")"
                    var localMap = map
                    localMap.byteRange = nil
                    if let position = initIndex[identity], let name = initNames[position] { localMap.uri = name }
                    tags.append(.map(localMap))
                default:
                    tags.append(tag)
                }
            }
            local.segments[position].tags = tags
            local.segments[position].uri = segmentNames[position]
        }
        return PlaylistWriter.write(.media(local), options: .init(omitDefinitions: true))
    }
}
