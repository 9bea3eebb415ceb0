public import Foundation
public import HLS
import KeyDelivery
public import MediaCrypto
public import StowageCore
public import StowageCrypto

/// Where ``ContentPackager`` registers the content keys it makes.
public protocol ContentKeyRegistrar {
    /// Stores `key` under `keyID` (32 lowercase hex digits) for the asset.
    func register(assetID: String, keyID: String, key: SecretBytes) async throws
}

/// A registrar made of a function, such as a key server data directory's `register`:
/// `KeyRegistrar(keyServerDirectory.register)`. (Packaging does not depend on the key server: content can be
/// prepared for any key store.)
public struct KeyRegistrar: ContentKeyRegistrar, Sendable {
    private let body: @Sendable (String, String, SecretBytes) async throws -> Void

    public init(_ register: @escaping @Sendable (_ assetID: String, _ keyID: String, _ key: SecretBytes) async throws -> Void) {
        body = register
    }

    public func register(assetID: String, keyID: String, key: SecretBytes) async throws {
        try await body(assetID, keyID, key)
    }
}

/// Encrypts a clear HLS asset with fresh keys and writes protected playlists: `stowage package`.
///
/// The input is a media playlist, or a multivariant playlist whose variant and rendition media playlists are all
/// packaged. Segments keep their names and relative paths. SAMPLE-AES uses Apple's sample encryption for MPEG-TS and
/// `cbcs` for fMP4; AES-128 encrypts whole segments (and the EXT-X-MAP). Renditions that are neither MPEG-TS nor fMP4
/// (WebVTT, packed audio) are copied clear. Keys are made with ``SecureRandom``, handed to the registrar and kept in
/// memory only; the playlists name them `skd://ASSET_ID/KEY_ID_HEX` with KEYFORMAT `com.stowage.skd`.
public struct ContentPackager {
    /// The encryption method.
    public enum Method: String, Sendable, CaseIterable {
        case sampleAES = "sample-aes"
        case aes128 = "aes-128"

        var segmentMethod: SegmentEncryptionMethod { self == .sampleAES ? .sampleAES : .aes128 }
        var playlistMethod: EncryptionMethod { self == .sampleAES ? .sampleAES : .aes128 }
    }

    /// One packaged media playlist.
    public struct Rendition: Sendable, Hashable {
        /// The playlist's path relative to the output directory.
        public var playlist: String
        /// `ts`, `fmp4` or `other` (copied clear).
        public var container: String
        public var segments: Int
        /// The key IDs (hex) its segments are encrypted with; empty when it stays clear.
        public var keyIDs: [String]
    }

    /// What was written.
    public struct Report: Sendable, Hashable {
        /// The top playlist written.
        public var playlist: URL
        public var renditions: [Rendition]
        /// Every key ID registered, in order.
        public var keyIDs: [String]
    }

    /// KEYFORMAT of the written key tags (docs/key-protocol.md, "Key URIs in playlists").
    public static let keyFormat = "com.stowage.skd"
    /// SESSION-DATA DATA-ID advertising the key server URL.
    public static let keyServerDataID = "com.stowage.key-server"

    public var assetID: String
    public var method: Method
    public var outputDirectory: URL
    /// Segments per key; nil for one key for the whole asset.
    public var rotationPeriod: Int?
    /// Advertised in the multivariant playlist with EXT-X-SESSION-DATA when set.
    public var keyServerURL: String?
    public var registrar: any ContentKeyRegistrar

    public init(
        assetID: String,
        method: Method,
        outputDirectory: URL,
        rotationPeriod: Int? = nil,
        keyServerURL: String? = nil,
        registrar: any ContentKeyRegistrar
    ) {
        self.assetID = assetID
        self.method = method
        self.outputDirectory = outputDirectory
        self.rotationPeriod = rotationPeriod
        self.keyServerURL = keyServerURL
        self.registrar = registrar
    }

    /// A key period's key: the clear key lives only here and in the registrar's store.
    private struct PeriodKey {
        var keyID: [UInt8]
        var key: SecretBytes
        var iv: [UInt8]
        var keyIDHex: String { Hex.encode(keyID) }
    }

    /// The keys made so far, shared by every rendition (period `i` of every rendition uses key `i`).
    private final class KeyBook {
        var keys: [PeriodKey] = []
    }

