import Foundation
import HLS
import OfflinePackage
import StowageCrypto

/// Lays out a packaged (encrypted) HLS asset as the download engine lays out an offline package: `manifest.json`,
/// `master.m3u8`, one folder per rendition (`video`, `audio-LANG`, `subtitles-LANG`) holding `index.m3u8` and files
/// with Stowage-made names (`00000.ts`, `init-0.mp4`), key URIs rewritten to `stowage-key://KEY_ID`.
struct PackageLayout {
    enum KeyMode {
        /// Keep the `skd://ASSET/KEY_ID` keys (KEYFORMAT `com.stowage.skd`).
        case skd
        /// Present every key as a standard AES key URI (KEYFORMAT `identity`).
        case identity
    }

    /// The local media playlist's name inside a rendition folder.
    static let playlistName = "index.m3u8"

    let assetId: String
    let mode: KeyMode
    let package: PackageDirectory
    let createdAt: Int64

    static func identityURI(assetId: String, keyID: String) -> String {
        "https://keys.stowage.test/\(assetId)/\(keyID).key"
    }

    /// One media playlist to lay out.
    private struct Source {
        var id: String
        var kind: PackageRendition.Kind
        var url: URL
        var name: String
        var language: String?
        var groupId: String?
        var isDefault: Bool
        var bandwidth: Int?
        var codecs: String?
        var resolution: String?
    }

    struct LayoutError: Error, CustomStringConvertible {
        var description: String
    }

    /// Writes the package from the packaged top playlist at `top` and returns the manifest written.
    func write(from top: URL, sourceURL: URL) throws -> PackageManifest {
        try FileManager.default.createDirectory(at: package.url, withIntermediateDirectories: true)
        let parsed = try PlaylistParser.parse(Array(try Data(contentsOf: top)), url: top)
        var sources: [Source] = []
        var master: MultivariantPlaylist
        switch parsed.playlist {
        case .media:
            sources.append(
                Source(id: "video", kind: .video, url: top, name: "video", isDefault: true, bandwidth: 400_000)
            )
            master = MultivariantPlaylist(variants: [VariantStream(uri: "video/\(Self.playlistName)", bandwidth: 400_000)])
        case .multivariant(let multivariant):
            master = multivariant
            guard var variant = multivariant.variants.first else { throw LayoutError(description: "no variant in \(top.path)") }
            sources.append(
                Source(
                    id: "video",
                    kind: .video,
                    url: top.deletingLastPathComponent().appendingPathComponent(variant.uri),
                    name: "video",
                    isDefault: true,
                    bandwidth: variant.bandwidth,
                    codecs: variant.codecs,
                    resolution: variant.resolution.map { "\($0)" }
                )
            )
            variant.uri = "video/\(Self.playlistName)"
            var used: Set<String> = ["video"]
            var renditions: [HLS.Rendition] = []
            for var rendition in multivariant.renditions {
                let groups = [variant.audio, variant.subtitles].compactMap { $0 }
                guard groups.contains(rendition.groupID), rendition.type == .audio || rendition.type == .subtitles else { continue }
                if let uri = rendition.uri {
                    let kind: PackageRendition.Kind = rendition.type == .audio ? .audio : .subtitles
                    let base = "\(kind.rawValue)-\(Self.folderSafe(rendition.language ?? rendition.name))"
                    var id = base
                    var counter = 1
                    while used.contains(id) {
                        counter += 1
                        id = "\(base)-\(counter)"
                    }
                    used.insert(id)
                    sources.append(
                        Source(
                            id: id,
                            kind: kind,
                            url: top.deletingLastPathComponent().appendingPathComponent(uri),
                            name: rendition.name,
                            language: rendition.language,
                            groupId: rendition.groupID,
                            isDefault: rendition.isDefault ?? false
                        )
                    )
                    rendition.uri = "\(id)/\(Self.playlistName)"
                }
                renditions.append(rendition)
            }
            master.variants = [variant]
            master.iFrameVariants = []
            master.renditions = renditions
            master.sessionKeys = master.sessionKeys.map { localKey($0).tag }
        }

        var keys: [String: PackageKey] = [:]
        var packageRenditions: [PackageRendition] = []
        for source in sources {
            packageRenditions.append(try layOut(source, keys: &keys))
        }
        let masterText = PlaylistWriter.write(.multivariant(master))
        try PackageDirectory.writeAtomically(Data(masterText.utf8), to: package.url.appendingPathComponent(PackageManifest.multivariantFileName))
        var manifest = PackageManifest(
            assetId: assetId,
            title: "Test asset \(assetId)",
            sourceURL: sourceURL.absoluteString,
            createdAt: createdAt,
            keys: keys.values.sorted { $0.keyId < $1.keyId },
            renditions: packageRenditions
        )
        manifest.updatedAt = createdAt
        try package.writeManifest(manifest)
        return manifest
    }

    /// The local form of a key tag and the package key it names.
    private func localKey(_ tag: EncryptionKey) -> (tag: EncryptionKey, key: PackageKey?) {
        guard let uri = tag.uri, tag.method != .none, uri.hasPrefix("skd://") else { return (tag, nil) }
        let skdKeyID = String(uri.split(separator: "/").last ?? "")
        var local = tag
        let key: PackageKey
        switch mode {
        case .skd:
            key = PackageKey(keyId: skdKeyID, kind: .skd, uri: uri, keyFormat: tag.effectiveKeyFormat)
        case .identity:
            let identityURI = Self.identityURI(assetId: assetId, keyID: skdKeyID)
            key = PackageKey(
                keyId: PackageKeyring.identityKeyID(uri: identityURI),
                kind: .identity,
                uri: identityURI,
                keyFormat: EncryptionKey.identityKeyFormat
            )
            local.keyFormat = nil
            local.keyFormatVersions = nil
        }
        local.uri = key.localURI
        return (local, key)
    }

