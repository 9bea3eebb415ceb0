import Foundation
import HLS
import KeyDelivery
import OfflinePackage
import StowageCore
import StowageCrypto
import Synchronization

/// Whether a recording was asked to stop: Ctrl-C ends a live recording and keeps it (``DownloadTask/stopRecording()``),
/// where it pauses a VOD download.
final class RecordingControl: Sendable {
    private let state: Mutex<(recording: Bool, stopRequested: Bool)>

    /// - Parameter stopRequested: the recording is to end as soon as it starts (`DownloadSession.resume(assetId:
    ///   endingRecording:)`): its playlists are not reloaded again, and what they list is fetched.
    init(stopRequested: Bool = false) {
        state = Mutex((false, stopRequested))
    }

    /// The task records a live stream (the plan says so): Ctrl-C now stops the recording.
    func beginRecording() { state.withLock { $0.recording = true } }

    var stopRequested: Bool { state.withLock { $0.stopRequested } }

    /// Asks a recording to stop; returns false when the task does not record or was already asked.
    func requestStop() -> Bool {
        state.withLock { state in
            guard state.recording, !state.stopRequested else { return false }
            state.stopRequested = true
            return true
        }
    }
}

/// The growing package of a live recording: the manifest, each rendition's recorded playlist, and the files that
/// carry them on disk (the recorded playlists in `.recording/`, the local playlists, the manifest, in that order).
actor RecordingPackage {
    static let directoryName = ".recording"

    private var builder: PlanBuilder
    let package: PackageDirectory
    /// Seals `data:` keys before the manifest that names them is written.
    let storeInlineKeys: @Sendable ([String: SecretBytes]) throws -> Void

    init(
        manifest: PackageManifest,
        recorded: [String: RecordedPlaylist],
        package: PackageDirectory,
        storeInlineKeys: @escaping @Sendable ([String: SecretBytes]) throws -> Void
    ) {
        var builder = PlanBuilder(manifest: manifest)
        builder.recordedPlaylists = recorded
        self.builder = builder
        self.package = package
        self.storeInlineKeys = storeInlineKeys
    }

    var manifest: PackageManifest { builder.manifest }

    /// The renditions still recording, with their source URLs.
    var liveRenditions: [(id: String, url: URL)] {
        builder.manifest.renditions.compactMap { rendition in
            guard builder.recordedPlaylists[rendition.id] != nil, let url = URL(string: rendition.sourceURL) else { return nil }
            return (rendition.id, url)
        }
    }

    func recordedDuration(of renditionId: String) -> Double { builder.recordedPlaylists[renditionId]?.duration ?? 0 }

    func lastSequence(of renditionId: String) -> Int? { builder.recordedPlaylists[renditionId]?.lastSequence }

    /// Where `renditionId`'s recorded playlist lives in `package`.
    static func recordedPlaylistURL(_ renditionId: String, in package: PackageDirectory) -> URL {
        package.url.appendingPathComponent(directoryName).appendingPathComponent("\(renditionId).m3u8")
    }

    /// The recorded playlists of a package on disk (a resumed recording).
    static func load(_ manifest: PackageManifest, package: PackageDirectory) throws -> [String: RecordedPlaylist] {
        var recorded: [String: RecordedPlaylist] = [:]
        for rendition in manifest.renditions {
            let url = recordedPlaylistURL(rendition.id, in: package)
            guard FileManager.default.fileExists(atPath: url.path) else { continue }
            guard let data = FileManager.default.contents(atPath: url.path), let parsed = try? PlaylistParser.parse(data),
                case .media(let media) = parsed.playlist
            else {
                throw DownloadError.storage(
                    "the recorded playlist \(url.path) of \(manifest.assetId) cannot be read; stop the recording with "
                        + "`stowage delete \(manifest.assetId)` and record again"
                )
            }
            recorded[rendition.id] = RecordedPlaylist(playlist: media)
        }
        return recorded
    }

    /// Writes the recorded playlists (only), for a new plan.
    static func write(_ recorded: [String: RecordedPlaylist], package: PackageDirectory) throws {
        for (id, playlist) in recorded.sorted(by: { $0.key < $1.key }) {
            let url = recordedPlaylistURL(id, in: package)
            try PackageDirectory.writeAtomically(Data(PlaylistWriter.write(.media(playlist.playlist)).utf8), to: url)
        }
    }

    /// What one reload changed.
    struct Update: Sendable {
        var merge: RecordedPlaylist.Merge
        /// Files to fetch that the package did not list before.
        var newFiles: [PackageFile]
        /// Keys the package did not list before.
        var newKeys: [PackageKey]
    }

    /// Folds a reload into `renditionId`'s recording and writes it out.
    func merge(_ reload: MediaPlaylist, url: URL, renditionId: String) throws -> Update {
        guard var recorded = builder.recordedPlaylists[renditionId] else {
            return Update(merge: .init(), newFiles: [], newKeys: [])
        }
        let known = Set(builder.manifest.files.map(\.path))
        let knownKeys = Set(builder.manifest.keys.map(\.keyId))
        let reload = try builder.referencingInlineKeys(reload)
        let merge = try recorded.merge(reload, url: url, renditionId: renditionId, limit: builder.manifest.recording?.maximumDuration)
        guard merge.appended > 0 else { return Update(merge: merge, newFiles: [], newKeys: []) }
        builder.recordedPlaylists[renditionId] = recorded
        if let gap = merge.gap { builder.manifest.recording?.gaps.append(gap) }
        try builder.refresh(renditionId: renditionId, ended: false)
        try save(renditionIds: [renditionId])
        let files = builder.manifest.rendition(id: renditionId)?.files.filter { !known.contains($0.path) } ?? []
        let keys = builder.manifest.keys.filter { !knownKeys.contains($0.keyId) }
        return Update(merge: merge, newFiles: files, newKeys: keys)
    }

    /// Marks the segment stored at `path` as a gap: the server answered 404 or 410 for it, so it left the source
    /// before it was fetched. Returns the gap, or nil when `path` is not a recorded segment.
    func markUnavailable(path: String) throws -> PackageRecordingGap? {
        guard let r = builder.manifest.renditions.firstIndex(where: { $0.segments.contains { $0.file?.path == path } }),
            let s = builder.manifest.renditions[r].segments.firstIndex(where: { $0.file?.path == path })
        else { return nil }
        let rendition = builder.manifest.renditions[r]
        guard var recorded = builder.recordedPlaylists[rendition.id], s < recorded.playlist.segments.count else { return nil }
        recorded.markGap(at: s)
        builder.recordedPlaylists[rendition.id] = recorded
        let segment = rendition.segments[s]
        let gap = PackageRecordingGap(
            renditionId: rendition.id,
            firstMediaSequence: segment.mediaSequence,
            segments: 1,
            seconds: segment.duration,
            startsAt: segment.programDateTime,
            endsAt: segment.programDateTime.map { $0 + segment.duration }
        )
        builder.manifest.recording?.gaps.append(gap)
        try builder.refresh(renditionId: rendition.id, ended: builder.manifest.recording?.hasEnded ?? true)
        try save(renditionIds: [rendition.id])
        return gap
    }

    /// Brings the manifest up to the recorded playlists, which a run killed between writing them and writing the
    /// manifest left ahead of it; returns the manifest.
    func reconcile() throws -> PackageManifest {
        let ids = Array(builder.recordedPlaylists.keys).sorted()
        for id in ids { try builder.refresh(renditionId: id, ended: false) }
        try save(renditionIds: ids)
        return builder.manifest
    }

    /// Ends the recording: every local playlist gets EXT-X-ENDLIST (type VOD), the manifest the end and its reason.
    func end(_ reason: PackageRecording.EndReason, at now: Int64) throws -> PackageManifest {
        let ids = Array(builder.recordedPlaylists.keys).sorted()
        for id in ids {
            builder.recordedPlaylists[id]?.end()
            try builder.refresh(renditionId: id, ended: true)
        }
        builder.manifest.recording?.endedAt = now
        builder.manifest.recording?.endReason = reason
        builder.manifest.updatedAt = now
        try save(renditionIds: ids)
        return builder.manifest
    }

    private func save(renditionIds: [String]) throws {
        if !builder.inlineKeys.isEmpty {
            try storeInlineKeys(builder.inlineKeys)
            builder.inlineKeys = [:]
        }
        do {
            for id in renditionIds {
                guard let recorded = builder.recordedPlaylists[id], let rendition = builder.manifest.rendition(id: id) else { continue }
                let url = Self.recordedPlaylistURL(id, in: package)
                try PackageDirectory.writeAtomically(Data(PlaylistWriter.write(.media(recorded.playlist)).utf8), to: url)
                if let text = builder.playlists[rendition.playlist] {
                    try PackageDirectory.writeAtomically(Data(text.utf8), to: try package.url(forRelativePath: rendition.playlist))
                }
            }
        } catch {
            throw DownloadError.storage(
                "cannot write the playlists of recording \(builder.manifest.assetId) (\(FileErrorText.describe(error))); free space or "
                    + "fix the folder's permissions, then `stowage resume \(builder.manifest.assetId)` goes on from the live edge"
            )
        }
        try package.writeManifest(builder.manifest)
    }
}

