public import Foundation

/// Resolves URIs found in playlists (RFC 8216bis 4.1: relative URIs are relative to the playlist's own URI, after
/// redirects).
public enum PlaylistURI {
    /// The absolute URL a playlist URI names, or nil when it cannot be read as a URI reference at all.
    ///
    /// Real playlists contain URIs with spaces and other characters RFC 3986 forbids; they are percent-encoded
    /// first, as browsers and players do.
    public static func resolve(_ uri: String, against base: URL?) -> URL? {
        if let url = URL(string: uri, relativeTo: base), url.scheme != nil || base == nil {
            return url.absoluteURL
        }
        guard let encoded = uri.addingPercentEncoding(withAllowedCharacters: uriCharacters),
            let url = URL(string: encoded, relativeTo: base)
        else { return nil }
        return url.absoluteURL
    }

    /// RFC 3986 reserved and unreserved characters, plus `%` so existing escapes stay as they are.
    private static let uriCharacters = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%"
    )
}
