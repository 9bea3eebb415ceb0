import Foundation

/// Which variant and renditions a download takes (what `AVAssetDownloadConfiguration` and its media selections say
/// on iOS, and what Media3's track selection parameters say on Android).
public struct MediaSelectionOptions: Sendable, Hashable, Codable {
    /// The variant stream to take.
    public enum Variant: Sendable, Hashable, Codable {
        /// The highest BANDWIDTH (the default, as `AVAssetDownloadTaskMinimumRequiredMediaBitrateKey` unset).
        case highest
        /// The lowest variant at or above this many bits per second (the highest if none reaches it), and at or below
        /// `maximum` when given.
        case bitrate(minimum: Int?, maximum: Int?)
    }

    /// Which renditions of a group to take.
    public enum Renditions: Sendable, Hashable, Codable {
        /// Those marked DEFAULT=YES (for audio, the first of the group if none is).
        case defaults
        /// Every rendition of the group.
        case all
        /// Those whose LANGUAGE matches one of these tags (`en` matches `en-US`), in this order.
        case languages([String])
        /// None.
        case none
        /// What AVFoundation picks when nothing is asked for, given the user's languages in order of preference
        /// (``MediaSelectionOptions/preferredLanguages(environment:)``): audio in the first of them the group offers,
        /// else the DEFAULT=YES rendition (else the first); subtitles in the user's language only when that audio is
        /// not in it, and FORCED=YES subtitles in the audio's language always. With no languages: the DEFAULT=YES
        /// renditions, and the forced subtitles of the audio's language.
        case automatic(languages: [String])

        /// Parses a command-line value: `all`, `default`, `none`, or comma-separated language tags.
        public init(argument: String) {
            switch argument.lowercased() {
            case "all": self = .all
            case "default", "defaults": self = .defaults
            case "none", "": self = .none
            default:
                self = .languages(argument.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            }
        }
    }

    /// The user's languages as the locale environment gives them, for ``Renditions/automatic(languages:)``: the
    /// entries of `LANGUAGE` (colon-separated, as gettext reads it), then the first of `LC_ALL`, `LC_MESSAGES` and
    /// `LANG` that is set, as BCP 47 tags (`fr_FR.UTF-8@euro` becomes `fr-FR`); `C` and `POSIX` name no language.
    public static func preferredLanguages(environment: [String: String]) -> [String] {
        func tag(_ locale: Substring) -> String? {
            // `language_REGION.codeset@modifier`: the part before the codeset and modifier.
            let text = locale.prefix { $0 != "." && $0 != "@" }.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "_", with: "-")
            guard !text.isEmpty, text != "C", text != "POSIX", text.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else { return nil }
            return text
        }
        var languages = (environment["LANGUAGE"] ?? "").split(separator: ":").compactMap(tag)
        if let locale = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy.compactMap({ environment[$0] }).first(where: { !$0.isEmpty }),
            let primary = tag(Substring(locale))
        {
            languages.append(primary)
        }
        var seen: Set<String> = []
        return languages.filter { seen.insert($0.lowercased()).inserted }
    }

    /// Whether a rendition's LANGUAGE is `wanted`: the same tag, or the same language when either names no region or
    /// script (`en` and `en-US`, `fr-CA` and `fr`; not `en-GB` and `en-US`).
    public static func language(_ language: String?, matches wanted: String) -> Bool {
        guard let language else { return false }
        let have = language.lowercased().replacingOccurrences(of: "_", with: "-")
        let want = wanted.lowercased().replacingOccurrences(of: "_", with: "-")
        if have == want { return true }
        let havePrimary = have.split(separator: "-").first.map(String.init) ?? have
        let wantPrimary = want.split(separator: "-").first.map(String.init) ?? want
        return havePrimary == wantPrimary && (!have.contains("-") || !want.contains("-"))
    }

    public var variant: Variant
    public var audio: Renditions
    public var subtitles: Renditions

    public init(variant: Variant = .highest, audio: Renditions = .defaults, subtitles: Renditions = .defaults) {
        self.variant = variant
        self.audio = audio
        self.subtitles = subtitles
    }
}
