import AssetDownload
import DownloadTestSupport
import Foundation
import KeyServer
import OfflinePackage
import OriginServer
import Playback
import StowageLibrary
import StowageTestSupport
import Testing

/// `stowage play` while the source is reachable, as AVPlayer plays an offline asset online: the served multivariant
/// playlist offers what the package does not hold beside what it does, and those renditions stream from the origin,
/// decrypted with a streaming lease; offline (or `--offline`) only what is stored is offered.
@Suite("Online renditions beside offline ones", .timeLimit(.minutes(5)))
struct OnlineRenditionsTests {
    /// Downloads the fixture with English audio only, no subtitles, and returns the library.
    static func downloadEnglishOnly(
        _ fixture: DownloadFixture,
        origin: URL,
        keyServer: URL,
        into directory: DataDirectory? = nil
    ) async throws -> (OfflineLibrary, PackageManifest) {
        let library = try OfflineLibrary(dataDirectory: directory ?? fixture.clientDirectory)
        let task = try await library.download(
            DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                selection: MediaSelectionOptions(audio: .languages(["en"]), subtitles: .none),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token()
            )
        )
        return (library, try await task.result())
    }

    static func clearTwin(_ path: String) -> String {
        DownloadFixture.demoFixture.deletingLastPathComponent().appendingPathComponent(path).path
    }

    @Test("online: the master offers French, German and the other variant; French audio and 180p video equal the clear twin's")
    func onlineRenditionsPlayBesideStoredOnes() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        // French has a key of its own, which the stored lease (English and video) does not hold: playing it online
        // needs a streaming lease.
        let frenchKey = try await fixture.repackageWithOwnKey("audio/fr/index.m3u8")
        let log = OriginRequestLog()
        try await fixture.withServers(log: log) { origin, keyServer in
            let (library, manifest) = try await Self.downloadEnglishOnly(fixture, origin: origin, keyServer: keyServer)
            #expect(manifest.renditions.map(\.id).sorted() == ["audio-en", "video"])
            #expect(!manifest.keys.contains { $0.keyId == frenchKey })
            let downloaded = log.entries.count
            let leasesBefore = try library.leases().count

            let playback = try await library.play(assetId: fixture.assetId)
            #expect(Set(playback.onlineRenditions).isSuperset(of: ["online-audio-fr", "online-audio-de", "online-video-359319"]))
            // `stowage info` and `stowage play` agree on what is online only.
            let info = try library.info(assetId: fixture.assetId)
            #expect(Set(info.selections.filter { $0.availability == .onlineOnly }.map(\.renditionId)) == Set(playback.onlineRenditions))
            let master = try await PlayWhileDownloadingTests.fetch(playback.address.sessionMultivariantURL)
            #expect(master.status == 200)
            #expect(master.body.contains("online-audio-fr/index.m3u8") && master.body.contains("audio-en/index.m3u8"))
            #expect(master.body.contains("com.stowage.online"))
            // The stored English is the default; online renditions are offered, not picked by themselves.
            let english = try #require(master.body.split(separator: "\n").first { $0.contains("audio-en/index.m3u8") })
            #expect(english.contains("DEFAULT=YES"))
            let french = try #require(master.body.split(separator: "\n").first { $0.contains("online-audio-fr/") })
            #expect(french.contains("DEFAULT=NO"))
            #expect(!master.body.contains("EXT-X-SESSION-KEY"))
            // The online playlist is served without its key tags, like a stored one (the segments come clear).
            let frenchPlaylist = try await PlayWhileDownloadingTests.fetch(
                playback.address.sessionURL.appendingPathComponent("online-audio-fr/index.m3u8")
            )
            #expect(frenchPlaylist.status == 200 && frenchPlaylist.body.contains("#EXTINF"))
            #expect(!frenchPlaylist.body.contains("EXT-X-KEY") && !frenchPlaylist.body.contains("skd://"))

            let session = playback.address.sessionMultivariantURL.absoluteString
            let playedFrench = try await PlayWhileDownloadingTests.frames(session, map: "0:a:m:language:fr")
            let playedLow = try await PlayWhileDownloadingTests.frames(session, map: "0:p:1:v:0")
            await playback.stop()
            #expect(!playedFrench.isEmpty && !playedLow.isEmpty)
            #expect(playedFrench == (try await PlayWhileDownloadingTests.frames(Self.clearTwin("audio/fr/index.m3u8"), map: "0:a:0")))
            #expect(playedLow == (try await PlayWhileDownloadingTests.frames(Self.clearTwin("video/180p/index.m3u8"), map: "0:v:0")))

            // The online renditions came from the origin, and nothing of them was kept: no file, no stored lease.
            let streamed = log.entries.dropFirst(downloaded).map(\.path)
            #expect(streamed.contains { $0.contains("/audio/fr/") && !$0.hasSuffix(".m3u8") })
            let entries = try FileManager.default.contentsOfDirectory(atPath: fixture.package.url.path)
            #expect(!entries.contains { $0.hasPrefix("online-") }, "\(entries)")
            #expect(try library.leases().count == leasesBefore)
            // The French key came in a streaming lease (journalled, never stored).
            let journal = try library.auditEntries().map(\.detail).joined(separator: "\n")
            #expect(journal.contains("streaming"), "\(journal)")
            #expect(try !String(contentsOf: fixture.package.errorLogURL, encoding: .utf8).contains("online_"))

            // --offline: only what is stored, even with the origin up.
            let offline = try await library.play(assetId: fixture.assetId, online: false)
            let offlineMaster = try await PlayWhileDownloadingTests.fetch(offline.address.sessionMultivariantURL)
            await offline.stop()
            #expect(offline.onlineRenditions.isEmpty)
            #expect(!offlineMaster.body.contains("online-") && !offlineMaster.body.contains("LANGUAGE=\"fr\""))
            await library.close()
        }
    }

    @Test("origin stopped: the master lists only English, and the stored renditions play")
    func offlineOffersOnlyWhatIsStored() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let library = try await fixture.withServers { origin, keyServer in
            try await Self.downloadEnglishOnly(fixture, origin: origin, keyServer: keyServer).0
        }
        let playback = try await library.play(assetId: fixture.assetId)
        let master = try await PlayWhileDownloadingTests.fetch(playback.address.sessionMultivariantURL)
        let audio = try await PlayWhileDownloadingTests.frames(playback.address.sessionMultivariantURL.absoluteString, map: "0:a:0")
        await playback.stop()
        #expect(playback.onlineRenditions.isEmpty)
        let languages = master.body.split(separator: "\n").filter { $0.hasPrefix("#EXT-X-MEDIA") }.compactMap { line in
            line.split(separator: ",").first { $0.hasPrefix("LANGUAGE=") }.map(String.init)
        }
        #expect(languages == ["LANGUAGE=\"en\""], "\(master.body)")
        #expect(master.body.split(separator: "\n").filter { $0.hasPrefix("#EXT-X-STREAM-INF") }.count == 1)
        #expect(audio == (try await PlayWhileDownloadingTests.frames(Self.clearTwin("audio/en/index.m3u8"), map: "0:a:0")))
        await library.close()
    }

    @Test("stream limit reached: French is 403 online_key_refused, English still plays; a file: rendition is never offered")
    func aRefusedStreamingLeaseLeavesTheStoredRenditionsPlaying() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        try await fixture.repackageWithOwnKey("audio/fr/index.m3u8")
        // One stream at a time for the account: persistent leases (offline) are still granted.
        var configuration = try fixture.keyServer.loadConfiguration()
        configuration.policies[configuration.defaultPolicy]?.maxStreams = 1
        try fixture.keyServer.saveConfiguration(configuration)
        try await fixture.withServers { origin, keyServer in
            let (library, manifest) = try await Self.downloadEnglishOnly(fixture, origin: origin, keyServer: keyServer)
            // Another device of the account streams French first and holds the one stream.
            let other = DataDirectory(url: fixture.root.appendingPathComponent("other-device"))
            let (otherLibrary, _) = try await Self.downloadEnglishOnly(fixture, origin: origin, keyServer: keyServer, into: other)
            let otherPlayback = try await otherLibrary.play(assetId: fixture.assetId)
            let otherFrench = try await PlayWhileDownloadingTests.frames(
                otherPlayback.address.sessionMultivariantURL.absoluteString,
                map: "0:a:m:language:fr"
            )
            await otherPlayback.stop()
            await otherLibrary.close()
            #expect(!otherFrench.isEmpty)

            // A hostile source adds a rendition that names a local file.
            let masterURL = fixture.originRoot.appendingPathComponent("\(fixture.assetId)/master.m3u8")
            var master = try String(contentsOf: masterURL, encoding: .utf8)
            master = master.replacingOccurrences(
                of: "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud\",LANGUAGE=\"de\"",
                with: "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud\",LANGUAGE=\"xx\",NAME=\"Local\",URI=\"file:///etc/passwd\"\n"
                    + "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud\",LANGUAGE=\"de\""
            )
            try master.write(to: masterURL, atomically: true, encoding: .utf8)

            let playback = try await library.play(assetId: fixture.assetId)
            #expect(playback.onlineRenditions.contains("online-audio-fr"))
            #expect(!playback.onlineRenditions.contains { $0.contains("xx") || $0.contains("local") })
            let served = try await PlayWhileDownloadingTests.fetch(playback.address.sessionMultivariantURL)
            #expect(!served.body.contains("passwd") && !served.body.contains("file:"))
            // The French playlist is refused (players skip the rendition), and so is a segment asked for directly.
            let refused = try await PlayWhileDownloadingTests.fetch(playback.address.sessionURL.appendingPathComponent("online-audio-fr/index.m3u8"))
            let segment = try #require(manifest.renditions.first { $0.kind == .audio }?.segments.first?.file?.path.split(separator: "/").last)
            let refusedSegment = try await PlayWhileDownloadingTests.fetch(
                playback.address.sessionURL.appendingPathComponent("online-audio-fr/\(segment)")
            )
            let english = try await PlayWhileDownloadingTests.frames(playback.address.sessionMultivariantURL.absoluteString, map: "0:a:m:language:en")
            await playback.stop()
            #expect(refused.status == 403 && refused.body.contains("online_key_refused"), "\(refused)")
            #expect(refusedSegment.status == 403 && refusedSegment.body.contains("online_key_refused"), "\(refusedSegment)")
            let audio = try #require(manifest.renditions.first { $0.kind == .audio })
            #expect(audio.language == "en")
            #expect(english == (try await PlayWhileDownloadingTests.frames(Self.clearTwin("audio/en/index.m3u8"), map: "0:a:0")))
            #expect(try String(contentsOf: fixture.package.errorLogURL, encoding: .utf8).contains("online_key_refused"))
            await library.close()
        }
    }

    @Test("a source naming another asset's key: refused before any key request; a segment gone at the source is 502")
    func anotherAssetsKeyIsNeverAskedFor() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        // The key server holds "other-asset" too, and the token would be good for it (wildcard assets).
        try await fixture.repackageWithOwnKey("audio/fr/index.m3u8", keyAsset: "other-asset")
        try await fixture.withServers { origin, keyServer in
            let (library, _) = try await Self.downloadEnglishOnly(fixture, origin: origin, keyServer: keyServer)
            let playback = try await library.play(assetId: fixture.assetId)
            #expect(playback.onlineRenditions.contains("online-audio-fr"))
            let refused = try await PlayWhileDownloadingTests.fetch(playback.address.sessionURL.appendingPathComponent("online-audio-fr/index.m3u8"))
            let german = try await PlayWhileDownloadingTests.fetch(playback.address.sessionURL.appendingPathComponent("online-audio-de/index.m3u8"))
            // A German segment the source no longer has: 502, naming the source URL, what it answered and what to do.
            let firstGerman = try #require(german.body.split(separator: "\n").first { !$0.hasPrefix("#") })
            let sourceSegment = try #require(
                try String(contentsOf: fixture.originRoot.appendingPathComponent("\(fixture.assetId)/audio/de/index.m3u8"), encoding: .utf8)
                    .split(separator: "\n").first { !$0.hasPrefix("#") && !$0.isEmpty }
            )
            try FileManager.default.removeItem(at: fixture.originRoot.appendingPathComponent("\(fixture.assetId)/audio/de/\(sourceSegment)"))
            let gone = try await PlayWhileDownloadingTests.fetch(playback.address.sessionURL.appendingPathComponent("online-audio-de/\(firstGerman)"))
            await playback.stop()
            #expect(gone.status == 502, "\(gone)")
            #expect(gone.body.contains("online_unavailable") && gone.body.contains("HTTP 404") && gone.body.contains("--offline"), "\(gone)")
            #expect(refused.status == 403 && refused.body.contains("online_key_refused") && refused.body.contains("other-asset"), "\(refused)")
            // German shares the package's key: it plays on the stored lease, no streaming lease needed.
            #expect(german.status == 200)
            let journal = try library.auditEntries().map(\.detail).joined(separator: "\n")
            #expect(!journal.contains("streaming") && !journal.contains("other-asset"), "\(journal)")
            await library.close()
        }
    }
}
