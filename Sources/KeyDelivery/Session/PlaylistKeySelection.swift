public import Foundation
public import HLS

/// Which keys a client must obtain for the EXT-X-KEY / EXT-X-SESSION-KEY entries of an asset (docs/key-protocol.md,
/// "Key URIs in playlists"). Pure: nothing is fetched.
///
/// Entries come as key line sets: the lines that apply together, one per KEYFORMAT. From each set, `com.stowage.skd`
/// (URI `skd://ASSET_ID/KEY_ID_HEX`) is chosen when present, else `identity` (KEYFORMAT absent or `identity`, an
/// http(s) URI). METHOD=NONE is ignored; a set offering neither is refused with `unsupported_key_format`.
public struct PlaylistKeySelection: Hashable, Sendable {
    /// The KEYFORMAT of keys delivered by the Stowage key server.
    public static let skdKeyFormat = "com.stowage.skd"

    /// The asset the skd URIs name, else the asset given to ``select(_:assetId:baseURL:)``; nil when neither.
    public let assetId: String?
    /// The distinct skd key IDs, in order of appearance; several mean key rotation, requested in one acquisition.
    public let skdKeyIds: [String]
    /// The distinct identity key URLs, absolute, in order of appearance.
    public let identityKeyURLs: [URL]

    public init(assetId: String?, skdKeyIds: [String], identityKeyURLs: [URL]) {
        self.assetId = assetId
        self.skdKeyIds = skdKeyIds
        self.identityKeyURLs = identityKeyURLs
    }

    /// Whether the entries need no key at all (clear content).
    public var isEmpty: Bool { skdKeyIds.isEmpty && identityKeyURLs.isEmpty }

    /// Selects from a flat list of entries, as ``MediaPlaylist/distinctKeys`` or a multivariant playlist's
    /// `sessionKeys` give them: consecutive entries form one key line set until a KEYFORMAT repeats or a METHOD=NONE
    /// entry ends it.
    ///
    /// - Parameters:
    ///   - assetId: the asset expected; skd URIs naming another are refused. Nil: the first skd URI's asset.
    ///   - baseURL: the playlist's URL, to resolve relative identity key URIs.
    /// - Throws: ``KeySessionError`` `unsupported_key_format`, `malformed_key_uri`, `key_for_other_asset`.
    public static func select(_ keys: [EncryptionKey], assetId: String? = nil, baseURL: URL? = nil) throws -> Self {
        var sets: [[EncryptionKey]] = []
        var current: [EncryptionKey] = []
        for key in keys {
            if key.method == .none {
                if !current.isEmpty { sets.append(current) }
                current = []
                continue
            }
            if current.contains(where: { $0.effectiveKeyFormat == key.effectiveKeyFormat }) {
                sets.append(current)
                current = []
            }
            current.append(key)
        }
        if !current.isEmpty { sets.append(current) }
        return try select(keySets: sets, assetId: assetId, baseURL: baseURL)
    }

    /// Selects one key from each set of lines that apply together.
    ///
    /// - Throws: as ``select(_:assetId:baseURL:)``.
    public static func select(keySets: [[EncryptionKey]], assetId: String? = nil, baseURL: URL? = nil) throws -> Self {
        if let assetId, !KeyProtocol.isValidAssetID(assetId) {
            throw KeySessionError.invalidRequest("invalid asset ID \(assetId)")
        }
        var asset = assetId
        var keyIds: [String] = []
        var urls: [URL] = []
        for set in keySets {
            let live = set.filter { $0.method != .none }
            guard !live.isEmpty else { continue }
            if let skd = live.first(where: { $0.effectiveKeyFormat == skdKeyFormat }) {
                let uri = skd.uri ?? ""
                let (named, keyId) = try parseSKD(uri)
                if let expected = asset, expected != named {
                    throw KeySessionError.keyForOtherAsset(uri, expected: expected, got: named)
                }
                asset = named
                if !keyIds.contains(keyId) { keyIds.append(keyId) }
            } else if let identity = live.first(where: { $0.effectiveKeyFormat == EncryptionKey.identityKeyFormat }) {
                let uri = identity.uri ?? ""
                guard let url = PlaylistURI.resolve(uri, against: baseURL),
                    let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil
                else { throw KeySessionError.malformedKeyURI(uri, "an identity key URI must be http(s)") }
                if !urls.contains(url) { urls.append(url) }
            } else {
                var formats: [String] = []
                for key in live where !formats.contains(key.effectiveKeyFormat) { formats.append(key.effectiveKeyFormat) }
                throw KeySessionError.unsupportedKeyFormat(formats)
            }
        }
        return Self(assetId: asset, skdKeyIds: keyIds, identityKeyURLs: urls)
    }

    /// Splits `skd://ASSET_ID/KEY_ID_HEX`, validating both parts.
    public static func parseSKD(_ uri: String) throws -> (assetId: String, keyId: String) {
        let prefix = "skd://"
        guard uri.count > prefix.count, uri.prefix(prefix.count).lowercased() == prefix else {
            throw KeySessionError.malformedKeyURI(uri, "expected skd://ASSET_ID/KEY_ID_HEX")
        }
        let parts = uri.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { throw KeySessionError.malformedKeyURI(uri, "expected skd://ASSET_ID/KEY_ID_HEX") }
        guard KeyProtocol.isValidAssetID(parts[0]) else { throw KeySessionError.malformedKeyURI(uri, "invalid asset ID") }
        guard KeyProtocol.isValidKeyID(parts[1]) else {
            throw KeySessionError.malformedKeyURI(uri, "the key ID must be 32 lowercase hex digits")
        }
        return (parts[0], parts[1])
    }
}
