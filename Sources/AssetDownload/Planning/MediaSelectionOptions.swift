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

    public var variant: Variant
    public var audio: Renditions
    public var subtitles: Renditions

    public init(variant: Variant = .highest, audio: Renditions = .defaults, subtitles: Renditions = .defaults) {
        self.variant = variant
        self.audio = audio
        self.subtitles = subtitles
    }
}