    /// Packages the playlist at `playlistURL` into ``outputDirectory``.
    public func package(playlistAt playlistURL: URL) async throws(ContentPackagingError) -> Report {
        guard KeyProtocol.isValidAssetID(assetID) else { throw .invalidArgument("asset ID \"\(assetID)\" must match [A-Za-z0-9._-]{1,128}") }
        if let rotationPeriod, rotationPeriod < 1 { throw .invalidArgument("the rotation period must be at least 1 segment") }
        let parsed = try load(playlistURL)
        let book = KeyBook()
        try createDirectory(outputDirectory)
        let outputPlaylist = outputDirectory.appendingPathComponent(playlistURL.lastPathComponent)
        var renditions: [Rendition] = []
        switch parsed.playlist {
        case .media(let media):
            renditions.append(try packageMedia(media, at: playlistURL, relativePath: playlistURL.lastPathComponent, book: book))
        case .multivariant(var multivariant):
            guard multivariant.sessionKeys.isEmpty else { throw .alreadyProtected(path: playlistURL.path) }
            guard multivariant.iFrameVariants.isEmpty else {
                throw .unsupported("I-frame playlists (EXT-X-I-FRAME-STREAM-INF) are not packaged yet; remove them first")
            }
            var uris: [String] = []
            for uri in multivariant.variants.map(\.uri) + multivariant.renditions.compactMap(\.uri) where !uris.contains(uri) {
                uris.append(uri)
            }
            for uri in uris {
                let relative = try Self.relativePath(uri)
                let url = playlistURL.deletingLastPathComponent().appendingPathComponent(relative)
                let child = try load(url)
                guard case .media(let media) = child.playlist else { throw .unsupported("\(uri) is not a media playlist") }
                renditions.append(try packageMedia(media, at: url, relativePath: relative, book: book))
            }
            for key in book.keys {
                multivariant.sessionKeys.append(tag(for: key, iv: false))
            }
            if let keyServerURL {
                multivariant.sessionData.removeAll { $0.dataID == Self.keyServerDataID }
                multivariant.sessionData.append(SessionData(dataID: Self.keyServerDataID, value: keyServerURL))
            }
            try write(PlaylistWriter.write(.multivariant(multivariant)), to: outputPlaylist)
        }
        // Register only once every file is written: a failed run leaves no key behind in the store.
        for key in book.keys {
            do {
                try await registrar.register(assetID: assetID, keyID: key.keyIDHex, key: key.key)
            } catch {
                throw .registration(keyID: key.keyIDHex, reason: (error as? any StowageError)?.message ?? "\(error)")
            }
        }
        return Report(playlist: outputPlaylist, renditions: renditions, keyIDs: book.keys.map(\.keyIDHex))
    }

    private func tag(for key: PeriodKey, iv: Bool) -> EncryptionKey {
        EncryptionKey(
            method: method.playlistMethod,
            uri: "skd://\(assetID)/\(key.keyIDHex)",
            iv: iv ? Hex.encode(key.iv) : nil,
            keyFormat: Self.keyFormat,
            keyFormatVersions: "1"
        )
    }

    private func key(forPeriod period: Int, book: KeyBook) throws(ContentPackagingError) -> PeriodKey {
        while book.keys.count <= period {
            do {
                book.keys.append(
                    PeriodKey(
                        keyID: try SecureRandom.bytes(count: 16),
                        key: SecretBytes(try SecureRandom.bytes(count: 16)),
                        iv: try SecureRandom.bytes(count: 16)
                    )
                )
            } catch {
                throw .random("\(error)")
            }
        }
        return book.keys[period]
    }

