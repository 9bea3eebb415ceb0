import Foundation
public import StowageCore

/// A playlist that cannot be parsed: what is wrong, on which line, and the offending text.
///
/// Codes are stable (snake_case in JSON and in the CLI) so tools can react to them; the line number is
/// 1-based and counts the lines of the playlist as received (after a UTF-8 BOM is dropped).
public struct PlaylistError: Error, Hashable, Sendable, CustomStringConvertible {
    private typealias Code = ErrorCode

    private let _code: Code
    /// 1-based line number of the offending line, or 0 when the problem concerns the whole playlist.
    public let line: Int
    /// The offending line (or an excerpt of it, at most 200 characters).
    public let text: String
    /// What is wrong, in words.
    public let reason: String

    private init(_ code: Code, line: Int, text: String, reason: String) {
        self._code = code
        self.line = line
        let shown = InlineKeyRedaction.apply(text)
        self.text = shown.count > 200 ? String(shown.prefix(200)) + "…" : shown
        self.reason = reason
    }

    /// The stable error code, e.g. `missing_attribute`.
    public var code: ErrorCode { _code }

    public var description: String {
        line > 0 ? "\(code) at line \(line): \(reason) (in `\(text)`)" : "\(code): \(reason)"
    }

    /// The text does not start with `#EXTM3U`.
    public static func notAPlaylist(_ text: String) -> Self {
        .init(.notAPlaylist, line: 1, text: text, reason: "a playlist must start with #EXTM3U")
    }
    /// The bytes are not UTF-8 (RFC 8216bis 4.1).
    public static var notUTF8: Self {
        .init(.notUTF8, line: 0, text: "", reason: "playlist files must be encoded in UTF-8")
    }
    /// A tag whose value cannot be read at all.
    public static func malformedTag(line: Int, text: String, reason: String) -> Self {
        .init(.malformedTag, line: line, text: text, reason: reason)
    }
    /// A required attribute is absent.
    public static func missingAttribute(_ name: String, line: Int, text: String) -> Self {
        .init(.missingAttribute, line: line, text: text, reason: "required attribute \(name) is missing")
    }
    /// An attribute has a value of the wrong type or outside its range.
    public static func invalidAttributeValue(_ name: String, line: Int, text: String, reason: String) -> Self {
        .init(.invalidAttributeValue, line: line, text: text, reason: "attribute \(name): \(reason)")
    }
    /// A tag the playlist must contain is absent (EXT-X-TARGETDURATION, for example).
    public static func missingRequiredTag(_ tag: String, reason: String) -> Self {
        .init(.missingRequiredTag, line: 0, text: "", reason: "\(tag) is required: \(reason)")
    }
    /// EXTINF or EXT-X-STREAM-INF is not followed by a URI line.
    public static func missingURI(after tag: String, line: Int, text: String) -> Self {
        .init(.missingURI, line: line, text: text, reason: "\(tag) must be followed by a URI line")
    }
    /// Media segment tags and multivariant tags in one playlist (RFC 8216bis 4.1).
    public static func mixedPlaylistKinds(line: Int, text: String) -> Self {
        .init(
            .mixedPlaylistKinds,
            line: line,
            text: text,
            reason: "a playlist is either a media playlist or a multivariant playlist, not both"
        )
    }
    /// A tag that may appear once appears again.
    public static func duplicateTag(line: Int, text: String) -> Self {
        .init(.duplicateTag, line: line, text: text, reason: "this tag may appear only once")
    }
    /// A `{$name}` reference to a variable that no earlier EXT-X-DEFINE defines (RFC 8216bis 4.3).
    public static func undefinedVariable(_ name: String, line: Int, text: String) -> Self {
        .init(
            .undefinedVariable,
            line: line,
            text: text,
            reason: "variable \(name) is not defined by an EXT-X-DEFINE tag earlier in the playlist"
        )
    }
    /// Two EXT-X-DEFINE tags with one name (RFC 8216bis 4.4.2.3).
    public static func duplicateVariable(_ name: String, line: Int, text: String) -> Self {
        .init(.duplicateVariable, line: line, text: text, reason: "variable \(name) is defined twice")
    }
    /// An EXT-X-DEFINE with IMPORT or QUERYPARAM that cannot be satisfied.
    public static func unresolvableVariable(_ name: String, line: Int, text: String, reason: String) -> Self {
        .init(.undefinedVariable, line: line, text: text, reason: "variable \(name): \(reason)")
    }
    /// A byte range without an offset that does not follow a sub-range of the same resource.
    public static func invalidByteRange(line: Int, text: String, reason: String) -> Self {
        .init(.invalidByteRange, line: line, text: text, reason: reason)
    }
    /// The playlist exceeds a safety limit (size or line length).
    public static func tooLarge(_ reason: String) -> Self {
        .init(.tooLarge, line: 0, text: "", reason: reason)
    }
}

/// Something in a playlist that is accepted but deserves attention (an interoperability quirk, a tolerated deviation).
public struct PlaylistWarning: Hashable, Sendable, Codable, CustomStringConvertible {
    /// 1-based line number the warning concerns.
    public let line: Int
    /// What was noticed and how it was handled.
    public let message: String

    public init(line: Int, message: String) {
        self.line = line
        self.message = InlineKeyRedaction.apply(message)
    }

    public var description: String { line > 0 ? "line \(line): \(message)" : message }
}

extension PlaylistError: StowageError {
    /// What is wrong, on which line, and the offending text.
    public var message: String {
        line > 0 ? "line \(line): \(reason) (in `\(text)`)" : reason
    }
}

/// Hides the data of `data:` URIs in text meant for people, logs or files: such a URI can be a key written into the
/// playlist (`#EXT-X-KEY:...,URI="data:;base64,..."`). Errors and warnings pass their text through it.
public enum InlineKeyRedaction {
    /// `text` with everything after each `data:` up to the next quote or whitespace replaced by `…`.
    public static func apply(_ text: String) -> String {
        guard text.range(of: "data:", options: .caseInsensitive) != nil else { return text }
        var result = ""
        var rest = Substring(text)
        while let start = rest.range(of: "data:", options: .caseInsensitive) {
            result += rest[..<start.lowerBound] + "data:…"
            // The URI runs to its closing quote (or the end of its line).
            rest = rest[start.upperBound...].drop { $0 != "\"" && !$0.isWhitespace }
        }
        return result + rest
    }
}