/// Obtains keys that appear while a stream is recorded, one acquisition at a time: identity keys as they appear; skd
/// keys in a new lease for their group of keys (``DownloadRunner/recordingKeysPerLease``), stored superseding the
/// group's older lease and taking the asset's first play in one transaction
/// (``KeyDelivery/KeyStore/persist(_:keyServer:at:superseding:)``), so a rotation
/// never starts a second playback window (docs/live-recording.md).
actor RecordingKeys {
    private var held: Set<String>
    /// The acquisition under way and the key IDs it obtains.
    private var inFlight: Task<Set<String>, any Error>?
    private let acquire: @Sendable ([PackageKey]) async throws -> Void

    init(held: Set<String>, acquire: @escaping @Sendable ([PackageKey]) async throws -> Void) {
        self.held = held
        self.acquire = acquire
    }

    /// Returns once every key of `keys` is held. Renditions that meet a new key together share one acquisition, and
    /// its failure: no second request follows a refusal.
    ///
    /// - Throws: the acquisition's error; `CancellationError` when the task is paused (the acquisition is cancelled).
    func ensure(_ keys: [PackageKey]) async throws {
        // Bounded: each pass returns, throws, or takes in one acquisition that ended.
        for _ in 0..<8 {
            try Task.checkCancellation()
            let missing = keys.filter { !held.contains($0.keyId) }
            if missing.isEmpty { return }
            let task: Task<Set<String>, any Error>
            if let inFlight {
                task = inFlight
            } else {
                let acquire = self.acquire
                task = Task {
                    try await acquire(missing)
                    return Set(missing.map(\.keyId))
                }
                inFlight = task
            }
            let outcome = await withTaskCancellationHandler {
                await task.result
            } onCancel: {
                task.cancel()
            }
            if inFlight == task { inFlight = nil }
            held.formUnion(try outcome.get())
        }
        throw DownloadError.keys(
            code: .keysUnavailable,
            message:
                "the keys \(keys.filter { !held.contains($0.keyId) }.map(\.keyId).joined(separator: ", ")) of a recording were "
                + "not obtained after several acquisitions; run `stowage resume` to try again"
        )
    }
}
