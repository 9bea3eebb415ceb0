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

/// The variants and renditions the source offers beyond a package (``OfflinePackage/OnlinePlan``), served beside the
/// stored ones by a playback session, as AVPlayer streams a rendition an offline asset lacks while the device is
/// online; with where their files and keys come from.
public struct OnlineRenditions: Sendable {
    /// What is on offer, described as a package describes its own.
    public var plan: OnlinePlan
    /// Where their files and keys come from.
    public var source: any OnlineSource

    public init(plan: OnlinePlan, source: any OnlineSource) {
        self.plan = plan
        self.source = source
    }

    /// The IDs of the online renditions.
    public var renditionIds: [String] { plan.renditions.map(\.id) }
}
