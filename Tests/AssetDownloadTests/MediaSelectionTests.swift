import Foundation
import HLS
import OfflinePackage
import Testing

@testable import AssetDownload

/// The default media selection, as AVFoundation makes it: the user's languages from the locale environment, audio in
/// the first of them the playlist offers, subtitles only when that audio is not in the user's language, forced
/// subtitles in the audio's language always; each choice with its reason.
@Suite("Media selection by locale")
struct MediaSelectionTests {
    @Test(
        "the user's languages: LANGUAGE's list, then the first of LC_ALL, LC_MESSAGES, LANG; C and POSIX name none",
        arguments: [
            (["LANG": "fr_FR.UTF-8"], ["fr-FR"]),
            (["LANGUAGE": "de:en_GB", "LANG": "fr_FR.UTF-8"], ["de", "en-GB", "fr-FR"]),
            (["LC_ALL": "pt_BR.utf8@euro", "LC_MESSAGES": "es_ES", "LANG": "it_IT"], ["pt-BR"]),
            (["LC_ALL": "", "LC_MESSAGES": "es_ES.UTF-8", "LANG": "it_IT"], ["es-ES"]),
            (["LANG": "C.UTF-8"], []),
            (["LANG": "POSIX", "LANGUAGE": ""], []),
            (["LANGUAGE": "sv:sv_SE", "LANG": "sv_SE.UTF-8"], ["sv", "sv-SE"]),
            ([:], []),
        ]
    )
    func preferredLanguages(_ environment: [String: String], _ expected: [String]) {
        #expect(MediaSelectionOptions.preferredLanguages(environment: environment) == expected)
    }

    @Test("a language matches the same tag, or the same language when one side names no region")
    func matching() {
        #expect(MediaSelectionOptions.language("en", matches: "en-US"))
        #expect(MediaSelectionOptions.language("en-US", matches: "en"))
        #expect(MediaSelectionOptions.language("fr-CA", matches: "FR_ca"))
        #expect(!MediaSelectionOptions.language("en-GB", matches: "en-US"))
        #expect(!MediaSelectionOptions.language("de", matches: "en"))
        #expect(!MediaSelectionOptions.language(nil, matches: "en"))
    }

    static func rendition(_ type: MediaType, _ language: String?, isDefault: Bool = false, forced: Bool = false) -> Rendition {
        Rendition(
            type: type,
            uri: "\(type.rawValue.lowercased())/\(language ?? "und")\(forced ? "-forced" : "").m3u8",
            groupID: "g",
            language: language,
            name: (language ?? "unnamed") + (forced ? " forced" : ""),
            isDefault: isDefault,
            forced: forced
        )
    }

    static let audio = [rendition(.audio, "en", isDefault: true), rendition(.audio, "fr"), rendition(.audio, "de-DE")]
    static let subtitles = [
        rendition(.subtitles, "en", isDefault: true), rendition(.subtitles, "fr"), rendition(.subtitles, "es"),
        rendition(.subtitles, "en", forced: true), rendition(.subtitles, "fr", forced: true),
    ]

    /// Audio then subtitles, as the planner chooses them.
    static func choose(_ languages: [String]) throws -> (audio: [String], subtitles: [String], reasons: [String]) {
        let audio = try DownloadPlanner.choose(Self.audio, .automatic(languages: languages), kind: .audio, audioLanguage: nil)
        let subtitles = try DownloadPlanner.choose(
            Self.subtitles,
            .automatic(languages: languages),
            kind: .subtitles,
            audioLanguage: audio.first?.rendition.language
        )
        return (audio.map(\.rendition.name), subtitles.map(\.rendition.name), (audio + subtitles).map(\.reason))
    }

    @Test("audio in the user's language: no subtitles but the forced ones in that language")
    func audioInYourLanguage() throws {
        let chosen = try Self.choose(["fr-FR"])
        #expect(chosen.audio == ["fr"])
        #expect(chosen.subtitles == ["fr forced"])
        #expect(chosen.reasons == ["your language (fr-FR, from the locale)", "forced subtitles in the audio's language (fr)"])
        // A region on the rendition only: de-DE is German.
        #expect(try Self.choose(["de"]).audio == ["de-DE"])
    }

    @Test("no audio in the user's language: the playlist's default audio, subtitles in the user's language, forced ones in the audio's")
    func subtitlesForAnotherLanguage() throws {
        let chosen = try Self.choose(["es-MX", "it"])
        #expect(chosen.audio == ["en"])
        #expect(chosen.subtitles == ["es", "en forced"])
        #expect(chosen.reasons[0] == "the playlist's default (DEFAULT=YES); none in your languages (es-MX, it)")
        #expect(chosen.reasons[1] == "your language (es-MX); the audio is in en")
    }

    @Test("the first of the user's languages the playlist offers wins")
    func orderOfPreference() throws {
        let chosen = try Self.choose(["it", "de", "fr"])
        #expect(chosen.audio == ["de-DE"])
        #expect(chosen.subtitles.isEmpty)
        #expect(chosen.reasons == ["your language (de, from the locale (it, de, fr))"])
    }

    @Test("no language in the locale: DEFAULT=YES audio and subtitles, and forced subtitles in the audio's language")
    func noLanguage() throws {
        let chosen = try Self.choose([])
        #expect(chosen.audio == ["en"])
        #expect(chosen.subtitles == ["en", "en forced"])
        #expect(chosen.reasons[0].contains("no language set in LANGUAGE, LC_ALL, LC_MESSAGES or LANG"))
    }

    @Test("explicit choices keep their meaning and say so")
    func explicit() throws {
        let asked = try DownloadPlanner.choose(Self.subtitles, .languages(["fr"]), kind: .subtitles, audioLanguage: "en")
        #expect(asked.map(\.rendition.name) == ["fr", "fr forced"])
        #expect(asked.allSatisfy { $0.reason == "asked for (fr)" })
        let defaults = try DownloadPlanner.choose(Self.subtitles, .defaults, kind: .subtitles, audioLanguage: "en")
        #expect(defaults.map(\.rendition.name) == ["en"])
        // Asked-for languages match as the automatic choice does: a region asked for takes the bare language, a bare
        // language takes any region, another region of the language does not.
        let regional = try DownloadPlanner.choose(Self.audio, .languages(["en-US", "de"]), kind: .audio, audioLanguage: nil)
        #expect(regional.map(\.rendition.language) == ["en", "de-DE"])
        #expect(throws: DownloadError.self) { try DownloadPlanner.choose(Self.audio, .languages(["de-AT"]), kind: .audio, audioLanguage: nil) }
    }
}