    private func packageMedia(
        _ playlist: MediaPlaylist,
        at url: URL,
        relativePath: String,
        book: KeyBook
    ) throws(ContentPackagingError) -> Rendition {
        let segments = playlist.resolvedSegments(baseURL: url)
        if segments.contains(where: { !$0.keys.isEmpty }) { throw .alreadyProtected(path: url.path) }
        if segments.contains(where: { $0.byteRange != nil || $0.initializationSection?.byteRange != nil }) {
            throw .unsupported("\(url.path) uses EXT-X-BYTERANGE; only one file per segment is packaged")
        }
        guard !playlist.segments.isEmpty else { throw .unsupported("\(url.path) has no segments") }
        let outputPlaylist = outputDirectory.appendingPathComponent(relativePath)
        let outputFolder = outputPlaylist.deletingLastPathComponent()
        try createDirectory(outputFolder)

        let firstBytes = try read(segments[0].url, uri: segments[0].uri)
        let container = SegmentContainer.detect(Array(firstBytes.prefix(SegmentContainer.detectionLength)))
        var rendition = Rendition(playlist: relativePath, container: container.rawValue, segments: segments.count, keyIDs: [])

        guard container != .other, container != .packedAudio else {
            // Subtitles, packed audio (which Stowage does not encrypt) and other streams stay clear.
            for (segment, resolved) in zip(playlist.segments, segments) {
                try writeBytes(try read(resolved.url, uri: resolved.uri), to: outputFolder, uri: segment.uri)
            }
            for segment in segments {
                if let section = segment.initializationSection {
                    try writeBytes(try read(section.url, uri: section.uri), to: outputFolder, uri: section.uri)
                }
            }
            try write(PlaylistWriter.write(.media(playlist)), to: outputPlaylist)
            return rendition
        }
        if container == .fragmentedMP4, method == .sampleAES, let rotationPeriod, rotationPeriod < segments.count {
            throw .unsupported("key rotation with SAMPLE-AES fMP4 (cbcs) is not supported: the init section carries one key ID")
        }

        var output = playlist
        var initSections: [String: CBCSInitSection?] = [:]
        for index in segments.indices {
            let resolved = segments[index]
            let period = rotationPeriod.map { index / $0 } ?? 0
            let key = try key(forPeriod: period, book: book)
            if rendition.keyIDs.last != key.keyIDHex {
                rendition.keyIDs.append(key.keyIDHex)
                output.segments[index].tags.insert(.key(tag(for: key, iv: true)), at: 0)
            }
            // The init section where its EXT-X-MAP stands: cbcs for SAMPLE-AES, encrypted whole for AES-128.
            var protection: CBCSInitSection?
            if let section = resolved.initializationSection {
                let mapURI = Self.mapURI(in: playlist, before: index) ?? section.uri
                if let done = initSections[section.uri] {
                    protection = done
                } else {
                    let clear = try read(section.url, uri: section.uri)
                    let bytes: [UInt8]
                    do {
                        switch method {
                        case .sampleAES:
                            let made = try CBCSInitSection.encrypting(clearInit: clear, keyID: key.keyID, constantIV: key.iv, segment: section.uri)
                            protection = made
                            initSections[section.uri] = made
                            bytes = made.bytes
                        case .aes128:
                            let cipher = try SegmentCryptography.encryptor(
                                method: .aes128,
                                container: .other,
                                key: key.key,
                                iv: key.iv,
                                segment: section.uri
                            )
                            bytes = try cipher.transform(clear)
                            initSections[section.uri] = .some(nil)
                        }
                    } catch let error as SegmentCryptoError {
                        throw .segment(error)
                    } catch {
                        throw .segment(.unsupportedStream(segment: section.uri, detail: "\(error)"))
                    }
                    try writeBytes(bytes, to: outputFolder, uri: mapURI)
                }
            }
            let clear = index == 0 ? firstBytes : try read(resolved.url, uri: resolved.uri)
            let segmentContainer = SegmentContainer.detect(Array(clear.prefix(SegmentContainer.detectionLength)))
            let encrypted: [UInt8]
            do {
                let transform = try SegmentCryptography.encryptor(
                    method: method.segmentMethod,
                    container: segmentContainer,
                    key: key.key,
                    iv: key.iv,
                    initSection: protection,
                    segment: resolved.uri
                )
                encrypted = try transform.transform(clear)
            } catch let error as SegmentCryptoError {
                throw .segment(error)
            } catch {
                throw .segment(.unsupportedStream(segment: resolved.uri, detail: "\(error)"))
            }
            try writeBytes(encrypted, to: outputFolder, uri: playlist.segments[index].uri)
        }
        // KEYFORMAT and KEYFORMATVERSIONS need protocol version 5 (RFC 8216bis 7).
        if let version = output.version, version < 5 { output.version = 5 }
        try write(PlaylistWriter.write(.media(output)), to: outputPlaylist)
        return rendition
    }

