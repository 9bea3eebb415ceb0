import MediaCrypto
import OfflinePackage
import StowageCrypto
import Synchronization

/// The files of online renditions as the player gets them: fetched whole from the source (``OnlineSource``),
/// decrypted in memory with the stored lease's key when it covers them, else with the key the source obtains (a
/// `streaming` lease, memory only), and kept for a few requests so that a player's byte ranges of one segment cost
/// one fetch.
///
/// A segment is a few seconds of media, so holding one decrypted segment per request is bounded by the source's
/// segment size (at most the source's `maximumOnlineFileBytes`); nothing of an online rendition is written to disk.
final class OnlineFiles: Sendable {
    /// Decrypted segments kept for range requests.
    static let keptSegments = 4

    private struct State {
        var keys: [String: SecretBytes] = [:]
        var initSections: [String: InitSectionCache.Prepared] = [:]
        var recent: [(path: String, bytes: [UInt8])] = []
    }

    private let state = Mutex(State())

    /// The clear bytes of the online file `role` (a segment needs its init section, `initRole`, when it is cbcs).
    func clear(_ role: FileRole, initRole: FileRole?, in authorization: PlaybackAuthorization) async throws(PlaybackError) -> [UInt8] {
        let file = role.file
        let assetId = authorization.assetId
        switch role.kind {
        case .initSection:
            return try await initSection(role, in: authorization).bytes
        case .segment:
            if let kept = state.withLock({ $0.recent.first { $0.path == file.path }?.bytes }) { return kept }
            let stored = try await fetch(file, in: authorization)
            var clear = stored
            if let key = file.key {
                var decryption = try Decryptions.wholeFile(
                    key,
                    path: file.path,
                    in: authorization,
                    content: try await contentKey(key, in: authorization)
                )
                if decryption.method.isSampleEncryption {
                    decryption.container = SegmentContainer.detect(Array(stored.prefix(SegmentContainer.detectionLength)))
                    if decryption.container == .fragmentedMP4 {
                        guard let initRole, let protection = try await initSection(initRole, in: authorization).protection else {
                            throw .unsupportedEncryption(
                                assetId: assetId,
                                path: file.path,
                                detail: "a SAMPLE-AES fMP4 segment without a cbcs init section"
                            )
                        }
                        decryption.initSection = protection
                    }
                }
                clear = try decryption.clear(stored, path: file.path, assetId: assetId)

            }
            state.withLock { state in
                state.recent.removeAll { $0.path == file.path }
                state.recent.append((file.path, clear))
                if state.recent.count > Self.keptSegments { state.recent.removeFirst() }
            }
            return clear
        }
    }

    /// Obtains every key `rendition`'s files need, before its playlist is served: a key the key server refuses then
    /// fails the playlist, which players skip (ffmpeg marks the rendition broken), rather than its first segment,
    /// which ffmpeg's HLS reader treats as fatal for the whole presentation.
    func prepareKeys(of rendition: PackageRendition, in authorization: PlaybackAuthorization) async throws(PlaybackError) {
        var seen: Set<String> = []
        for file in rendition.files {
            guard let key = file.key, seen.insert(key.keyId).inserted else { continue }
            _ = try await contentKey(key, in: authorization)
        }
    }

    private func initSection(_ role: FileRole, in authorization: PlaybackAuthorization) async throws(PlaybackError) -> InitSectionCache.Prepared {
        let file = role.file
        if let done = state.withLock({ $0.initSections[file.path] }) { return done }
        let stored = try await fetch(file, in: authorization)
        guard stored.count <= InitSectionCache.maximumSize else {
            throw .unsupportedEncryption(
                assetId: authorization.assetId,
                path: file.path,
                detail: "an init section over \(InitSectionCache.maximumSize >> 20) MiB"
            )
        }
        var decryption: Decryption?
        if let key = file.key {
            decryption = try Decryptions.wholeFile(key, path: file.path, in: authorization, content: try await contentKey(key, in: authorization))
        }
        let prepared = try InitSectionCache.clear(stored, role: role, decryption: decryption, assetId: authorization.assetId)
        state.withLock { $0.initSections[file.path] = prepared }
        return prepared
    }

    private func fetch(_ file: PackageFile, in authorization: PlaybackAuthorization) async throws(PlaybackError) -> [UInt8] {
        guard let online = authorization.online else { throw .segmentMissing(assetId: authorization.assetId, path: file.path) }
        do {
            return try await online.source.fetch(file)
        } catch {
            throw .onlineUnavailable(assetId: authorization.assetId, path: file.path, detail: "\(error)")
        }
    }

    /// The stored lease's key when it has this one, else the one the source obtains (once per session).
    private func contentKey(_ key: PackageSegmentKey, in authorization: PlaybackAuthorization) async throws(PlaybackError) -> SecretBytes {
        if let stored = authorization.keys[key.keyId] { return stored }
        if let fetched = state.withLock({ $0.keys[key.keyId] }) { return fetched }
        guard let online = authorization.online, let packageKey = authorization.packageKey(key.keyId) else {
            throw .keyMissing(assetId: authorization.assetId, keyId: key.keyId, detail: "no playlist of the asset names the key \(key.keyId)")
        }
        let content: SecretBytes
        do {
            content = try await online.source.contentKey(packageKey)
        } catch {
            throw .onlineKeyRefused(assetId: authorization.assetId, keyId: key.keyId, detail: "\(error)")
        }
        state.withLock { $0.keys[key.keyId] = content }
        return content
    }
}
