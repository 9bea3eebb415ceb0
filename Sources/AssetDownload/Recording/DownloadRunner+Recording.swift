import Foundation
import HLS
import KeyDelivery
import OfflinePackage
import StowageCore

extension DownloadRunner {
    /// Records every live rendition until each one ends (EXT-X-ENDLIST, `--duration`), `--until` comes or the user
    /// stops it; then ends the recording in the package and closes the work queue, so the workers finish what is
    /// left and the task completes like a VOD download.
    func record(
        _ recording: RecordingPackage,
        queue: WorkQueue,
        tracker: ProgressTracker,
        request: DownloadRequest,
        keys: RecordingKeys,
        startKeys: [PackageKey]
    ) async throws {
        let renditions = await recording.liveRenditions
        let reasons = try await withThrowingTaskGroup(of: PackageRecording.EndReason?.self) { group in
            // The keys the package listed when this run began (all of them for a new recording; any a killed run had
            // not obtained yet); the files are fetched meanwhile.
            group.addTask {
                try await keys.ensure(startKeys)
                try store.setKeysAcquired(assetId, true, at: now)
                return nil
            }
            for (id, url) in renditions {
                group.addTask {
                    try await recordRendition(id, url: url, recording: recording, queue: queue, tracker: tracker, request: request, keys: keys)
                }
            }
            var reasons: [PackageRecording.EndReason] = []
            for try await reason in group {
                if let reason { reasons.append(reason) }
            }
            return reasons
        }
        let reason = reasons.first { $0 != .endList } ?? .endList
        let manifest = try await recording.end(reason, at: now)
        if let ended = manifest.recording { events.yield(.recordingEnded(ended)) }
        await tracker.update(manifest, recording: false)
        await queue.close()
    }

    /// Reloads one rendition's playlist at the cadence of RFC 8216bis 6.3.4 (the target duration after a reload that
    /// changed, half of it after one that did not, measured from the start of the reload), or at once with a
    /// blocking reload (`_HLS_msn`) when the server offers it; each new segment goes to the workers once its keys are
    /// held. After a reload that found segments missing, reloads come sooner (halving, down to 0.5 s): a recorder
    /// that loses media to a stream outrunning its target duration gains nothing from waiting.
    ///
    /// Keys and files are handed on by a second task, in the order the reloads found them, so a key server that
    /// answers slowly never holds up the reloads (a live window leaves no time to wait).
    private func recordRendition(
        _ id: String,
        url: URL,
        recording: RecordingPackage,
        queue: WorkQueue,
        tracker: ProgressTracker,
        request: DownloadRequest,
        keys: RecordingKeys
    ) async throws -> PackageRecording.EndReason {
        let (updates, continuation) = AsyncStream.makeStream(of: RecordingPackage.Update.self)
        return try await withThrowingTaskGroup(of: PackageRecording.EndReason?.self) { group in
            group.addTask {
                for await update in updates {
                    if !update.newKeys.isEmpty { try await keys.ensure(update.newKeys) }
                    guard !update.newFiles.isEmpty else { continue }
                    let manifest = await recording.manifest
                    await tracker.update(manifest, recording: true)
                    let estimate = manifest.rendition(id: id).map { $0.files.isEmpty ? 0 : $0.expectedBytes / Int64($0.files.count) } ?? 0
                    await queue.append(update.newFiles.map { (id, $0, $0.byteRange?.length ?? estimate) })
                }
                return nil
            }
            group.addTask {
                defer { continuation.finish() }
                return try await reload(id, url: url, recording: recording, request: request) { continuation.yield($0) }
            }
            var reason = PackageRecording.EndReason.stopped
            for try await result in group {
                if let result { reason = result }
            }
            return reason
        }
    }

