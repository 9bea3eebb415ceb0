public import Foundation

extension TestPackages {
    /// A clear multivariant playlist with alternate audio (and WebVTT subtitles when the demo fixture is there).
    ///
    /// `Fixtures/demo/master.m3u8` when present (two video variants, audio `en`/`fr`/`de` at different tones, subtitles
    /// `en`/`fr`); otherwise one made in `root` over `Fixtures/media/shaka/ts-clear-aac`: one variant, audio `en` and
    /// `fr` (the same tone), subtitles `en`.
    ///
    /// - Parameters:
    ///   - root: where the fallback is made.
    ///   - preferDemo: use `Fixtures/demo` when it is there (pass false to exercise the fallback).
    /// - Returns: the multivariant playlist and, by language, the clear media playlist of each audio rendition.
    public static func alternateAudioFixture(in root: URL, preferDemo: Bool = true) throws -> (master: URL, audio: [String: URL]) {
        let demo = fixturesURL.appendingPathComponent("demo/master.m3u8")
        if preferDemo, FileManager.default.fileExists(atPath: demo.path) {
            let folder = demo.deletingLastPathComponent()
            return (
                demo,
                [
                    "en": folder.appendingPathComponent("audio/en/index.m3u8"),
                    "fr": folder.appendingPathComponent("audio/fr/index.m3u8"),
                    "de": folder.appendingPathComponent("audio/de/index.m3u8"),
                ]
            )
        }
        let folder = root.appendingPathComponent("alternate-audio-\(UUID().uuidString.prefix(8))", isDirectory: true)
        let manager = FileManager.default
        try manager.createDirectory(at: folder, withIntermediateDirectories: true)
        let source = mediaFixture("shaka/ts-clear-aac")
        for name in try manager.contentsOfDirectory(atPath: source.path) where name != "master.m3u8" {
            try manager.copyItem(at: source.appendingPathComponent(name), to: folder.appendingPathComponent(name))
        }
        let french = folder.appendingPathComponent("fr", isDirectory: true)
        try manager.createDirectory(at: french, withIntermediateDirectories: true)
        for name in ["audio.m3u8", "audio_1.ts", "audio_2.ts", "audio_3.ts"] {
            try manager.copyItem(at: source.appendingPathComponent(name), to: french.appendingPathComponent(name))
        }
        let subtitles = folder.appendingPathComponent("subs", isDirectory: true)
        try manager.createDirectory(at: subtitles, withIntermediateDirectories: true)
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<3 {
            let cue =
                "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:126000,LOCAL:00:00:00.000\n\n00:00:0\(index * 2).000 --> 00:00:0\(index * 2 + 1).000\nCue \(index)\n"
            try Data(cue.utf8).write(to: subtitles.appendingPathComponent("sub_\(index).vtt"))
            playlist += "#EXTINF:2.000,\nsub_\(index).vtt\n"
        }
        playlist += "#EXT-X-ENDLIST\n"
        try Data(playlist.utf8).write(to: subtitles.appendingPathComponent("index.m3u8"))
        let master = """
            #EXTM3U
            #EXT-X-VERSION:4
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",LANGUAGE="en",NAME="English",DEFAULT=YES,AUTOSELECT=YES,URI="audio.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",LANGUAGE="fr",NAME="French",DEFAULT=NO,AUTOSELECT=YES,URI="fr/audio.m3u8"
            #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="en",NAME="English",DEFAULT=YES,AUTOSELECT=YES,URI="subs/index.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=168329,CODECS="avc1.4d400b,mp4a.40.2",RESOLUTION=192x108,AUDIO="aud",SUBTITLES="subs"
            video.m3u8

            """
        let masterURL = folder.appendingPathComponent("master.m3u8")
        try Data(master.utf8).write(to: masterURL)
        return (masterURL, ["en": folder.appendingPathComponent("audio.m3u8"), "fr": french.appendingPathComponent("audio.m3u8")])
    }
}
