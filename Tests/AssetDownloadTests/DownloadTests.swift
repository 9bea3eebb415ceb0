import AssetDownload
import DownloadTestSupport
import Foundation
import HLS
import KeyDelivery
import OfflinePackage
import OriginServer
import Testing

@Suite("Downloads over loopback")
struct DownloadTests {
    @Test("a SAMPLE-AES asset with two audio languages and subtitles downloads byte for byte, keys stored under a lease")
    func downloadsWholeAsset() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        let log = OriginRequestLog()
        try await fixture.withServers(log: log) { origin, keyServer in
            let session = try fixture.session()
            let request = DownloadRequest(
                url: fixture.sourceURL(origin),
                assetId: fixture.assetId,
                title: "Demo",
                selection: MediaSelectionOptions(audio: .languages(["en", "fr"]), subtitles: .all),
                keyServerURL: keyServer.absoluteString,
                token: try await fixture.token()
            )
            let (events, result) = await DownloadFixture.run(try session.start(request))
            try await session.shutdown()
            let manifest = try result.get()
            #expect(manifest.isComplete)
            #expect(manifest.renditions.map(\.id) == ["video", "audio-en", "audio-fr", "subtitles-en", "subtitles-fr"])
            #expect(manifest.rendition(id: "video")?.resolution == "640x360")
            try fixture.assertPackageMatchesSource(manifest, origin: origin)
            // Each file fetched exactly once.
            for file in manifest.files {
                let path = String(file.sourceURL.dropFirst(origin.absoluteString.count))
                #expect(log.count(path: path) == 1, "\(path)")
            }
            // Events: location, selections, keys, progress to 1, each rendition, finished.
            #expect(events.contains { if case .willDownload = $0 { true } else { false } })
            #expect(events.contains { if case .keysAcquired(let lease, 1) = $0 { lease != nil } else { false } })
            let fractions = events.compactMap { if case .progress(let p) = $0 { p.fraction } else { nil } }
            #expect(fractions.last == 1)
            #expect(zip(fractions, fractions.dropFirst()).allSatisfy { $0 <= $1 })
            #expect(events.filter { if case .renditionCompleted = $0 { true } else { false } }.count == 5)
            // Loaded time ranges grow to one range covering each rendition.
            if case .progress(let last) = events.last(where: { if case .progress = $0 { true } else { false } }) {
                for rendition in last.renditions { #expect(rendition.loadedTimeRanges == [[0, rendition.durationSeconds]]) }
            }
            // What the source offers beyond the package is recorded for `stowage info`.
            let available = manifest.availableRenditions ?? []
            #expect(available.contains { $0.kind == .audio && $0.language == "de" })
            #expect(available.contains { $0.kind == .video && $0.resolution == "320x180" })
            guard case .finished = events.last else {
                Issue.record("last event is \(String(describing: events.last))")
                return
            }
            // Keys: a persistent lease held in the key store, its content key unwrappable offline.
            let store = try KeyStore(dataDirectory: fixture.clientDirectory.url, clock: SystemClock())
            let device = try DeviceIdentity.loadOrCreate(in: fixture.clientDirectory.url)
            let keys = try PackageKeyring(store: store, device: device).keys(for: manifest, at: Int64(Date().timeIntervalSince1970))
            #expect(Set(keys.keys) == Set(manifest.keys.map(\.keyId)))
            // Local playlists: relative URIs, stowage-key:// key URIs, nothing pointing at the origin.
            for rendition in manifest.renditions {
                let text = try String(contentsOf: fixture.package.url(forRelativePath: rendition.playlist), encoding: .utf8)
                #expect(!text.contains("http://"))
                #expect(!text.contains("skd://"))
                if rendition.kind != .subtitles { #expect(text.contains("stowage-key://")) }
            }
            let master = try String(contentsOf: fixture.package.url(forRelativePath: "master.m3u8"), encoding: .utf8)
            #expect(master.contains("audio-fr/index.m3u8") && !master.contains("audio/de"))
            // W3C access log: header directives and one line per request.
            let access = try String(contentsOf: fixture.package.accessLogURL, encoding: .utf8)
            #expect(access.hasPrefix("#Version: 1.0\n"))
            #expect(access.contains("#Fields: date time cs-method cs-uri sc-status sc-bytes time-taken x-retries x-rendition x-throughput"))
            #expect(access.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == manifest.files.count)
            // The state: completed.
            #expect(try session.store.task(fixture.assetId)?.state == .completed)
        }
    }

    @Test("variant by bitrate, renditions by language, default or all")
    func mediaSelection() async throws {
        let fixture = try await DownloadFixture.make()
        defer { fixture.remove() }
        for asset in ["low", "all", "nope"] { try await fixture.addAsset(asset) }
        try await fixture.withServers { origin, keyServer in
            let session = try fixture.session()
            let token = try await fixture.token()
            let request = DownloadRequest(
                url: fixture.sourceURL(origin, asset: "low"),
                assetId: "low",
                selection: MediaSelectionOptions(variant: .bitrate(minimum: 300_000, maximum: nil), audio: .defaults, subtitles: .none),
                keyServerURL: keyServer.absoluteString,
                token: token
            )
            let (_, result) = await DownloadFixture.run(try session.start(request))
            let manifest = try result.get()
            #expect(manifest.renditions.map(\.id) == ["video", "audio-en"])
            #expect(manifest.rendition(id: "video")?.resolution == "320x180")
            // No subtitles held: the local variant names no subtitle group.
            let package = try PackageDirectory(assetId: "low", in: fixture.clientDirectory)
            let master = try String(contentsOf: package.url(forRelativePath: "master.m3u8"), encoding: .utf8)
            #expect(!master.contains("SUBTITLES="))
            #expect(master.contains("AUDIO=\"aud\""))

            let all = DownloadRequest(
                url: fixture.sourceURL(origin, asset: "all"),
                assetId: "all",
                selection: MediaSelectionOptions(variant: .bitrate(minimum: nil, maximum: 100_000), audio: .all, subtitles: .defaults),
                keyServerURL: keyServer.absoluteString,
                token: token
            )
            let allManifest = try await DownloadFixture.run(try session.start(all)).result.get()
            #expect(allManifest.renditions.map(\.id) == ["video", "audio-en", "audio-fr", "audio-de", "subtitles-en"])
            #expect(allManifest.rendition(id: "video")?.resolution == "320x180")

            let none = DownloadRequest(
                url: fixture.sourceURL(origin, asset: "nope"),
                assetId: "nope",
                selection: MediaSelectionOptions(audio: .languages(["ja"])),
                keyServerURL: keyServer.absoluteString,
                token: token
            )
            let failed = await DownloadFixture.run(try session.start(none))
            #expect(throws: DownloadError.noMatchingRendition(kind: "audio", requested: ["ja"], available: ["en", "fr", "de"])) {
                try failed.result.get()
            }
            try await session.shutdown()
        }
    }
}