    /// The URI of the EXT-X-MAP in effect at segment `index`, as written.
    private static func mapURI(in playlist: MediaPlaylist, before index: Int) -> String? {
        for segment in playlist.segments[0...index].reversed() {
            for tag in segment.tags.reversed() {
                if case .map(let map) = tag { return map.uri }
            }
        }
        return nil
    }

    /// A relative URI as a path under the output directory; absolute URIs and `..` are refused.
    static func relativePath(_ uri: String) throws(ContentPackagingError) -> String {
        let path = uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? uri
        let decoded = path.removingPercentEncoding ?? path
        let parts = decoded.split(separator: "/", omittingEmptySubsequences: false)
        guard !decoded.isEmpty, !decoded.hasPrefix("/"), !uri.contains("://"), !parts.contains(where: { $0 == ".." || $0.isEmpty }) else {
            throw .unsupported("\(uri) is not a relative path inside the asset's folder")
        }
        return decoded
    }

    private func load(_ url: URL) throws(ContentPackagingError) -> ParsedPlaylist {
        let bytes: Data
        do {
            bytes = try Data(contentsOf: url)
        } catch {
            throw .unreadable(path: url.path, reason: FileErrorText.describe(error))
        }
        do {
            return try PlaylistParser.parse(Array(bytes), url: url)
        } catch {
            throw .invalidPlaylist(path: url.path, error)
        }
    }

    private func read(_ url: URL?, uri: String) throws(ContentPackagingError) -> [UInt8] {
        guard let url, url.isFileURL else { throw .unsupported("\(uri) is not a local file") }
        do {
            return Array(try Data(contentsOf: url))
        } catch {
            throw .unreadable(path: url.path, reason: FileErrorText.describe(error))
        }
    }

    private func writeBytes(_ bytes: [UInt8], to folder: URL, uri: String) throws(ContentPackagingError) {
        let destination = folder.appendingPathComponent(try Self.relativePath(uri))
        try createDirectory(destination.deletingLastPathComponent())
        do {
            try Data(bytes).write(to: destination, options: .atomic)
        } catch {
            throw .output(path: destination.path, reason: FileErrorText.describe(error))
        }
    }

    private func write(_ text: String, to url: URL) throws(ContentPackagingError) {
        do {
            try Data(text.utf8).write(to: url, options: .atomic)
        } catch {
            throw .output(path: url.path, reason: FileErrorText.describe(error))
        }
    }

    private func createDirectory(_ url: URL) throws(ContentPackagingError) {
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            throw .output(path: url.path, reason: "cannot create the directory: \(FileErrorText.describe(error))")
        }
    }
}

/// Why `stowage package` stopped.
public enum ContentPackagingError: Error, Sendable, CustomStringConvertible {
    case invalidArgument(String)
    case unreadable(path: String, reason: String)
    case invalidPlaylist(path: String, PlaylistError)
    case alreadyProtected(path: String)
    case unsupported(String)
    case random(String)
    case segment(SegmentCryptoError)
    case output(path: String, reason: String)
    case registration(keyID: String, reason: String)

    /// A stable snake_case code.
    public var code: ErrorCode {
        switch self {
        // The command line's own code: these are arguments `stowage package` was given.
        case .invalidArgument: .invalidArguments
        case .unreadable: .unreadable
        case .invalidPlaylist(_, let error): error.code
        case .alreadyProtected: .alreadyProtected
        case .unsupported: .unsupportedInput
        case .random: .randomFailed
        case .segment(let error): error.code
        case .output: .outputFailed
        case .registration: .keyRegistrationFailed
        }
    }

    public var description: String {
        switch self {
        case .invalidArgument(let message): message
        case .unreadable(let path, let reason): "cannot read \(path): \(reason)"
        case .invalidPlaylist(let path, let error): "\(path) is not a valid playlist: \(error)"
        case .alreadyProtected(let path): "\(path) is already encrypted; give a clear playlist"
        case .unsupported(let message): message
        case .random(let reason): "cannot draw random bytes: \(reason)"
        case .segment(let error): error.description
        case .output(let path, let reason): "cannot write \(path): \(reason)"
        case .registration(let keyID, let reason):
            "cannot register key \(keyID) with the key server: \(reason). The files written cannot be played until their keys are "
                + "registered: mend the key server's data directory (--keyserver-data-dir, made by `stowage keyserver init`) or "
                + "database (--keyserver-database), then package again"
        }
    }
}

extension ContentPackagingError: StowageError {
    public var message: String { description }
}
