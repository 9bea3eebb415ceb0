import DownloadTestSupport
import Foundation
import KeyServer
import OfflinePackage
import StowageTestSupport
import Testing

/// `stowage download` without --audio and --subtitles chooses as AVFoundation does from the locale environment, says
/// what it chose and why, and records the reason in the manifest.
@Suite("stowage download: default media selection by locale")
struct LocaleSelectionTests {
    @Test("LANGUAGE/LANG pick the audio; a forced subtitle in that language comes along; C takes the playlist's defaults")
    func localeChoosesRenditions() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        // The demo's playlist plus a FORCED=YES French subtitle rendition (the French subtitles' playlist again).
        let master = fixture.originRoot.appendingPathComponent("\(fixture.assetId)/master.m3u8")
        var text = try String(contentsOf: master, encoding: .utf8)
        let forced =
            #"#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="fr",NAME="Français (forcé)",DEFAULT=NO,AUTOSELECT=YES,FORCED=YES,URI="subs/fr/index.m3u8""#
        let anchor = text.range(of: "#EXT-X-STREAM-INF")!
        text.insert(contentsOf: forced + "\n", at: anchor.lowerBound)
        try text.write(to: fixture.originRoot.appendingPathComponent("\(fixture.assetId)/forced.m3u8"), atomically: true, encoding: .utf8)
        // Five data directories are five devices of one account.
        var configuration = try fixture.keyServer.loadConfiguration()
        configuration.policies[configuration.defaultPolicy]?.maxDevices = nil
        try fixture.keyServer.saveConfiguration(configuration)
        let token = try await fixture.token()
        // One data directory per run: each downloads the same asset (its skd keys name it).
        @Sendable func home(_ name: String) -> URL { fixture.root.appendingPathComponent("home-\(name)", isDirectory: true) }
        @Sendable func manifest(_ name: String) throws -> PackageManifest {
            try PackageDirectory(assetId: fixture.assetId, in: DataDirectory(url: home(name))).readManifest()
        }
        try await fixture.withServers { origin, keyServer in
            let source = origin.appendingPathComponent("\(fixture.assetId)/forced.m3u8").absoluteString
            // The token goes in STOWAGE_TOKEN, with each run's locale.
            let common = ["--key-server", keyServer.absoluteString]

            // LANGUAGE lists Italian first (not offered), then French; LANG says English: French audio, no regular
            // subtitles (the audio is in the user's language), the forced French ones.
            let french = try await LibraryCommandTests.run(
                ["download", source] + common,
                home: home("fr"),
                environment: ["LANGUAGE": "it:fr", "LANG": "en_US.UTF-8"],
                token: token
            )
            #expect(french.status == 0, "\(french.output)")
            #expect(
                french.output.contains("audio-fr: audio Français fr")
                    && french.output.contains("your language (fr, from the locale (it, fr, en-US))"),
                "\(french.output)"
            )
            #expect(french.output.contains("forced subtitles in the audio's language (fr)"), "\(french.output)")
            let frenchManifest = try manifest("fr")
            #expect(frenchManifest.renditions.map(\.id).sorted() == ["audio-fr", "subtitles-fr", "video"])
            #expect(frenchManifest.renditions.first { $0.id == "subtitles-fr" }?.name == "Français (forcé)")
            #expect(frenchManifest.renditions.first { $0.id == "audio-fr" }?.selectedBecause?.hasPrefix("your language (fr") == true)

            // German from LC_ALL: German audio; there is no German subtitle, forced or not.
            let german = try await LibraryCommandTests.run(
                ["download", source] + common,
                home: home("de"),
                environment: ["LC_ALL": "de_DE.UTF-8"],
                token: token
            )
            #expect(german.status == 0, "\(german.output)")
            let germanManifest = try manifest("de")
            #expect(germanManifest.renditions.map(\.id).sorted() == ["audio-de", "video"])

            // Spanish, which nothing offers: the playlist's default English audio; subtitles would be Spanish (the audio
            // is not in the user's language) but there are none, and English has no forced ones: no subtitles.
            let spanish = try await LibraryCommandTests.run(
                ["download", source] + common,
                home: home("es"),
                environment: ["LANG": "es_ES.UTF-8"],
                token: token
            )
            #expect(spanish.status == 0, "\(spanish.output)")
            #expect(spanish.output.contains("the playlist's default (DEFAULT=YES); none in your languages (es-ES)"), "\(spanish.output)")
            let spanishManifest = try manifest("es")
            #expect(spanishManifest.renditions.map(\.id).sorted() == ["audio-en", "video"])

            // The C locale names no language: the DEFAULT=YES audio and subtitles, as before.
            let plain = try await LibraryCommandTests.run(
                ["download", source] + common,
                home: home("c"),
                environment: ["LANG": "C.UTF-8"],
                token: token
            )
            #expect(plain.status == 0, "\(plain.output)")
            #expect(plain.output.contains("no language set in LANGUAGE, LC_ALL, LC_MESSAGES or LANG"), "\(plain.output)")
            let plainManifest = try manifest("c")
            #expect(plainManifest.renditions.map(\.id).sorted() == ["audio-en", "subtitles-en", "video"])

            // An explicit choice overrides the locale.
            let asked = try await LibraryCommandTests.run(
                ["download", source, "--audio", "de", "--subtitles", "none"] + common,
                home: home("x"),
                environment: ["LANG": "fr_FR.UTF-8"],
                token: token
            )
            #expect(asked.status == 0, "\(asked.output)")
            #expect(asked.output.contains("asked for (de)"), "\(asked.output)")
            let askedManifest = try manifest("x")
            #expect(askedManifest.renditions.map(\.id).sorted() == ["audio-de", "video"])
        }
    }
}
