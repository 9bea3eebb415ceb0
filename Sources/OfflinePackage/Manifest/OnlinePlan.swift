public import StowageCrypto

/// What the source offers beyond a package, planned for streaming beside it (`stowage play` while online): the
/// variants and renditions the package does not hold, described exactly as a download would describe them (files,
/// keys, local playlists), but named `online-...` (``PackageSourceRendition/onlineId``) and never written to disk.
///
/// The download engine plans it (`DownloadSession.onlinePlan(for:)`); playback serves it beside the package.
public struct OnlinePlan: Sendable {
    /// The session-data ID of the served multivariant playlist's list of online renditions.
    public static let sessionDataID = "com.stowage.online"

    /// The online variants and renditions (IDs `online-video-2000000`, `online-audio-fr`, ...), none of their files
    /// downloaded.
    public var renditions: [PackageRendition]
    /// Keys their files need that the package's manifest does not list.
    public var keys: [PackageKey]
    /// Each online rendition's local media playlist text, by its path (`online-audio-fr/index.m3u8`).
    public var playlists: [String: String]
    /// The multivariant playlist to serve: every variant and rendition the source offers, the stored ones pointing at
    /// the package's playlists and the online ones at theirs, with EXT-X-SESSION-DATA ``sessionDataID`` listing the
    /// online rendition IDs.
    public var multivariantPlaylist: String
    /// The bytes of ``keys`` the source's playlists carry inline (`data:` URIs), by the reference
    /// ``PackageKey/uri`` names them with; memory only, like every key of an online rendition.
    public var inlineKeys: [String: SecretBytes]

    public init(
        renditions: [PackageRendition],
        keys: [PackageKey],
        playlists: [String: String],
        multivariantPlaylist: String,
        inlineKeys: [String: SecretBytes] = [:]
    ) {
        self.renditions = renditions
        self.keys = keys
        self.playlists = playlists
        self.multivariantPlaylist = multivariantPlaylist
        self.inlineKeys = inlineKeys
    }
}
