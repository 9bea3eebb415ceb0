public import OfflinePackage
public import StowageCrypto

/// Where the files and keys of renditions a package does not hold come from while the source is reachable
/// (`StowageLibrary` answers with the download engine's HTTP client and a key session; this module fetches nothing
/// itself).
public protocol OnlineSource: Sendable {
    /// The bytes of `file` (an init section or a segment of an online rendition) from the source, still encrypted.
    func fetch(_ file: PackageFile) async throws -> [UInt8]
    /// The content key of `key`, which the stored lease does not hold: from a `streaming` lease (skd keys) or the
    /// key URI (identity keys), in memory only.
    func contentKey(_ key: PackageKey) async throws -> SecretBytes
}

/// The variants and renditions the source offers beyond a package, served beside the stored ones by a playback
/// session, as AVPlayer streams a rendition an offline asset lacks while the device is online.
public struct OnlineRenditions: Sendable {
    /// The online renditions, described as a package describes its own (IDs `online-...`); their files are fetched
    /// on request and never written.
    public var renditions: [PackageRendition]
    /// Keys of those files the package's manifest does not list.
    public var keys: [PackageKey]
    /// Each online rendition's media playlist text, by path.
    public var playlists: [String: String]
    /// The multivariant playlist served in place of the package's: stored and online renditions side by side.
    public var multivariantPlaylist: String
    /// Where their files and keys come from.
    public var source: any OnlineSource

    public init(
        renditions: [PackageRendition],
        keys: [PackageKey],
        playlists: [String: String],
        multivariantPlaylist: String,
        source: any OnlineSource
    ) {
        self.renditions = renditions
        self.keys = keys
        self.playlists = playlists
        self.multivariantPlaylist = multivariantPlaylist
        self.source = source
    }

    /// The IDs of the online renditions.
    public var renditionIds: [String] { renditions.map(\.id) }
}