    private func layOut(_ source: Source, keys: inout [String: PackageKey]) throws -> PackageRendition {
        let parsed = try PlaylistParser.parse(Array(try Data(contentsOf: source.url)), url: source.url)
        guard case .media(var playlist) = parsed.playlist else { throw LayoutError(description: "\(source.url.path) is not a media playlist") }
        let resolved = playlist.resolvedSegments(baseURL: source.url)
        let folder = package.url.appendingPathComponent(source.id, isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)

        var initSections: [PackageFile] = []
        var initIndexByURI: [String: Int] = [:]
        var segments: [PackageSegment] = []
        // Key IDs by the skd URI, as the rewritten tags name them.
        var localKeyIDs: [String: String] = [:]

        for index in playlist.segments.indices {
            var tags: [SegmentTag] = []
            for tag in playlist.segments[index].tags {
                switch tag {
                case .key(let key):
                    let local = localKey(key)
                    if let packageKey = local.key {
                        keys[packageKey.keyId] = packageKey
                        if let uri = key.uri { localKeyIDs[uri] = packageKey.keyId }
                    }
                    tags.append(.key(local.tag))
                case .map(var map):
                    let section = resolved[index].initializationSection
                    let mapURI = section?.uri ?? map.uri
                    let initIndex: Int
                    if let known = initIndexByURI[mapURI] {
                        initIndex = known
                    } else {
                        initIndex = initSections.count
                        guard let url = section?.url else { throw LayoutError(description: "no init section for \(map.uri)") }
                        let name = "init-\(initIndex).\(Self.fileExtension(url, fallback: "mp4"))"
                        // RFC 8216bis 4.4.4.5: an EXT-X-MAP under an AES-128 key is encrypted with it; a cbcs init
                        // section (SAMPLE-AES) is not encrypted as a whole.
                        let key = section?.keys.first.flatMap { key -> PackageSegmentKey? in
                            guard key.method == .aes128 || key.method == .aes256 || key.method == .aes256CTR else { return nil }
                            return packageSegmentKey(key, localKeyIDs: localKeyIDs)
                        }
                        initSections.append(try copy(url, to: "\(source.id)/\(name)", key: key))
                        initIndexByURI[mapURI] = initIndex
                    }
                    map.uri = initSections[initIndex].path.split(separator: "/").last.map(String.init) ?? map.uri
                    map.byteRange = nil
                    tags.append(.map(map))
                default:
                    tags.append(tag)
                }
            }
            playlist.segments[index].tags = tags
            let segment = resolved[index]
            guard let url = segment.url else { throw LayoutError(description: "segment \(segment.uri) is not local") }
            let name = String(format: "%05d", index) + "." + Self.fileExtension(url, fallback: "ts")
            let key = segment.keys.first.map { packageSegmentKey($0, localKeyIDs: localKeyIDs) }
            let file = try copy(url, to: "\(source.id)/\(name)", key: key)
            playlist.segments[index].uri = name
            segments.append(
                PackageSegment(
                    index: index,
                    duration: segment.duration,
                    mediaSequence: segment.mediaSequence,
                    discontinuitySequence: segment.discontinuitySequence,
                    isGap: segment.isGap,
                    initSection: segment.initializationSection.flatMap { initIndexByURI[$0.uri] },
                    file: file
                )
            )
        }
        playlist.trailingTags = playlist.trailingTags.map { tag in
            if case .key(let key) = tag { .key(localKey(key).tag) } else { tag }
        }
        let text = PlaylistWriter.write(.media(playlist))
        let playlistPath = "\(source.id)/\(Self.playlistName)"
        try PackageDirectory.writeAtomically(Data(text.utf8), to: package.url.appendingPathComponent(playlistPath))
        return PackageRendition(
            id: source.id,
            kind: source.kind,
            name: source.name,
            language: source.language,
            groupId: source.groupId,
            isDefault: source.isDefault,
            bandwidth: source.bandwidth,
            codecs: source.codecs,
            resolution: source.resolution,
            sourceURL: source.url.absoluteString,
            playlist: playlistPath,
            duration: playlist.totalDuration,
            isComplete: true,
            initSections: initSections,
            segments: segments
        )
    }

    private func packageSegmentKey(_ key: ResolvedKey, localKeyIDs: [String: String]) -> PackageSegmentKey {
        let keyID = localKeyIDs[key.uri] ?? String(key.uri.split(separator: "/").last ?? "")
        // RFC 8216bis 5.2: the IV is the IV attribute, else the media sequence number (already resolved).
        return PackageSegmentKey(method: key.method.rawValue, keyId: keyID, iv: Hex.encode(key.iv))
    }

    /// Copies a source file into the package and describes it (size and SHA-256 of the stored bytes).
    private func copy(_ source: URL, to relativePath: String, key: PackageSegmentKey?) throws -> PackageFile {
        let bytes = try Data(contentsOf: source)
        let destination = try package.url(forRelativePath: relativePath)
        try PackageDirectory.writeAtomically(bytes, to: destination)
        return PackageFile(
            path: relativePath,
            sourceURL: source.absoluteString,
            size: Int64(bytes.count),
            sha256: Hex.encode(SHA256Hasher.hash(Array(bytes))),
            key: key
        )
    }

    private static func fileExtension(_ url: URL, fallback: String) -> String {
        let ext = url.pathExtension.lowercased()
        return ext.isEmpty || ext.count > 5 || !ext.allSatisfy({ $0.isLetter || $0.isNumber }) ? fallback : ext
    }

    private static func folderSafe(_ text: String) -> String {
        let safe = String(text.lowercased().map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "-" })
        return safe.isEmpty ? "und" : safe
    }
}