    /// The reloads of one rendition, each merged into the recording and handed to `found`.
    private func reload(
        _ id: String,
        url: URL,
        recording: RecordingPackage,
        request: DownloadRequest,
        found: @Sendable (RecordingPackage.Update) -> Void
    ) async throws -> PackageRecording.EndReason {
        let fetcher = PlaylistFetcher(
            loader: PlaylistLoader(routes: session.http, headers: request.scopedHeaders, timeoutSeconds: session.configuration.headTimeout),
            retry: session.configuration.retry
        )
        let limit = await recording.manifest.recording?.maximumDuration
        let until = await recording.manifest.recording?.until
        var nextLoad = ContinuousClock.now
        var canBlock = false
        var catchUp: Double?
        var behind = 0
        while true {
            if let limit, await recording.recordedDuration(of: id) >= limit { return .duration }
            while ContinuousClock.now < nextLoad {
                if recordingControl.stopRequested { return .stopped }
                if let until, now >= until { return .until }
                try await Task.sleep(for: min(.milliseconds(100), nextLoad - ContinuousClock.now))
            }
            if recordingControl.stopRequested { return .stopped }
            if let until, now >= until { return .until }
            let started = ContinuousClock.now
            var target = url
            if canBlock, let last = await recording.lastSequence(of: id) { target = Self.blockingReloadURL(url, nextSequence: last + 1) }
            // A reload that waits (a blocking reload, or retries while the server is down) ends when the user stops the
            // recording: Ctrl-C is answered at once, not after the network-down grace.
            let reloadURL = target
            let reloaded: LoadedPlaylist?
            do {
                reloaded = try await untilStopped { try await fetcher.load(reloadURL) }
            } catch DownloadError.playlist(let code, let message, let subject) {
                // Retries are spent (the server or the network stayed down past the grace): the recording stops, and
                // the message says that what was recorded is kept and how to go on.
                throw DownloadError.playlist(
                    code: code,
                    message:
                        "\(message); the recording of \(assetId) stopped and keeps what it recorded: `stowage resume \(assetId)` "
                        + "records on from the live edge (what was missed meanwhile becomes a marked gap), `stowage stop \(assetId)` "
                        + "ends it with what it has",
                    subject: subject
                )
            }
            guard let loaded = reloaded else { return .stopped }
            guard case .media(let media) = loaded.parsed.playlist else {
                throw DownloadError.playlist(
                    code: .notAMediaPlaylist,
                    message:
                        "\(url) is no longer a media playlist, so \(assetId) cannot go on recording; `stowage resume \(assetId)` tries "
                        + "again, and `stowage stop \(assetId)` ends the recording with what it has"
                )
            }
            let update = try await recording.merge(media, url: loaded.url, renditionId: id)
            if !update.newKeys.isEmpty || !update.newFiles.isEmpty { found(update) }
            if let gap = update.merge.gap { events.yield(.recordingGap(gap)) }
            if update.merge.ended { return .endList }
            // A stale copy from a cache now and then is harmless; a playlist that stays behind the recording restarted
            // its numbering, and would otherwise be reloaded for ever with nothing recorded.
            behind = update.merge.isBehind ? behind + 1 : 0
            if behind >= 5 {
                throw DownloadError.playlist(
                    code: .liveSequenceReset,
                    message:
                        "\(url) went back to media sequence numbers the recording of \(assetId) already holds, five reloads in a "
                        + "row: the stream restarted its numbering; record it again under a new asset ID"
                )
            }
            if update.merge.reachedLimit { return .duration }
            canBlock = media.serverControl?.canBlockReload == true
            let targetDuration = Double(max(media.targetDuration, 1))
            let changed = update.merge.appended > 0
            var wait = changed ? targetDuration : targetDuration / 2
            if canBlock, changed { wait = 0 }
            if update.merge.gap != nil, !canBlock { catchUp = max(0.5, (catchUp ?? targetDuration) / 2) }
            if let catchUp { wait = min(wait, catchUp) }
            nextLoad = started + .seconds(wait)
        }
    }

    /// The result of `body`, or nil as soon as the recording is asked to stop (checked every 100 ms; `body` is then
    /// cancelled).
    private func untilStopped<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T? {
        let control = recordingControl
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                while !control.stopRequested { try await Task.sleep(for: .milliseconds(100)) }
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    /// `url` with `_HLS_msn=N` (RFC 8216bis 6.2.5.2): the server answers once the playlist holds segment N.
    static func blockingReloadURL(_ url: URL, nextSequence: Int) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        var items = (components.queryItems ?? []).filter { !$0.name.hasPrefix("_HLS_") }
        items.append(URLQueryItem(name: "_HLS_msn", value: String(nextSequence)))
        components.queryItems = items
        return components.url ?? url
    }

    /// The keys of `manifest` this device already holds: skd key IDs of a lease that holds key material, identity
    /// keys in the key store.
    func heldKeys(of manifest: PackageManifest) throws -> Set<String> {
        let keyStore = try KeyStore(dataDirectory: session.dataDirectory.url, machineID: session.machineID, clock: session.clock)
        let leased = Set(
            try keyStore.leases(assetId: assetId).filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial }.flatMap(\.record.terms.keyIds)
        )
        var held = Set<String>()
        for key in manifest.keys {
            switch key.kind {
            case .skd: if leased.contains(key.keyId) { held.insert(key.keyId) }
            case .identity:
                // Not stored, or its local lifetime over: to fetch again. Any other failure is the store's, and says so.
                do {
                    _ = try keyStore.identityKey(uri: key.uri, at: now)
                    held.insert(key.keyId)
                } catch let error as KeyStoreError where [.identityKeyNotFound, .identityKeyExpired].contains(error.code) {
                    continue
                }
            }
        }
        return held
    }
}
